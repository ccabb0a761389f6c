#!/usr/bin/env bash
# The worker's system service as its own user with rootless podman, for real, on this machine:
#  1. a coordinator (the binary under test) on loopback, with a funded team and an enrollment token;
#  2. `gpupool worker install --runtime podman`: the system user gpupool-worker (systemd-sysusers),
#     its subordinate ids, lingering, the token (0640 root:gpupool-worker), worker.toml and the unit;
#  3. the unit's ExecStart run as its User= with its Environment=, as systemd would start it (systemd
#     need not run here: systemctl is a recorder, and this script starts the service), the test image
#     in the service user's own rootless storage;
#  4. a job with outputs and a team cache, through the pool: it must succeed, its outputs come back,
#     and what it wrote on the host belong to gpupool-worker's ids, nothing made 0777;
#  5. with a test binary given: tests/security/test_job_links.cpp run as gpupool-worker, with
#     GPUPOOL_REQUIRE_CONTAINERS=1, so its podman case runs against that user's rootless podman;
#  6. `gpupool worker uninstall --purge`; the user stays, as systemd-sysusers users do.
#
# It changes this machine (the user, /etc/subuid, /etc/subgid, /etc/gpupool/worker*, the unit file)
# and needs root and a kernel that lets unprivileged users make user namespaces, so it is not part
# of `make test`; run it by hand where an owner would install the worker:
#   sudo tests/security/rootless_service.sh build/gpupool [build/gpupool_tests]
# CONTAINERS_CONF, when set, is given to the service user as its ~/.config/containers/containers.conf
# (this CI host needs .ci/containers/containers.conf: runc and cgroupfs). Without /dev/net/tun for
# unprivileged users (slirp4netns cannot run), jobs get --container-arg=--network=none, as an owner
# would set in a drop-in.
set -euo pipefail
bin=$(realpath "${1:?usage: rootless_service.sh GPUPOOL_BINARY [TEST_BINARY]}")
tests_bin=${2:+$(realpath "$2")}
image=localhost/gpupool/busybox:latest
unit=/etc/systemd/system/gpupool-worker.service
say() { echo "rootless_service: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || { say "run as root (it installs the service)"; exit 2; }
[ -e "$unit" ] && { say "$unit exists: uninstall the worker first"; exit 2; }
podman image exists "$image" || { say "no $image for root's podman: run .ci/setup-containers"; exit 2; }

work=$(mktemp -d /tmp/gpupool-rootless.XXXXXX)
chmod 0755 "$work"
coord_pid=
worker_pid=
cleanup() {
  set +e
  [ -n "$worker_pid" ] && kill -TERM "$worker_pid" 2> /dev/null && wait "$worker_pid" 2> /dev/null
  if [ -e "$unit" ]; then
    "$bin" worker uninstall --purge --systemctl "$work/systemctl" > "$work/uninstall.out" 2>&1 ||
      say "uninstall failed: $(cat "$work/uninstall.out")"
  fi
  [ -n "$coord_pid" ] && kill -TERM "$coord_pid" 2> /dev/null && wait "$coord_pid" 2> /dev/null
  say "logs kept in $work"
}
trap cleanup EXIT

# 1. The coordinator.
"$bin" coordinator --listen 127.0.0.1:0 --db "$work/pool.db" --port-file "$work/port" --tick-ms 100 \
  > "$work/coordinator.out" 2> "$work/coordinator.err" &
coord_pid=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || fail "the coordinator did not start: $(cat "$work/coordinator.err")"
url="http://127.0.0.1:$(cat "$work/port")"
admin=$(grep -o 'gpp_[A-Za-z0-9_-]*' "$work/coordinator.out" | head -n 1)
api() { curl -fsS -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' -X "$1" "$url$2" -d "$3"; }
token_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])'; }
api POST /v1/admin/teams '{"name": "owners"}' > /dev/null
api POST /v1/admin/teams '{"name": "fellows"}' > /dev/null
api POST /v1/admin/grants '{"team": "fellows", "amount_micro": 1000000000}' > /dev/null
api POST /v1/admin/tokens '{"role": "member", "team": "fellows", "label": "alice"}' | token_of > "$work/member.token"
api POST /v1/admin/tokens '{"role": "enroll", "team": "owners"}' | token_of > "$work/enroll.token"

# 2. The install, for real but for systemctl.
printf '#!/bin/sh\necho "systemctl $*" >> %s/systemctl.log\n' "$work" > "$work/systemctl"
chmod 0755 "$work/systemctl"
"$bin" --token-file "$work/enroll.token" worker install --coordinator "$url" --runtime podman \
  --systemctl "$work/systemctl" > "$work/install.out" 2>&1 || fail "worker install: $(cat "$work/install.out")"
say "install asked systemd for: $(tr '\n' ';' < "$work/systemctl.log")"
user=$(sed -n 's/^User=//p' "$unit")
[ "$user" = gpupool-worker ] || fail "the unit runs as \`$user\`, not gpupool-worker"
uid=$(id -u "$user")
gid=$(id -g "$user")
home=$(getent passwd "$user" | cut -d: -f6)
grep -q "^$user:" /etc/subuid || fail "no subordinate uids for $user in /etc/subuid"
say "the unit's user: $user ($uid:$gid), home $home"

