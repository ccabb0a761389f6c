#!/usr/bin/env bash
# Checks of the fully static gpupool (`make test-static`: ctest -L static in build-static/).
#
#   tests/static/static_checks.sh CHECK BINARY SOURCE_DIR
#
#   artifact  file(1) says "statically linked" and not "dynamically", ldd says "not a dynamic
#             executable", no debug info is left, it is under 20 MB and within a tenth of the size
#             docs/static.md states, and it names the version its file name carries.
#   busybox   in the busybox image (no C library, no dynamic loader): `version`, and `recipe validate`
#             of the demo recipe (exit 0, its six jobs) and of a broken one (exit 1, file:line, field).
#   share     a whole `worker --share` session: the static binary as coordinator on the host's
#             loopback over HTTPS (a throw-away CA), the static binary as worker inside busybox
#             (--runtime process --unsafe-process-runtime; it reaches the coordinator by the name
#             `localhost`, so c-ares resolves it), a two-job sweep with an input file submitted from the
#             host; then its logs, its outputs, each job's state, and the worker's drain on SIGTERM.
#   join      the owner's first minute: the coordinator (static, on the host, plain HTTP: busybox's
#             wget cannot do TLS with it) hands out the static file (--dist); the command `admin
#             enroll` prints runs inside busybox (wget, sha256sum) from nothing to a worker that ran a
#             job, the token in no argv.
#   run       `gpupool run` of the demo recipe (recipes/hello-sweep/recipe.toml, what `make demo` runs) on
#             the host: six jobs succeed and each brings back its greeting.
#
# Exit 0: passed; 1: failed (what failed is printed); 77 (ctest: skipped): podman or the test image is
# missing, unless GPUPOOL_REQUIRE_CONTAINERS=1 (CI), where that fails too.
set -euo pipefail
check=${1:?usage: static_checks.sh CHECK BINARY SOURCE_DIR}
bin=$(realpath -m "${2:?binary}")
src=$(realpath "${3:?source dir}")
image=localhost/gpupool/busybox:latest
export CONTAINERS_CONF=${CONTAINERS_CONF:-$src/.ci/containers/containers.conf}
unset GPUPOOL_URL GPUPOOL_TOKEN GPUPOOL_TOKEN_FILE GPUPOOL_LOG_LEVEL

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
# expect_in TEXT NEEDLE WHAT
expect_in() { [[ $1 == *"$2"* ]] || fail "$3: '$2' not in: $1"; }

[ -f "$bin" ] || fail "no static binary at $bin (make static builds it)"
version=$(basename "$bin" | sed -n 's/^gpupool-\(.*\)-linux-[^-]*$/\1/p')
[ -n "$version" ] || fail "$bin is not named gpupool-VERSION-linux-ARCH"

