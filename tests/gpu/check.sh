#!/usr/bin/env bash
# gpupool on a real NVIDIA GPU, end to end through the binary: a coordinator on loopback (SQLite in a
# temp dir), one worker with the process runtime, PyTorch jobs (tests/gpu/gpu_job.py).
#   1. the worker's registered GPUs are nvidia-smi's: model, memory MiB and UUID of each.
#   2. three jobs of 0.2 GPU at once on GPU 0, each holding 80 % of its memory share
#      (GPUPOOL_GPU_MEMORY_MB) and running matmuls for 30 s: all succeed, [start, end] overlap.
#   3. a job allocating 3x its share (0.1 GPU) and holding it 60 s, beside a neighbour: the offender
#      fails with a reason naming its GPU memory share (under MPS, failing on its own refused allocation
#      counts too), the neighbour succeeds.
#   4. idle guard: a job with `idle_timeout = "1m"` that holds 256 MiB and sleeps fails with a reason
#      starting "idle on its GPU" within 160 s of its start. It runs beside checks 2 and 3 (check 3's
#      jobs sleep, so the GPU computes only during check 2).
#   5. with nvidia-cuda-mps-control on PATH: the worker again with --mps (the coordinator must read GPU 0's
#      enforcement as `mps` within 15 s), checks 2 and 3 at once.
#   6. the sharing measure (tests/gpu/pack.sh): N jobs one at a time, packed, packed under --mps; the
#      makespans and their ratios. Its own time budget after checks 1-5; GPUPOOL_GPU_CHECK_PACK=0 skips it.
# With more than one GPU, the worker shares only GPU 0 for checks 2-5 (worker.toml [[gpu]] share = false).
#
# Usage: tests/gpu/check.sh PATH/TO/gpupool   (docs/gpu-check.md)
# Needs nvidia-smi with a driver and python3 with PyTorch and CUDA (GPUPOOL_GPU_CHECK_PYTHON names
# another interpreter for the jobs); no container engine, jq or curl. One line per check on stdout,
# `check N: PASS|FAIL|SKIP: <what> <figures>`; progress on stderr; exit 1 on any FAIL; checks 1-5 are
# done within 5 minutes, check 6 within GPUPOOL_GPU_CHECK_PACK_BUDGET seconds (480; GPUPOOL_GPU_CHECK_PACK_N
# jobs, 8, of GPUPOOL_GPU_CHECK_PACK_ITERS forwards, 2000). On any FAIL the logs (coordinator, worker, MPS
# control and server, the jobs', check 6's) are copied to GPUPOOL_GPU_CHECK_LOGS, else to
# ./gpu-check-logs-<UTC time>, named on stderr. GPUPOOL_GPU_CHECK_CAPTURE=DIR saves the raw answers of the
# nvidia-smi queries the worker makes in DIR/idle, DIR/share (during check 2) and DIR/mps (check 5):
# replay sets for tests/gpu/stand-in/nvidia-smi (GPUPOOL_NVIDIA_SMI_REPLAY). GPUPOOL_GPU_CHECK_DRY=1 is a
# plumbing test for a machine without a GPU, with tests/gpu/stand-in first on PATH: check 1, the MPS
# join of check 5 against the stand-in control program, check 6 with sleeping jobs, and a capture
# replayed. GPUPOOL_GPU_CHECK_KEEP=1 keeps the temp dir.
# shellcheck disable=SC2317 # cleanup is called indirectly (trap)
set -uo pipefail

bin=$(realpath "${1:?usage: tests/gpu/check.sh PATH/TO/gpupool}")
here=$(cd "$(dirname "$0")" && pwd)
dry=${GPUPOOL_GPU_CHECK_DRY:-0}
t0=$SECONDS
deadline=$((t0 + 270)) # every wait ends by then: 30 s are left for the cleanup
failures=0
pids=()
worker_pid=
dir=$(mktemp -d /tmp/gpupool-gpu-check.XXXXXX)