# 3. The service's environment, as systemd would give it, and the test image in its own storage.
declare -a env_vars=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$home" "USER=$user")
while IFS= read -r line; do env_vars+=("$line"); done < <(sed -n 's/^Environment=//p' "$unit")
run_dir=/run/user/$uid # what logind makes for a lingering user
install -d -o "$user" -g "$gid" -m 0700 "$run_dir"
if [ -n "${CONTAINERS_CONF:-}" ]; then
  install -d -o "$user" -g "$gid" "$home/.config" "$home/.config/containers"
  install -o "$user" -g "$gid" -m 0644 "$CONTAINERS_CONF" "$home/.config/containers/containers.conf"
fi
as_user() { (cd / && exec setpriv --reuid="$uid" --regid="$gid" --init-groups env -i "${env_vars[@]}" "$@"); }
# The same without a subshell in between, so that $! is the worker itself (setpriv and env exec it).
as_user_bg() {
  cd /
  setpriv --reuid="$uid" --regid="$gid" --init-groups env -i "${env_vars[@]}" "$@" > "$work/worker.log" 2>&1 &
  worker_pid=$!
  cd - > /dev/null
}
podman save "$image" > "$work/image.tar"
chmod 0644 "$work/image.tar"
as_user podman load -i "$work/image.tar" > "$work/load.out" 2>&1 || fail "podman load as $user: $(cat "$work/load.out")"
as_user podman run --rm --network none --user 65534:65534 "$image" true 2> "$work/probe.err" ||
  fail "rootless podman cannot run a job as uid 65534 here: $(cat "$work/probe.err")"
extra=()
if ! as_user podman run --rm "$image" true 2> /dev/null; then
  say "rootless networking does not work here (no /dev/net/tun for $user?): jobs get --network=none"
  extra=(--container-arg=--network=none)
fi

exec_line=$(sed -n 's/^ExecStart=//p' "$unit")
eval "set -- $exec_line" # the unit's words (systemd's quoting of these plain words is the shell's)
as_user_bg "$@" "${extra[@]}"
say "the service's command, as $user: $* ${extra[*]}"

# 4. A job with outputs and a team cache.
cat > "$work/job.toml" << 'TOML'
format = 1
name = "rootless-check"
image = "localhost/gpupool/busybox:latest"
command = "id -u > \"$GPUPOOL_OUTPUT_DIR/uid\" && echo kept > /team-cache/note && echo done"
[resources]
gpus = 0
cpus = 0.5
memory = "64MiB"
max_runtime = "2m"
[outputs]
paths = ["uid"]
TOML
member=(--url "$url" --token-file "$work/member.token")
"$bin" "${member[@]}" submit "$work/job.toml" --wait > "$work/submit.out" 2>&1 ||
  fail "the job did not succeed: $(cat "$work/submit.out"); worker: $(tail -n 20 "$work/worker.log")"
job=$(sed -n 's/.*(id \([0-9]*\)).*/\1/p' "$work/submit.out" | head -n 1)
mkdir -p "$work/out"
"$bin" "${member[@]}" fetch "${job:-1}" "$work/out" > "$work/fetch.out" 2>&1 || fail "fetch: $(cat "$work/fetch.out")"
got=$(find "$work/out" -name uid | head -n 1)
[ -n "$got" ] && [ -s "$got" ] || fail "no outputs came back: $(ls -R "$work/out")"
say "the job succeeded; its outputs came back: it ran as uid $(cat "$got") in its container"
spool=$(sed -n 's/^StateDirectory=//p' "$unit")
# The worker's own folders (attempts, caches, spool); podman's image storage under the same home
# holds the images' own 1777 folders (/tmp), which are the image's, not the worker's.
bad=$(find "/var/lib/$spool" -xdev -path "$home/.local/share/containers" -prune -o -perm -0002 ! -type l -print \
  2> /dev/null | head -n 5)
[ -z "$bad" ] || fail "world-writable in the spool: $bad"
notes=$(find "/var/lib/$spool" "$home" -name note -path '*cache*' 2> /dev/null | head -n 1)
[ -n "$notes" ] || fail "the team cache kept nothing"
owner=$(stat -c %u "$notes")
# The job's uid maps into the service user's subordinate range (or is the user itself).
sub_start=$(awk -F: -v u="$user" '$1 == u { print $2 }' /etc/subuid | head -n 1)
[ "$owner" = "$uid" ] || [ "$owner" -ge "$sub_start" ] || fail "the team cache's file belongs to uid $owner"
say "the team cache holds $notes (uid $owner), nothing world-writable in the spool"

# 5. The link tests as the service user, against its rootless podman.
if [ -n "$tests_bin" ]; then
  kill -TERM "$worker_pid"
  wait "$worker_pid" || true
  worker_pid=
  install -d -o "$user" -g "$gid" -m 0700 "$work/tmp"
  # The process runtime and the user's rootless podman; docker is root's (or its group's).
  env_vars+=("GPUPOOL_TEST_RUNTIMES=process,podman" "GPUPOOL_REQUIRE_CONTAINERS=1" "GPUPOOL_LOG_LEVEL=warn"
    "TMPDIR=$work/tmp")
  as_user "$tests_bin" "[links]" > "$work/links.out" 2>&1 || fail "the link tests as $user: $(tail -n 40 "$work/links.out")"
  say "the link tests passed as $user: $(grep -E 'test cases|All tests' "$work/links.out" | tail -n 1)"
fi
say "passed"