tmp=$(mktemp -d)
containers=()
cleanup() {
  local c
  for c in "${containers[@]}"; do podman rm -f "$c" > /dev/null 2>&1 || true; done
  jobs -p | xargs -r kill 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

need_podman() {
  local why=""
  if ! command -v podman > /dev/null; then
    why="no podman"
  elif ! podman image exists "$image" 2> /dev/null; then
    why="podman has no $image (make containers, as root)"
  fi
  [ -z "$why" ] && return 0
  [ "${GPUPOOL_REQUIRE_CONTAINERS:-0}" = 1 ] && fail "$why, and GPUPOOL_REQUIRE_CONTAINERS=1"
  echo "skipped: $why" >&2
  exit 77
}
# The flags this host's podman needs (as .ci/containers/containers.conf), the host's network for
# its loopback, the binary read-only.
box=(podman run --network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 -v "$bin:/gpupool:ro")

check_artifact() {
  local what ldd_out size
  what=$(file -b "$bin")
  expect_in "$what" "statically linked" "file $bin"
  [[ $what != *dynamically* ]] || fail "file says dynamically linked: $what"
  expect_in "$what" ", stripped" "file $bin"
  ldd_out=$(ldd "$bin" 2>&1 || true)
  expect_in "$ldd_out" "not a dynamic executable" "ldd $bin"
  size=$(stat -c %s "$bin")
  [ "$size" -lt $((20 * 1024 * 1024)) ] || fail "$bin is $size bytes, over 20 MB"
  # docs/static.md states the file's measured size ("(N.N MiB for VERSION"): within a tenth of it.
  local stated kib
  stated=$(sed -n 's/.*(\([0-9][0-9]*\.[0-9]\) MiB for .*/\1/p' "$src/docs/static.md" | head -1)
  [ -n "$stated" ] || fail "docs/static.md states no size as '(N.N MiB for VERSION'"
  kib=$((size / 1024))
  awk -v kib="$kib" -v mib="$stated" 'BEGIN { d = kib / 1024 - mib; if (d < 0) d = -d; exit !(d <= mib / 10) }' ||
    fail "docs/static.md says $stated MiB; the file is $(awk -v k="$kib" 'BEGIN { printf "%.1f", k / 1024 }') MiB: measure and update it"
  [ "$("$bin" version)" = "gpupool $version (recipe format 1)" ] || fail "version: $("$bin" version)"
  ok "statically linked, stripped, $((size / 1024)) KiB, version $version"
}

check_busybox() {
  need_podman
  local out rc
  # The image really has no C library: the negative control for "it runs without one".
  out=$("${box[@]}" --rm "$image" sh -c 'ls /lib /lib64 /usr/lib 2>/dev/null | grep -c "^libc\|^ld-linux" || true')
  [ "$out" = 0 ] || fail "the busybox image has a C library or loader ($out entries)"
  out=$("${box[@]}" --rm "$image" /gpupool version) || fail "version in busybox exited $?: $out"
  [ "$out" = "gpupool $version (recipe format 1)" ] || fail "version in busybox: $out"
  out=$("${box[@]}" --rm -v "$src/recipes:/recipes:ro" "$image" /gpupool recipe validate /recipes/hello-sweep/recipe.toml) ||
    fail "recipe validate in busybox exited $?: $out"
  expect_in "$out" "6 jobs from /recipes/hello-sweep/recipe.toml" "recipe validate"
  expect_in "$out" "hello-hola-2" "recipe validate"
  printf 'format = 1\nname = "x"\nimage = "busybox"\ncommand = "true"\n[resources]\ncpus = 1\nmemroy = "1GiB"\n' \
    > "$tmp/bad.toml"
  rc=0
  out=$("${box[@]}" --rm -v "$tmp/bad.toml:/bad.toml:ro" "$image" /gpupool recipe validate /bad.toml 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "recipe validate of a broken recipe exited $rc, not 1: $out"
  expect_in "$out" "/bad.toml:7" "the broken recipe's error"
  expect_in "$out" "memroy" "the broken recipe's error"
  ok "in busybox: version, recipe validate (good and broken)"
}

# A throw-away CA and a certificate for localhost / 127.0.0.1 that it signs.
make_certs() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=gpupool-test-ca -keyout "$tmp/ca.key" \
    -out "$tmp/ca.pem" 2> /dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$tmp/key.pem" -out "$tmp/cert.csr" 2> /dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$tmp/san.ext"
  openssl x509 -req -in "$tmp/cert.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial -days 2 \
    -extfile "$tmp/san.ext" -out "$tmp/cert.pem" 2> /dev/null
}

# start_coordinator [EXTRA FLAG...]: over HTTPS with make_certs' certificate; PLAIN=1: over HTTP.
start_coordinator() {
  local tls=(--tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem")
  [ "${PLAIN:-0}" = 1 ] && tls=()
  "$bin" coordinator --listen 127.0.0.1:0 --db "$tmp/pool.db" --port-file "$tmp/port" --tick-ms 50 \
    "${tls[@]}" "$@" > "$tmp/coordinator.out" 2> "$tmp/coordinator.err" &
  local i
  for i in $(seq 1 200); do
    [ -s "$tmp/port" ] && break
    sleep 0.05
  done
  [ -s "$tmp/port" ] || fail "the coordinator did not start: $(cat "$tmp/coordinator.err")"
}

check_share() {
  need_podman
  command -v jq > /dev/null || fail "jq is missing (.ci/packages-static.txt)"
  make_certs
  start_coordinator
  local url admin sweep name worker out rc
  url=https://localhost:$(cat "$tmp/port")
  admin=$(grep -o 'gpp_[0-9a-f]\{64\}' "$tmp/coordinator.out" | head -1)
  [ -n "$admin" ] || fail "no admin token in the coordinator's output"
  printf '%s' "$admin" > "$tmp/admin.token"
  g() { "$bin" --url "$url" --ca-cert "$tmp/ca.pem" "$@"; }
  g --token-file "$tmp/admin.token" admin team create fellows > /dev/null
  g --token-file "$tmp/admin.token" admin grant fellows 100 > /dev/null
  g --token-file "$tmp/admin.token" admin token create --team fellows --label alice > "$tmp/member.token" 2> /dev/null
  g --token-file "$tmp/admin.token" admin enroll fellows > "$tmp/enroll.token" 2> /dev/null

  mkdir -p "$tmp/spool" "$tmp/job"
  worker=gpupool-static-worker-$$
  containers+=("$worker")
  "${box[@]}" -d --name "$worker" -e HOME=/spool -v "$tmp/spool:/spool" -v "$tmp/ca.pem:/ca.pem:ro" \
    -v "$tmp/enroll.token:/enroll.token:ro" "$image" \
    /gpupool --log-level info --ca-cert /ca.pem --token-file /enroll.token worker --share --coordinator "$url" \
    --runtime process --unsafe-process-runtime --work-dir /spool/work --name busybox-worker \
    --heartbeat-ms 300 --poll-wait-ms 1000 --cpus-milli 2000 --memory-mib 1024 > /dev/null

  echo "a line from the inputs" > "$tmp/job/greeting.txt"
  # Each job proves where it ran: PID 1 of its machine is /gpupool only inside the container.
  cat > "$tmp/job/static.toml" <<'EOF'
format = 1
name = "static-{n}"
image = "localhost/gpupool/busybox:latest"
command = "echo log-line-{n}; cat $GPUPOOL_WORK_DIR/greeting.txt > $GPUPOOL_OUTPUT_DIR/result.txt; echo n={n} pid1=$(tr '\\0' ' ' < /proc/1/cmdline | cut -d' ' -f1) >> $GPUPOOL_OUTPUT_DIR/result.txt"
[resources]
cpus = 0.1
memory = "32MiB"
max_runtime = "1m"
[inputs]
paths = ["greeting.txt"]
[outputs]
paths = ["result.txt"]
[sweep]
n = [1, 2]
EOF
  out=$(g --token-file "$tmp/member.token" --json submit "$tmp/job/static.toml" 2> "$tmp/submit.err") ||
    fail "submit exited $?: $(cat "$tmp/submit.err")"
  sweep=$(jq -r .sweep_id <<< "$out")
  rc=0
  timeout 120 "$bin" --url "$url" --ca-cert "$tmp/ca.pem" --token-file "$tmp/member.token" wait --sweep "$sweep" \
    > "$tmp/wait.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "--- worker's log:" >&2
    podman logs "$worker" 2>&1 | tail -30 >&2
    fail "wait --sweep $sweep exited $rc: $(cat "$tmp/wait.out")"
  fi
  out=$(g --token-file "$tmp/member.token" --json jobs --sweep "$sweep")
  [ "$(jq -r '[.jobs[].state] | join(",")' <<< "$out")" = "succeeded,succeeded" ] || fail "job states: $out"
  out=$(g --token-file "$tmp/member.token" logs --sweep "$sweep" 2>&1) || fail "logs exited $?: $out"
  expect_in "$out" "log-line-1" "the sweep's logs"
  expect_in "$out" "log-line-2" "the sweep's logs"
  g --token-file "$tmp/member.token" fetch --sweep "$sweep" "$tmp/results" > /dev/null 2>&1 || fail "fetch exited $?"
  for n in 1 2; do
    [ "$(cat "$tmp/results/static-$n/result.txt")" = "a line from the inputs
n=$n pid1=/gpupool" ] || fail "static-$n's output: $(cat "$tmp/results/static-$n/result.txt" 2>&1)"
  done
  out=$(g --token-file "$tmp/admin.token" --json admin workers)
  [ "$(jq -r '[.workers[].name] | join(",")' <<< "$out")" = "busybox-worker" ] || fail "workers: $out"
  # SIGTERM drains the idle worker: it leaves with exit 0.
  podman stop -t 20 "$worker" > /dev/null
  rc=$(podman inspect -f '{{.State.ExitCode}}' "$worker")
  [ "$rc" = 0 ] || fail "the worker exited $rc on SIGTERM: $(podman logs "$worker" 2>&1 | tail -5)"
  ok "worker --share in busybox over HTTPS by name: 2 jobs succeeded, logs and outputs back, drained on SIGTERM"
}

# The owner's first minute (issue 45), as tests/cli/test_join_cli.cpp runs it on the host: the
# static file handed out by the static coordinator (--dist), the command `admin enroll` prints run
# inside busybox (sh, wget, sha256sum; no gpupool, no curl, no C library), from nothing to a worker
# that ran a job; the token from a file, in no process's argv. Over plain HTTP on loopback: busybox's
# wget speaks TLS only with SHA-1 handshake signatures, which OpenSSL 3 servers refuse (docs/static.md);
# the pinned SHA-256s carry the files' integrity either way, and the host test runs it over HTTPS
# with curl.
check_join() {
  need_podman
  command -v jq > /dev/null || fail "jq is missing (.ci/packages-static.txt)"
  mkdir -p "$tmp/dist"
  cp "$bin" "$tmp/dist/$(basename "$bin")"
  local started url admin command joiner out rc job state took
  started=$(date +%s.%N)
  PLAIN=1 start_coordinator --dist "$tmp/dist"
  url=http://localhost:$(cat "$tmp/port")
  admin=$(grep -o 'gpp_[0-9a-f]\{64\}' "$tmp/coordinator.out" | head -1)
  [ -n "$admin" ] || fail "no admin token in the coordinator's output"
  printf '%s' "$admin" > "$tmp/admin.token"
  g() { "$bin" --url "$url" "$@"; }
  g --token-file "$tmp/admin.token" admin team create owners > /dev/null
  g --token-file "$tmp/admin.token" admin team create fellows > /dev/null
  g --token-file "$tmp/admin.token" admin grant fellows 100 > /dev/null
  g --token-file "$tmp/admin.token" admin token create --team fellows --label alice > "$tmp/member.token" 2> /dev/null
  g --token-file "$tmp/admin.token" admin enroll owners > "$tmp/enroll.token" 2> "$tmp/enroll.err" ||
    fail "admin enroll exited $?: $(cat "$tmp/enroll.err")"
  command=$(grep '^d=\$(mktemp -d)' "$tmp/enroll.err" || true)
  [ -n "$command" ] || fail "admin enroll printed no install command: $(cat "$tmp/enroll.err")"
  expect_in "$command" "--binary $(basename "$bin") --sha256 " "the install command"
  expect_in "$(cat "$tmp/enroll.err")" "plain HTTP" "admin enroll's caution"
  [[ $command != *"$(cat "$tmp/enroll.token")"* ]] || fail "the install command holds the token"

  joiner=gpupool-static-join-$$
  containers+=("$joiner")
  # Nothing of gpupool's in the container but the token's file: the command fetches the rest.
  podman run -d --name "$joiner" --network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
    -e HOME=/home/owner -v "$tmp/enroll.token:/enroll.token:ro" "$image" \
    sh -c "mkdir -p /home/owner && $command --token-file /enroll.token --runtime process --unsafe-process-runtime \
      --foreground --name busybox-joined -- --heartbeat-ms 300 --poll-wait-ms 1000 --cpus-milli 2000 --memory-mib 1024" \
    > /dev/null
  printf '%s\n' 'format = 1' 'name = "joined"' 'image = "localhost/gpupool/busybox:latest"' \
    'command = "echo joined-and-ran"' '[resources]' 'cpus = 0.1' 'memory = "32MiB"' 'max_runtime = "1m"' \
    > "$tmp/join.toml"
  out=$(g --token-file "$tmp/member.token" --json submit "$tmp/join.toml" 2> "$tmp/submit.err") ||
    fail "submit exited $?: $(cat "$tmp/submit.err")"
  job=$(jq -r '.jobs[0]' <<< "$out")
  rc=0
  timeout 180 "$bin" --url "$url" --token-file "$tmp/member.token" wait "$job" \
    > "$tmp/wait.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "--- the container's output:" >&2
    podman logs "$joiner" 2>&1 | tail -40 >&2
    fail "wait $job exited $rc: $(cat "$tmp/wait.out")"
  fi
  took=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  out=$(g --token-file "$tmp/member.token" --json jobs)
  state=$(jq -r --argjson id "$job" '.jobs[] | select(.id == $id) | .state' <<< "$out")
  [ "$state" = succeeded ] || fail "the job's state: $state ($out)"
  out=$(g --token-file "$tmp/member.token" logs "$job" 2>&1) || fail "logs exited $?: $out"
  expect_in "$out" "joined-and-ran" "the job's log"
  out=$(podman logs "$joiner" 2>&1)
  expect_in "$out" "starting the worker in the foreground" "the install script's output"
  # The token in no process's argv inside the container (the worker is still running there).
  out=$(podman exec "$joiner" sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " < "$f"; echo; done')
  [[ $out != *"$(cat "$tmp/enroll.token")"* ]] || fail "the token is in a process's argv: $out"
  expect_in "$out" "worker --share" "the container's processes"
  podman stop -t 20 "$joiner" > /dev/null
  ok "join: the printed command in busybox (wget, sha256sum, plain HTTP), from nothing to a job run, in $took s"
}

check_run() {
  local out rc=0 f greeting n
  # From a copy of the recipe, in a scratch directory: outputs land in ./gpupool-out/.
  cp "$src/recipes/hello-sweep/recipe.toml" "$tmp/hello-sweep.toml"
  out=$(cd "$tmp" && "$bin" run hello-sweep.toml --data-dir "$tmp/state" 2>&1) || rc=$?
  [ "$rc" = 0 ] || fail "gpupool run exited $rc: $out"
  for greeting in hello bonjour hola; do
    for n in 1 2; do
      f=$tmp/gpupool-out/hello-$greeting-$n/hello.txt
      [ -f "$f" ] || fail "no $f; run said: $out"
      [[ $(cat "$f") =~ ^$greeting\ from\ job\ [0-9]+\ \(n=$n\)$ ]] || fail "$f: $(cat "$f")"
    done
  done
  expect_in "$out" "succeeded" "gpupool run's summary"
  ok "gpupool run of the demo: 6 jobs, each output back"
}

case $check in
  artifact | busybox | share | join | run) "check_$check" ;;
  *) fail "unknown check '$check' (artifact, busybox, share, join, run)" ;;
esac
