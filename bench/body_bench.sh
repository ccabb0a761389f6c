#!/usr/bin/env bash
# A worker's heartbeats while members send maximal bodies (bench/README.md, "Bodies against
# heartbeats"): starts a real `gpupool coordinator` (SQLite in a temporary directory, loopback, a
# free port), makes a funded team, a member token and an enrollment token, runs body_bench against
# it, prints its figures, then stops the coordinator.
#
# Usage: bench/body_bench.sh BUILD_DIR      (needs BUILD_DIR/gpupool and BUILD_DIR/body_bench)
# Knobs (environment): BIN (another gpupool binary to measure, e.g. an older build), DURATION (15s),
#   SENDERS (3), FLOODERS (1), TRICKLES (8), FLOOD_MIB (15), COORD_ARGS (more coordinator flags).
# Exit status: body_bench's (1 when a heartbeat failed).
set -euo pipefail
BUILD=$(realpath "${1:?usage: bench/body_bench.sh BUILD_DIR}")
BIN=${BIN:-$BUILD/gpupool}
GEN=$BUILD/body_bench
d=$(mktemp -d "${TMPDIR:-/tmp}/gpupool-body.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; wait 2> /dev/null; rm -rf "$d"' EXIT

echo "== heartbeats against maximal bodies (bench/body_bench.sh): ${SENDERS:-3} senders of 10,000-job sweeps, ${FLOODERS:-1} of ${FLOOD_MIB:-15} MiB floods, ${TRICKLES:-8} trickles, ${DURATION:-15s}"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {print int($2/1024)" MiB"}' /proc/meminfo); commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2> /dev/null || echo '?'); $(date -u +%Y-%m-%d)"
# shellcheck disable=SC2086
"$BIN" coordinator --listen 127.0.0.1:0 --db "$d/pool.db" --port-file "$d/port" ${COORD_ARGS:-} > "$d/out" 2> "$d/err" &
pid=$!
for _ in $(seq 200); do [ -s "$d/port" ] && break; sleep 0.05; done
[ -s "$d/port" ] || { echo "the coordinator did not start:"; cat "$d/err"; exit 1; }
url=http://127.0.0.1:$(cat "$d/port")
admin=$(grep -o 'gpp_[A-Za-z0-9_-]*' "$d/out" | head -1)
gp() { "$BIN" --url "$url" --token "$admin" "$@"; }
gp admin team create bodies > /dev/null
gp admin grant bodies 1000000000 --note "body bench" > /dev/null
member=$(gp admin token create --role member --team bodies 2> /dev/null)
enroll=$(gp admin enroll bodies --uses 1 2> /dev/null)

rc=0
"$GEN" --url "$url" --member-token "$member" --enroll-token "$enroll" --duration "${DURATION:-15s}" \
  --senders "${SENDERS:-3}" --flooders "${FLOODERS:-1}" --trickles "${TRICKLES:-8}" --flood-mib "${FLOOD_MIB:-15}" \
  --coordinator-pid "$pid" || rc=$?
kill -TERM "$pid"
wait "$pid" || true
pid=
exit "$rc"
