#!/usr/bin/env bash
# Where the CPU of a short job goes: a coordinator (SQLite, default flags) and one worker
# (`--runtime process`, SLOTS slots) on 127.0.0.1, N `true` jobs submitted one by one (a process
# each, as a researcher's loop does), then N as one sweep. Prints, for each: completed jobs/s and
# the CPU milliseconds per job of the coordinator, of the worker with its jobs (its children), and
# of the submitting loop (bash and the gpupool processes it starts; one by one only).
#
#   bench/cpu_per_job.sh BIN [OTHER_BIN ...]
#       ROUNDS (2) rounds; in each, every binary in turn (an A/B in one command: this machine is
#       shared and noisy, compare only figures printed together). A binary plays every part.
#   N=300 SLOTS=32 ROUNDS=2 bench/cpu_per_job.sh dist/gpupool-0.1.0-linux-x86_64 /tmp/gpupool-before
#
# Everything lives in a temporary folder (TMPDIR, else /tmp) removed at the end; daemons are stopped by pid.
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
N=${N:-300}
SLOTS=${SLOTS:-32}
ROUNDS=${ROUNDS:-2}
bins=()
for b in "$@"; do
    [ -x "$b" ] || { echo "cpu_per_job: no executable at $b" >&2; exit 2; }
    bins+=("$(realpath "$b")")
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpu-per-job.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
    wait 2> /dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)

# cpu_ticks PID: user + system time of PID and of its reaped children, in clock ticks.
cpu_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
per_job_ms() { awk -v t="$1" -v hz="$hz" -v n="$2" 'BEGIN {printf "%.2f", t * 1000 / hz / n}'; }
rate() { awk -v n="$1" -v ns="$2" 'BEGIN {printf "%.1f", n / (ns / 1e9)}'; }

# run_one BIN: one pool from scratch, both workloads; prints two lines.
run_one() {
    local bin=$1 d
    d=$(mktemp -d "$tmp/pool.XXXXXX")
    "$bin" coordinator --listen 127.0.0.1:0 --db "$d/pool.db" --port-file "$d/port" \
        --admin-token-file "$d/admin.token" > "$d/coordinator.log" 2>&1 < /dev/null &
    local coord=$!
    pids+=("$coord")
    for _ in $(seq 100); do [ -s "$d/port" ] && [ -s "$d/admin.token" ] && break; sleep 0.1; done
    local url=http://127.0.0.1:$(cat "$d/port")
    local admin=("$bin" --url "$url" --token-file "$d/admin.token")
    "${admin[@]}" admin team create bench > /dev/null
    "${admin[@]}" admin grant bench 100000000 > /dev/null
    "${admin[@]}" admin token create --team bench --label bench > "$d/member.token" 2> /dev/null
    "${admin[@]}" admin enroll bench > "$d/enroll.token" 2> /dev/null
    "$bin" --url "$url" --token-file "$d/enroll.token" worker --share --runtime process --unsafe-process-runtime \
        --work-dir "$d/work" --slots "$SLOTS" --cpus-milli $((SLOTS * 1000)) --memory-mib $((SLOTS * 64)) \
        > "$d/worker.log" 2>&1 < /dev/null &
    local worker=$!
    pids+=("$worker")
    local gp=("$bin" --url "$url" --token-file "$d/member.token")
    recipe() { # recipe COUNT
        printf 'format = 1\nname = "cpu-{i}"\nimage = "localhost/gpupool/busybox:latest"\ncommand = "true"\n'
        printf '[resources]\ncpus = 1\nmemory = "32MiB"\nmax_runtime = "10m"\n[retry]\nmax_attempts = 1\n'
        printf '[sweep]\ni = [%s]\n' "$(seq -s ', ' 1 "$1")"
    }
    recipe 1 > "$d/one.toml"
    recipe "$N" > "$d/sweep.toml"
    "${gp[@]}" submit --wait "$d/one.toml" > /dev/null 2>&1 # the worker is up and has run a job

    local c0 w0 t0 t1 loop
    c0=$(cpu_ticks "$coord")
    w0=$(cpu_ticks "$worker")
    t0=$(date +%s%N)
    # The loop in a child bash, whose `times` gives its own CPU and its gpupool processes' (seconds).
    loop=$(bash -c 'for ((i = 0; i < $1; i++)); do "${@:3}" submit "$2" >> "$2.out"; done; times' \
        _ "$N" "$d/one.toml" "${gp[@]}" | awk '{gsub(/[ms]/, " "); s += $1 * 60 + $2 + $3 * 60 + $4} END {print s}')
    mapfile -t ids < <(sed -n 's/.*(id \([0-9]*\)).*/\1/p' "$d/one.toml.out")
    "${gp[@]}" wait "${ids[@]}" > /dev/null 2>&1
    t1=$(date +%s%N)
    printf '%-40s one by one  %8s jobs/s  coordinator %6s  worker+jobs %6s  loop %6s ms CPU/job\n' \
        "$(basename "$bin")" "$(rate "$N" $((t1 - t0)))" \
        "$(per_job_ms $(($(cpu_ticks "$coord") - c0)) "$N")" "$(per_job_ms $(($(cpu_ticks "$worker") - w0)) "$N")" \
        "$(awk -v s="$loop" -v n="$N" 'BEGIN {printf "%.2f", s * 1000 / n}')"

    c0=$(cpu_ticks "$coord")
    w0=$(cpu_ticks "$worker")
    t0=$(date +%s%N)
    local sweep
    sweep=$("${gp[@]}" submit "$d/sweep.toml" | sed -n 's/^submitted sweep \([0-9]*\):.*/\1/p')
    "${gp[@]}" wait --sweep "$sweep" > /dev/null 2>&1
    t1=$(date +%s%N)
    printf '%-40s sweep       %8s jobs/s  coordinator %6s  worker+jobs %6s  ms CPU/job\n' \
        "$(basename "$bin")" "$(rate "$N" $((t1 - t0)))" \
        "$(per_job_ms $(($(cpu_ticks "$coord") - c0)) "$N")" "$(per_job_ms $(($(cpu_ticks "$worker") - w0)) "$N")"
    kill "$worker" "$coord" 2> /dev/null || true
    wait "$worker" "$coord" 2> /dev/null || true
}

echo "== CPU per short job: $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), N=$N SLOTS=$SLOTS ROUNDS=$ROUNDS"
for ((r = 1; r <= ROUNDS; r++)); do
    for b in "${bins[@]}"; do
        run_one "$b"
    done
done
