#!/usr/bin/env bash
# What sharing one GPU buys (docs/gpu-check.md, check 6): the same N evaluation-like jobs
# (tests/gpu/pack_job.py) through a coordinator on loopback and one process-runtime worker, three ways:
#   serial  gpu = 1: one at a time
#   packed  gpu = 1/N (rounded down to a milli-GPU): all at once, shares held by the watchdog
#   mps     gpu = 1/N on a worker started with --mps (SKIP without nvidia-cuda-mps-control)
# Each sweep's makespan is from its submission until `gpupool wait` returns (all ended).
#
# Usage: tests/gpu/pack.sh PATH/TO/gpupool [N [ITERS]]   (N 8, ITERS 2000 forwards of each job)
# Prints on stdout one `pack: <sweep>: {json}` line per sweep (judge.py sweep), then the verdict,
# `pack: PASS|FAIL: <figures>` (judge.py pack); progress on stderr; exit 1 on FAIL.
# Environment: GPUPOOL_GPU_CHECK_DRY=1: jobs sleep ITERS ms (no PyTorch, no GPU: the plumbing test with
# tests/gpu/stand-in first on PATH); GPUPOOL_GPU_CHECK_PYTHON: the jobs' interpreter;
# GPUPOOL_GPU_PACK_SERIAL=0 skips the serial sweep (N x one job's time); GPUPOOL_GPU_PACK_LOGS=DIR:
# copy the coordinator's, the worker's and the MPS logs there when done; GPUPOOL_GPU_PACK_MPS_FLAGS:
# more worker flags for the MPS sweep (e.g. `--mps-compute isolate`).
# shellcheck disable=SC2317 # cleanup is called by the trap
set -uo pipefail

bin=$(realpath "${1:?usage: tests/gpu/pack.sh PATH/TO/gpupool [N [ITERS]]}")
n=${2:-8}
iters=${3:-2000}
here=$(cd "$(dirname "$0")" && pwd)
dry=${GPUPOOL_GPU_CHECK_DRY:-0}
py=${GPUPOOL_GPU_CHECK_PYTHON:-$(command -v python3)}
t0=$SECONDS
dir=$(mktemp -d /tmp/gpupool-gpu-pack.XXXXXX)
pids=()
worker_pid=

# shellcheck source=tests/gpu/pool.sh
. "$here/pool.sh" # stop_pid, stop_pool, start_pool, start_worker, stop_worker, as_admin, as_member, judge
say() { printf 'gpu-pack: [%3ds] %s\n' "$((SECONDS - t0))" "$*" >&2; }
cleanup() {
    stop_pool "$dir/pack_job.py"
    if [ -n "${GPUPOOL_GPU_PACK_LOGS:-}" ] && mkdir -p "$GPUPOOL_GPU_PACK_LOGS"; then
        for f in coordinator.err worker.err worker.out; do
            [ -f "$dir/$f" ] && cp "$dir/$f" "$GPUPOOL_GPU_PACK_LOGS/pack-$f"
        done
        cp -r "$dir/work/mps/log" "$GPUPOOL_GPU_PACK_LOGS/pack-mps-log" 2> /dev/null
        cp "$dir"/*.sweep "$dir"/*.toml "$GPUPOOL_GPU_PACK_LOGS/" 2> /dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "pack: FAIL: $*"
    exit 1
}

cp "$here/pack_job.py" "$dir/pack_job.py"
start_pool || fail "$pool_error"


# run_sweep LABEL SHARE: N jobs of SHARE of a GPU in one sweep; their figures in $dir/LABEL.sweep.
run_sweep() {
    local label=$1 share=$2 a=$SECONDS t_submit t_done ids
    {
        printf 'format = 1\nname = "pack-%s"\nimage = "localhost/gpupool/ignored:latest"\n' "$label"
        printf 'command = ["%s", "%s", "%s"%s]\n' "$py" "$dir/pack_job.py" "$iters" "$([ "$dry" = 1 ] && echo ', "dry"')"
        printf '[retry]\nmax_attempts = 1\n[resources]\ngpu = %s\ncpus = 0.25\nmemory = "1GiB"\nmax_runtime = "10m"\n' "$share"
        printf '[sweep]\ni = [%s]\n' "$(seq -s, 1 "$n")"
    } > "$dir/$label.toml"
    t_submit=$(date +%s.%N)
    ids=$(as_member --json submit "$dir/$label.toml" 2> "$dir/$label.submit.err" |
        python3 -c 'import json, sys; print(" ".join(map(str, json.load(sys.stdin)["jobs"])))') ||
        fail "$label: submitting: $(head -c 300 "$dir/$label.submit.err")"
    # shellcheck disable=SC2086 # the ids, one word each
    as_member wait $ids > /dev/null 2>&1
    t_done=$(date +%s.%N)
    # shellcheck disable=SC2086
    judge sweep "$label" "$t_submit" "$t_done" $ids > "$dir/$label.sweep"
    echo "pack: $label: $(cat "$dir/$label.sweep")"
    say "$label: gpu = $share, $n jobs: done in $((SECONDS - a)) s"
}

driver=$(timeout 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -n 1)
say "$("$bin" version 2> /dev/null | head -n 1); ${driver:-no nvidia-smi answer}; N=$n ITERS=$iters$([ "$dry" = 1 ] && echo ' (dry: jobs sleep, no GPU)')"
[ "$dry" = 1 ] || "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1 ||
    fail "PyTorch with CUDA is not usable by $py"
share=$(python3 -c "import sys; print(int(1000 / int(sys.argv[1])) / 1000)" "$n")
start_worker || fail "the worker did not join: $(tail -n 3 "$dir/worker.err" | tr '\n' ' ' | cut -c1-300)"
sweeps=()
if [ "${GPUPOOL_GPU_PACK_SERIAL:-1}" = 1 ]; then
    run_sweep serial 1
else
    echo "SKIP: serial (GPUPOOL_GPU_PACK_SERIAL=0)" > "$dir/serial.sweep"
fi
sweeps+=("$dir/serial.sweep")
run_sweep packed "$share"
sweeps+=("$dir/packed.sweep")
if ! command -v nvidia-cuda-mps-control > /dev/null; then
    echo "SKIP: under MPS (nvidia-cuda-mps-control is not on PATH)" > "$dir/mps.sweep"
else
    stop_worker
    # shellcheck disable=SC2086 # more flags, split on blanks
    if start_worker --mps ${GPUPOOL_GPU_PACK_MPS_FLAGS:-}; then
        run_sweep mps "$share"
    else
        echo "FAIL: under MPS: the worker did not join with --mps: $(tail -n 2 "$dir/worker.err" | tr '\n' ' ' | cut -c1-200)" > "$dir/mps.sweep"
    fi
fi
sweeps+=("$dir/mps.sweep")
verdict=$(judge pack "$n" "${sweeps[@]}")
echo "pack: $verdict"
say "done in $((SECONDS - t0)) s"
[ "${verdict%%: *}" = PASS ]
