#!/usr/bin/env bash
# What one container job costs: the engine's own `run --rm IMAGE true` against what gpupool's OCI
# runtime runs around the same job, per job, over RUNS runs (default 30) of a job that does nothing
# (`true`), so that only the starting, watching and removing is measured.
#
#   CONTAINERS_CONF=.ci/containers/containers.conf GPUPOOL_TEST_DOCKER_HOST=unix:///run/gpupool-ci/docker.sock \
#     bench/engine_cost.sh [[LABEL=]path/to/gpupool_tests ...]
#
# Scenarios (podman; docker too when GPUPOOL_TEST_DOCKER_HOST answers; crun when installed):
#   run --rm              `TOOL run --rm --network none IMAGE true`: the engine alone
#   run --rm + flags      the same with gpupool's isolation flags (--init, --cap-drop=ALL, --read-only...)
#   replay: run -d ...    gpupool before issue #12, its CLI calls replayed in shell: run -d, a
#                         `logs -f` follower, `wait`, `inspect`, then `rm -f`
#   replay: run (fg)      gpupool after: one foreground `run` whose output goes to the log file, then
#                         `rm -f` of 10 finished containers in one call, off the job's path
#   OciRuntime            the real runtime through each gpupool_tests binary given (hidden test
#                         [.engine_cost]): start(), poll() on on_exit's wake or a 100 ms tick like the
#                         agent, remove(); LABEL= names it (e.g. before=old/gpupool_tests)
# Columns: wall = median ms from the start to the exit being known with the log complete (for
# `run --rm`: until the CLI returns, removal included). CPU = user+sys ms per job, over the whole
# batch (removals included), of every process the scenario runs and of what they leave running
# detached (podman's conmon, the container, conmon's `podman container cleanup`): the script makes
# itself a child subreaper (prctl), so those orphans are reaped, and counted, here; load from other
# work on the machine does not enter it. docker's daemons are outside that tree: `daemons` is the
# CPU dockerd and containerd spent during the batch (containerd-shim and the container itself are
# not counted for docker).
set -uo pipefail
if [ -z "${GPUPOOL_BENCH_SUBREAPER:-}" ]; then
    export GPUPOOL_BENCH_SUBREAPER=1
    exec python3 -c 'import ctypes, os, sys; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0); os.execvp("bash", ["bash"] + sys.argv[1:])' \
        "$0" "$@"
fi

TESTS=("$@")
RUNS=${RUNS:-30}
IMAGE=${IMAGE:-localhost/gpupool/busybox:latest}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
now_us() { date +%s%6N; }
# CPU ticks of this script's reaped children and orphans (cutime + cstime of the subreaper).
tree_cpu() { awk '{print $16 + $17}' "/proc/$$/stat"; }
# CPU ticks of the docker daemons (utime + stime); 0 without them.
daemons_cpu() {
    local total=0 pid
    for pid in $(pgrep -x dockerd) $(pgrep -x containerd); do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}
hz=$(getconf CLK_TCK)
ms_per_job() { echo $(($1 * 1000 / hz / RUNS)); }
row() { printf '| %-50s | %6s | %6s | %6s |\n' "$@"; }

# gpupool's `run` flags for a job without limits (build_run_argv), and the tests' --network none.
gp_flags=(--label gpupool.job=1 --label gpupool.attempt=1 --label gpupool.worker=bench --init --cap-drop=ALL
    --security-opt no-new-privileges --user 65534:65534 --pids-limit 4096 --ulimit nofile=4096:4096
    --ulimit nproc=4096:4096 --read-only --tmpfs /tmp:rw,nosuid,nodev,size=512m,mode=1777 --network none)

# One row: label, median wall, CPU and daemons' CPU per job. `$1` is the label, the rest a function
# run once per job with the job's index, which appends the job's wall time (us) to $tmp/walls.
measure() {
    local label=$1 c0 d0 wall
    shift
    : > "$tmp/walls"
    c0=$(tree_cpu)
    d0=$(daemons_cpu)
    for i in $(seq 1 "$RUNS"); do
        "$@" "$i"
    done
    flush_removals
    sleep 1 # detached conmons end and are reaped
    wall=$(median < "$tmp/walls")
    row "$label" "$((${wall%.*} / 1000))" "$(ms_per_job $(($(tree_cpu) - c0)))" "$(ms_per_job $(($(daemons_cpu) - d0)))"
}