# shellcheck source=tests/gpu/pool.sh
. "$here/pool.sh" # stop_pid, stop_pool, start_pool, start_worker, stop_worker, as_admin, as_member, judge
say() { printf 'gpu-check: [%3ds] %s\n' "$((SECONDS - t0))" "$*" >&2; }
report() { # report N PASS|FAIL|SKIP TEXT
    echo "check $1: $2: $3"
    if [ "$2" = FAIL ]; then
        failures=$((failures + 1))
    fi
}
eventually() { # eventually SECONDS COMMAND...: retries every 0.2 s until it succeeds, the time is up or the deadline
    local end=$((SECONDS + $1))
    [ "$end" -le "$deadline" ] || end=$deadline
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
}
keep_logs() { # copies what a failed run leaves to look at (never a token or the worker's identity)
    local to=${GPUPOOL_GPU_CHECK_LOGS:-$PWD/gpu-check-logs-$(date -u +%Y%m%dT%H%M%SZ)} f
    mkdir -p "$to" || {
        echo "gpu-check: cannot make $to: the logs are lost" >&2
        return
    }
    for f in "$dir"/*.err "$dir"/*.out "$dir"/*.toml "$dir"/*.json "$dir"/*.why "$dir/smi.csv"; do
        [ -f "$f" ] && cp "$f" "$to/"
    done
    [ -d "$dir/work/mps/log" ] && cp -r "$dir/work/mps/log" "$to/mps-log"
    [ -d "$dir/pack-logs" ] && cp -r "$dir/pack-logs" "$to/pack"
    mkdir -p "$to/jobs"
    # each attempt's log and state (attempt_folders.cpp), by their paths under the work dir
    (cd "$dir/work" 2> /dev/null && find . -type f \( -name log -o -name state.json \) -size -20M \
        -exec cp --parents {} "$to/jobs/" \;)
    echo "gpu-check: kept the logs of this run in $to" >&2
}
cleanup() {
    stop_pool "$dir/gpu_job.py"
    if [ "$failures" -ne 0 ]; then
        for f in worker coordinator; do
            [ -s "$dir/$f.err" ] || continue
            echo "---- $f (tail) ----" >&2
            tail -n 25 "$dir/$f.err" >&2 2> /dev/null
        done
        keep_logs
    fi
    if [ "${GPUPOOL_GPU_CHECK_KEEP:-0}" = 1 ]; then
        say "kept $dir (GPUPOOL_GPU_CHECK_KEEP)"
    else
        rm -rf "$dir"
    fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
abort() { # a setup step failed: nothing can be checked
    echo "gpu-check: FAIL: $*" >&2
    failures=$((failures + 1))
    exit 1
}

# ---- setup: the driver, python, a coordinator, a team, a worker ----
command -v python3 > /dev/null || abort "python3 is not on PATH (the checks read gpupool's JSON with it)"
command -v nvidia-smi > /dev/null || abort "nvidia-smi is not on PATH: no NVIDIA driver here"
driver=$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
timeout 20 nvidia-smi --query-gpu=name,memory.total,uuid --format=csv,noheader,nounits > "$dir/smi.csv" ||
    abort "nvidia-smi does not answer: $(head -c 300 "$dir/smi.csv")"
say "$("$bin" version 2> /dev/null | head -n 1); driver $driver; GPU 0: $(head -n 1 "$dir/smi.csv")"
if { [ "$driver" = stand-in ] || [ -n "${GPUPOOL_NVIDIA_SMI_REPLAY:-}" ]; } && [ "$dry" != 1 ]; then
    abort "the nvidia-smi on PATH is tests/gpu/stand-in's: only a plumbing test (GPUPOOL_GPU_CHECK_DRY=1) may use it"
fi

# capture LABEL: the raw answers of the nvidia-smi queries the worker makes (worker/gpu/gpu_probe.cpp:
# inventory, compute apps, health, utilization, pmon, the driver's versions) and this script's own, now, into
# $GPUPOOL_GPU_CHECK_CAPTURE/LABEL, one <key>.out/.err/.rc each as tests/gpu/stand-in/nvidia-smi replays them.
smi_queries=(
    "--query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits"
    "--query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits"
    "--query-gpu=uuid,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits"
    "--query-gpu=uuid,utilization.gpu,utilization.memory --format=csv,noheader,nounits"
    "pmon -c 1 -s u"
    "--query-gpu=name,memory.total,uuid --format=csv,noheader,nounits"
    "--query-gpu=driver_version --format=csv,noheader"
    "--query-gpu=name,driver_version --format=csv,noheader"
    "--query-gpu=index --format=csv,noheader"
    "--version"
)
smi_key() { printf '%s' "$*" | sed 's/^--//; s/ --/ /g; s/[^A-Za-z0-9.,=_-]/_/g'; } # as the stand-in's
capture() {
    [ -n "${GPUPOOL_GPU_CHECK_CAPTURE:-}" ] || return 0
    local to=$GPUPOOL_GPU_CHECK_CAPTURE/$1 q key
    mkdir -p "$to" || return 0
    for q in "${smi_queries[@]}"; do
        key=$(smi_key "$q")
        # shellcheck disable=SC2086 # the query's words
        timeout 20 nvidia-smi $q > "$to/$key.out" 2> "$to/$key.err"
        echo $? > "$to/$key.rc"
        [ -s "$to/$key.err" ] || rm -f "$to/$key.err"
    done
    timeout 20 nvidia-smi > "$to/table.txt" 2>&1 # for people; not replayed
    printf 'captured %s by tests/gpu/check.sh (%s) at %s: %s\n' "$1" "$("$bin" version 2> /dev/null | head -n 1)" \
        "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$(head -n 1 "$dir/smi.csv")" > "$to/README.txt"
    say "captured nvidia-smi's answers ($1) in $to"
}
capture idle

start_pool || abort "$pool_error"

worker_trouble() { tail -n 3 "$dir/worker.err" 2> /dev/null | tr '\n' ' ' | cut -c1-400; }

start_worker || abort "the worker did not join the pool: $(worker_trouble)"
say "worker joined $url: $(grep -o 'sharing with.*' "$dir/worker.err" | tail -n 1 | cut -c1-200)"

# ---- 1. inventory ----
v=$(judge inventory "$dir/smi.csv")
report 1 "${v%%: *}" "inventory vs nvidia-smi: ${v#*: }"

# wait_for_mps: the coordinator reads GPU 0's enforcement as `mps` within 15 s of an --mps worker joining
# (until its first heartbeat it may still hold the inventory the same worker registered without --mps);
# sets enforcement and waited.
wait_for_mps() {
    local a=$SECONDS
    is_mps() {
        enforcement=$(judge enforcement)
        [ "$enforcement" = mps ]
    }
    eventually 15 is_mps
    local rc=$?
    waited=$((SECONDS - a))
    return $rc
}
# pack_check: check 6, tests/gpu/pack.sh on its own coordinator and worker (this one's worker stopped).
pack_check() {
    local what="sharing measure" budget=${GPUPOOL_GPU_CHECK_PACK_BUDGET:-480} n iters rc line
    n=${GPUPOOL_GPU_CHECK_PACK_N:-$([ "$dry" = 1 ] && echo 3 || echo 8)}
    iters=${GPUPOOL_GPU_CHECK_PACK_ITERS:-$([ "$dry" = 1 ] && echo 500 || echo 2000)}
    [ "$dry" = 1 ] && what="sharing measure, dry (jobs sleep; no GPU)"
    if [ "${GPUPOOL_GPU_CHECK_PACK:-1}" = 0 ]; then
        report 6 SKIP "$what: GPUPOOL_GPU_CHECK_PACK=0"
        return
    fi
    stop_worker # the GPU is pack.sh's alone
    say "check 6: tests/gpu/pack.sh with N=$n, ITERS=$iters, within $budget s"
    GPUPOOL_GPU_PACK_LOGS="$dir/pack-logs" timeout -k 60 "$budget" "$here/pack.sh" "$bin" "$n" "$iters" > "$dir/pack.out"
    rc=$?
    line=$(grep -E '^pack: (PASS|FAIL): ' "$dir/pack.out" | tail -n 1)
    line=${line#pack: }
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        report 6 FAIL "$what: not done within $budget s (GPUPOOL_GPU_CHECK_PACK_BUDGET)"
    elif [ -n "$line" ]; then
        report 6 "${line%%: *}" "$what: ${line#*: }"
    else
        report 6 FAIL "$what: pack.sh gave no verdict (exit $rc): $(tail -n 2 "$dir/pack.out" | tr '\n' ' ' | cut -c1-300)"
    fi
}

if [ "$dry" = 1 ]; then
    if [ -n "${GPUPOOL_GPU_CHECK_CAPTURE:-}" ]; then # the capture replays as it was answered
        for q in "${smi_queries[@]}"; do
            # shellcheck disable=SC2086
            if [ "$(nvidia-smi $q 2>&1)" != "$(GPUPOOL_NVIDIA_SMI_REPLAY=$GPUPOOL_GPU_CHECK_CAPTURE/idle nvidia-smi $q 2>&1)" ]; then
                echo "gpu-check: FAIL: the stand-in replays \`nvidia-smi $q\` otherwise than captured" >&2
                failures=$((failures + 1))
            fi
        done
    fi
    if ! command -v nvidia-cuda-mps-control > /dev/null; then
        report 5 SKIP "MPS, dry: nvidia-cuda-mps-control is not on PATH (tests/gpu/stand-in has one)"
    else
        stop_worker
        if ! start_worker --mps; then
            report 5 FAIL "MPS, dry (stand-in control program): the worker did not join with --mps: $(worker_trouble)"
        elif wait_for_mps; then
            report 5 PASS "MPS, dry (stand-in control program, no GPU): GPU 0's enforcement read mps after ${waited} s; pipes in $(mps_pipes | tr '\n' ' ')"
        else
            report 5 FAIL "MPS, dry: the worker joined with --mps but the coordinator still reads GPU 0's enforcement as '$enforcement' after ${waited} s"
        fi
    fi
    say "checks 2-4 not run: GPUPOOL_GPU_CHECK_DRY=1 is a plumbing test only (no GPU, no PyTorch used)"
    pack_check
    exit $((failures > 0))
fi

# ---- the jobs' program, and only GPU 0 shared ----
py=${GPUPOOL_GPU_CHECK_PYTHON:-$(command -v python3)}
cp "$here/gpu_job.py" "$dir/gpu_job.py"
torch_ok=1
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' > "$dir/torch.err" 2>&1 || torch_ok=0
config=()
if [ "$(wc -l < "$dir/smi.csv")" -gt 1 ]; then
    for i in $(timeout 20 nvidia-smi --query-gpu=index --format=csv,noheader | tail -n +2); do
        printf '[[gpu]]\nindex = %s\nshare = false\n\n' "$i"
    done > "$dir/worker.toml"
    config=(--config "$dir/worker.toml")
    stop_worker
    start_worker "${config[@]}" || abort "the worker did not join again with $dir/worker.toml: $(worker_trouble)"
    say "the worker now shares GPU 0 only"
fi

toml_str() { local s=${1//\\/\\\\}; printf '"%s"' "${s//\"/\\\"}"; }
# recipe NAME SHARE MAX_RUNTIME EXTRA ARG...: $dir/NAME.toml, a job of SHARE of a GPU running
# `$py gpu_job.py ARG...`; EXTRA: more [resources] keys, then more tables ([sweep]).
recipe() {
    local name=$1 share=$2 max_runtime=$3 extra=$4 a cmd
    shift 4
    cmd="$(toml_str "$py"), $(toml_str "$dir/gpu_job.py")"
    for a in "$@"; do
        cmd+=", $(toml_str "$a")"
    done
    cat > "$dir/$name.toml" << EOF
format = 1
name = "$name"
image = "localhost/gpupool/ignored:latest"
command = [$cmd]
[retry]
max_attempts = 1
[resources]
gpu = $share
cpus = 0.25
memory = "1GiB"
max_runtime = "$max_runtime"
$extra
EOF
}
# submit NAME: the ids of the jobs it made, one a line; what the CLI said against it in $dir/NAME.submit.err
submit() {
    as_member --json submit "$dir/$1.toml" > "$dir/$1.submit.json" 2> "$dir/$1.submit.err"
    python3 - "$dir/$1.submit.json" "$dir/$1.submit.err" << 'EOF'
import json, sys
try:
    with open(sys.argv[1], encoding="utf-8") as f:
        d = json.load(f)
except ValueError:
    sys.exit(1)
if "jobs" not in d:  # {"error": {"message": ...}}
    with open(sys.argv[2], "a", encoding="utf-8") as f:
        f.write(d.get("error", {}).get("message", json.dumps(d)))
    sys.exit(1)
print("\n".join(map(str, d["jobs"])))
EOF
}
submitted() { # submitted NAME: why NAME could not be submitted
    echo "submitting $1: $(head -c 300 "$dir/$1.submit.err" 2> /dev/null | tr '\n' ' ')"
}
judge_until() { # judge_until SECONDS JUDGE-ARG...: asks the judge every 2 s until it says yes
    local end=$((SECONDS + $1))
    [ "$end" -le "$deadline" ] || end=$deadline
    shift
    until judge "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 2
    done
}
# submit_share_jobs PREFIX: check 2's three jobs, one sweep so they are queued at once; ids in share_ids.
submit_share_jobs() {
    recipe "$1-share" 0.2 5m $'[sweep]\ni = [1, 2, 3]' work 30 0.8
    mapfile -t share_ids < <(submit "$1-share")
}
# submit_neighbour PREFIX: check 3's neighbour, which holds half its share for 40 s; id in neighbour_id.
submit_neighbour() {
    recipe "$1-neighbour" 0.1 5m "" hold 40 0.5
    neighbour_id=$(submit "$1-neighbour")
}
# Check 3's offender, once its neighbour runs (so they surely run at the same time); id in offender_id.
submit_offender() {
    offender_id=
    judge_until 60 started "$neighbour_id" || {
        echo "the neighbour (job $neighbour_id) did not start"
        return 1
    }
    recipe "$1-offender" 0.1 5m "" hog 3 60
    offender_id=$(submit "$1-offender") || submitted "$1-offender"
}
verdict() { # verdict N WHAT JUDGE-ARG...: reports the judge's verdict as check N
    local v
    v=$(judge "${@:3}")
    report "$1" "${v%%: *}" "$2: ${v#*: }"
}

if [ "$torch_ok" = 0 ]; then
    why="PyTorch with CUDA is not usable by $py: $(tail -n 1 "$dir/torch.err")"
    for n in 2 3 4 5 6; do report "$n" FAIL "$why"; done
    exit 1
fi

# ---- 2, then 3, with 4 beside them (3's jobs hold memory but do not compute) ----
recipe idle-guard 0.05 4m 'idle_timeout = "1m"' idle 256 200
idle_id=$(submit idle-guard) || idle_id=
submit_share_jobs plain
say "submitted: idle-guard ${idle_id:-(refused)}; share jobs ${share_ids[*]:-(refused)}"

if [ "${#share_ids[@]}" = 3 ]; then
    [ -n "${GPUPOOL_GPU_CHECK_CAPTURE:-}" ] && judge_until 60 started "${share_ids[0]}" && capture share
    judge_until 150 ended "${share_ids[@]}" || say "check 2's jobs had not all ended in time"
    verdict 2 "three fractional jobs at once" together "${share_ids[@]}"
else
    report 2 FAIL "three fractional jobs at once: $(submitted plain-share)"
fi

submit_neighbour plain
if [ -z "$neighbour_id" ]; then
    report 3 FAIL "a job past its GPU memory share: $(submitted plain-neighbour)"
elif submit_offender plain > "$dir/offender.why" && [ -n "$offender_id" ]; then
    say "submitted: offender $offender_id beside neighbour $neighbour_id"
    judge_until 150 ended "$offender_id" "$neighbour_id" || say "check 3's jobs had not both ended in time"
    verdict 3 "a job past its GPU memory share ($(judge enforcement))" offender "$offender_id" "$neighbour_id" watchdog
else
    report 3 FAIL "a job past its GPU memory share: $(cat "$dir/offender.why")"
fi

if [ -n "$idle_id" ]; then
    judge_until 170 ended "$idle_id" || say "the idle job had not ended in time"
    verdict 4 "idle guard" idle "$idle_id" 160
else
    report 4 FAIL "idle guard: the recipe was refused: $(submitted idle-guard)"
fi

# ---- 5. 2 and 3 again, at once, under MPS ----
# mps_checks: the worker again with --mps; sets mps_verdict to PASS: ... or FAIL: ...
mps_checks() {
    local v2 v3
    stop_worker
    if ! start_worker "${config[@]}" --mps; then
        mps_verdict="FAIL: the worker did not join with --mps: $(worker_trouble)"
        return
    elif ! wait_for_mps; then
        mps_verdict="FAIL: the worker joined with --mps, but after ${waited} s the coordinator still reads GPU 0's enforcement as '$enforcement', not mps"
        return
    fi
    submit_share_jobs mps
    submit_neighbour mps
    if [ "${#share_ids[@]}" != 3 ] || [ -z "$neighbour_id" ]; then
        mps_verdict="FAIL: $(submitted mps-share) $(submitted mps-neighbour)"
        return
    fi
    if ! submit_offender mps > "$dir/offender.why" || [ -z "$offender_id" ]; then
        mps_verdict="FAIL: $(cat "$dir/offender.why")"
        return
    fi
    say "submitted under MPS: share jobs ${share_ids[*]}, neighbour $neighbour_id, offender $offender_id"
    capture mps
    judge_until 150 ended "${share_ids[@]}" "$offender_id" "$neighbour_id" || say "the MPS jobs had not all ended in time"
    v2=$(judge together "${share_ids[@]}")
    v3=$(judge offender "$offender_id" "$neighbour_id" mps)
    if [ "${v2%%: *}" = PASS ] && [ "${v3%%: *}" = PASS ]; then
        mps_verdict="PASS: enforcement mps (read after ${waited} s); 2: ${v2#*: }; 3: ${v3#*: }"
    else
        mps_verdict="FAIL: enforcement mps; 2: $v2; 3: $v3"
    fi
}
if ! command -v nvidia-cuda-mps-control > /dev/null; then
    report 5 SKIP "MPS: nvidia-cuda-mps-control is not on PATH (the driver's MPS tools are not installed)"
elif ! "$bin" worker --help 2> /dev/null | grep -q -- '--mps'; then
    report 5 FAIL "MPS: this gpupool's worker has no --mps flag"
else
    mps_checks
    report 5 "${mps_verdict%%: *}" "MPS: ${mps_verdict#*: }"
fi

# ---- 6. the sharing measure, on its own budget ----
pack_check

say "done in $((SECONDS - t0)) s: $failures check(s) failed (driver $driver)"
exit $((failures > 0))
