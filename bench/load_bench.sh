#!/usr/bin/env bash
# The coordinator under load (bench/README.md, "The coordinator under load"): starts a real
# `gpupool coordinator` (a SQLite file in a temporary directory, loopback, a free port), makes a team
# with credits, a member token and enrollment tokens, runs coordinator_loadgen against it, prints
# its figures, then stops the coordinator (and says how long stopping took).
#
# Usage: bench/load_bench.sh BUILD_DIR      (needs BUILD_DIR/gpupool and BUILD_DIR/coordinator_loadgen)
# Knobs (environment): WORKERS (200), DURATION (10s), SUBMIT_RATE sweeps/s (20), JOBS_PER_SWEEP (4),
#   REGISTER_RATE (500), RUN_MS (2000), DB_DIR (where the pool's file goes: default a new directory
#   under TMPDIR, on disk), COORD_ARGS (more coordinator flags), GEN_ARGS (more generator flags),
#   PERF (a file: `perf record` of the coordinator for the whole run, then its top symbols per thread).
# Exit status: the generator's (1 when any request failed).
set -euo pipefail
BUILD=$(realpath "${1:?usage: bench/load_bench.sh BUILD_DIR}")
BIN=$BUILD/gpupool
GEN=$BUILD/coordinator_loadgen
WORKERS=${WORKERS:-200}
DURATION=${DURATION:-10s}
SUBMIT_RATE=${SUBMIT_RATE:-20}
JOBS_PER_SWEEP=${JOBS_PER_SWEEP:-4}
REGISTER_RATE=${REGISTER_RATE:-500}
RUN_MS=${RUN_MS:-2000}
d=$(mktemp -d "${DB_DIR:-${TMPDIR:-/tmp}}/gpupool-load.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; wait 2> /dev/null; rm -rf "$d"' EXIT

# Each process raises its own soft limit on open files to the hard one (the coordinator says so in its log).
echo "== the coordinator under load (bench/load_bench.sh): $WORKERS workers, $SUBMIT_RATE sweeps/s of $JOBS_PER_SWEEP jobs, $DURATION"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {print int($2/1024)" MiB"}' /proc/meminfo), open files hard limit $(ulimit -Hn); commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2> /dev/null || echo '?'); $(date -u +%Y-%m-%d)"
# --max-connections-per-client 0: every simulated worker comes from 127.0.0.1.
# shellcheck disable=SC2086
"$BIN" coordinator --listen 127.0.0.1:0 --db "$d/pool.db" --port-file "$d/port" --max-connections-per-client 0 \
  ${COORD_ARGS:-} > "$d/out" 2> "$d/err" &
pid=$!
for _ in $(seq 200); do [ -s "$d/port" ] && break; sleep 0.05; done
[ -s "$d/port" ] || { echo "the coordinator did not start:"; cat "$d/err"; exit 1; }
url=http://127.0.0.1:$(cat "$d/port")
admin=$(grep -o 'gpp_[A-Za-z0-9_-]*' "$d/out" | head -1)
gp() { "$BIN" --url "$url" --token "$admin" "$@"; }
gp admin team create loadgen > /dev/null
gp admin grant loadgen 1000000000 --note "load bench" > /dev/null
member=$(gp admin token create --role member --team loadgen 2> /dev/null)
enroll=()
for _ in $(seq $(((WORKERS + 9999) / 10000))); do
  enroll+=(--enroll-token "$(gp admin enroll loadgen --uses 10000 2> /dev/null)")
done
grep -i 'open files' "$d/err" || true

perf_pid=
if [ -n "${PERF:-}" ]; then
  perf record -F 999 -g -p "$pid" -o "$PERF" 2> /dev/null &
  perf_pid=$!
fi
rc=0
# shellcheck disable=SC2086
"$GEN" --url "$url" "${enroll[@]}" --member-token "$member" --workers "$WORKERS" --duration "$DURATION" \
  --submit-rate "$SUBMIT_RATE" --jobs-per-sweep "$JOBS_PER_SWEEP" --register-rate "$REGISTER_RATE" --run-ms "$RUN_MS" \
  --coordinator-pid "$pid" --db "$d/pool.db" ${GEN_ARGS:-} || rc=$?

if [ -n "$perf_pid" ]; then
  kill -INT "$perf_pid"
  wait "$perf_pid" || true
  echo "-- perf: the coordinator's busiest symbols by thread ($PERF)"
  perf report -i "$PERF" --no-children --sort pid,sym --stdio 2> /dev/null | grep -E '^ +[0-9]' | head -40 || true
fi
s=$(date +%s.%N)
kill -TERM "$pid"
wait "$pid" || true
pid=
echo "coordinator stopped in $(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN {printf "%.2f", e - s}') s"
if [ "$rc" != 0 ]; then
  echo "-- the coordinator's log, warnings and errors (last 20):"
  grep -E '\] \[(warning|error|critical)\]' "$d/err" | tail -20 || true
fi
exit "$rc"