pending=()
flush_removals() {
    if [ ${#pending[@]} -gt 0 ]; then
        "${tool[@]}" rm -f "${rm_args[@]}" "${pending[@]}" > /dev/null 2>&1
        pending=()
    fi
}

job_run_rm() {
    local t0
    t0=$(now_us)
    "${tool[@]}" run --rm --network none "${extra[@]}" -- "$IMAGE" true > /dev/null 2>&1 || echo "run failed" >&2
    echo $(($(now_us) - t0)) >> "$tmp/walls"
}
job_run_rm_flags() {
    local t0
    t0=$(now_us)
    "${tool[@]}" run --rm "${gp_flags[@]}" -- "$IMAGE" true > /dev/null 2>&1 || echo "run failed" >&2
    echo $(($(now_us) - t0)) >> "$tmp/walls"
}
job_replay_detached() {
    local name=gpupool-bench-$$-d$1 t0 follower
    t0=$(now_us)
    "${tool[@]}" run -d --name "$name" --log-driver "$log_driver" "${gp_flags[@]}" -- "$IMAGE" true > /dev/null
    "${tool[@]}" logs -f "$name" >> "$tmp/job.log" 2>&1 &
    follower=$!
    "${tool[@]}" wait "$name" > /dev/null
    "${tool[@]}" container inspect --format '{{.State.Running}} {{.State.ExitCode}} {{.State.OOMKilled}}' \
        "$name" > /dev/null
    wait "$follower"
    echo $(($(now_us) - t0)) >> "$tmp/walls"
    "${tool[@]}" rm -f "${rm_args[@]}" "$name" > /dev/null
}
job_replay_foreground() {
    local name=gpupool-bench-$$-f$1 t0 rc
    t0=$(now_us)
    "${tool[@]}" run --name "$name" --sig-proxy=false --log-driver "$log_driver" "${gp_flags[@]}" -- "$IMAGE" true \
        >> "$tmp/job.log" 2>&1
    rc=$?
    if { [ "$rc" -ge 125 ] && [ "$rc" -le 127 ]; } || [ "$rc" -eq 137 ]; then
        "${tool[@]}" container inspect --format '{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}' \
            "$name" > /dev/null
    fi
    echo $(($(now_us) - t0)) >> "$tmp/walls"
    pending+=("$name")
    if [ ${#pending[@]} -ge 10 ]; then
        flush_removals
    fi
}

# The real runtime: the hidden test prints the per-job medians on a line of its own.
oci_notes=()
measure_oci_runtime() {
    local label=$1 engine=$2 binary=$3 c0 d0 out wall inside
    c0=$(tree_cpu)
    d0=$(daemons_cpu)
    out=$(GPUPOOL_BENCH_ENGINE=$engine GPUPOOL_BENCH_RUNS=$RUNS GPUPOOL_BENCH_IMAGE=$IMAGE \
        "$binary" "[.engine_cost]" 2>&1)
    sleep 1
    wall=$(echo "$out" | sed -n 's/.*engine_cost: wall_median_us=\([0-9]*\).*/\1/p' | tail -1)
    inside=$(echo "$out" | sed -n 's/.*agent_thread_median_us=\([0-9]*\).*/\1/p' | tail -1)
    if [ -z "$wall" ]; then
        echo "$out" | tail -20 >&2
        row "$label" failed "" ""
        return
    fi
    row "$label" "$((wall / 1000))" "$(ms_per_job $(($(tree_cpu) - c0)))" "$(ms_per_job $(($(daemons_cpu) - d0)))"
    oci_notes+=("$label: the caller's thread spent a median $((inside / 1000)) ms per job inside start, poll and remove")
}

echo "== engine cost per job: $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2> /dev/null)," \
    "$RUNS runs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(podman --version 2> /dev/null), runc $(runc --version 2> /dev/null | head -1 | awk '{print $3}')," \
    "crun $(crun --version 2> /dev/null | head -1 | awk '{print $3}'), docker $(docker --version 2> /dev/null | awk '{print $3}' | tr -d ,)"
echo
row scenario "wall ms" "CPU ms" "daemons CPU ms"
echo "|---|---|---|---|"

engines=()
podman image exists "$IMAGE" 2> /dev/null && engines+=(podman)
docker_host=${GPUPOOL_TEST_DOCKER_HOST:-}
if [ -n "$docker_host" ] && docker -H "$docker_host" image inspect "$IMAGE" > /dev/null 2>&1; then
    engines+=(docker)
fi
for engine in "${engines[@]}"; do
    if [ "$engine" = podman ]; then
        tool=(podman)
        rm_args=(-t 0)
        log_driver=k8s-file
    else
        tool=(docker -H "$docker_host")
        rm_args=()
        log_driver=json-file
    fi
    extra=()
    measure "$engine run --rm" job_run_rm
    if [ "$engine" = podman ] && command -v crun > /dev/null; then
        extra=(--runtime crun)
        if why=$(podman run --rm --network none --runtime crun -- "$IMAGE" true 2>&1); then
            measure "$engine run --rm --runtime crun" job_run_rm
        else
            row "$engine run --rm --runtime crun" "fails: ${why//|/}" "" ""
        fi
        extra=()
    fi
    measure "$engine run --rm + gpupool's flags" job_run_rm_flags
    measure "$engine replay: run -d, logs -f, wait, inspect, rm" job_replay_detached
    measure "$engine replay: run (foreground), rm x10" job_replay_foreground
    for t in "${TESTS[@]}"; do
        label=$(basename "$(dirname "$(realpath "${t#*=}")")")
        [ "$t" != "${t#*=}" ] && label=${t%%=*}
        measure_oci_runtime "$engine OciRuntime, $label" "$engine" "${t#*=}"
    done
done
for note in "${oci_notes[@]}"; do
    echo "$note"
done
