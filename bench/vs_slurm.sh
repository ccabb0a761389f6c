#!/usr/bin/env bash
# gpupool beside Slurm on one machine, everything on 127.0.0.1, printed as ONE table.
#
#   bench/vs_slurm.sh [path/to/gpupool]          (make bench runs it with N=40)
#   N=200 SLOTS="2 32" REPS=3 bench/vs_slurm.sh build/gpupool
#
# It sets up, in a temporary folder it removes afterwards:
#   - a throw-away single-node Slurm (Debian's slurm-wlm 22.05 and munge, installed with apt-get when
#     missing): munged, slurmctld and slurmd on loopback ports, restarted for each slot count with
#     CPUs=S (SlurmdParameters=config_overrides) and throughput-tuned scheduler settings (bench/README.md);
#   - gpupool: a coordinator (SQLite, default flags) and one worker (`--runtime process`, then
#     `--runtime podman`) restarted for each slot count with `--slots S`.
# and runs on both, for each slot count S in SLOTS:
#   1. N `true` jobs as one array / one sweep, and as N single submissions: completed jobs/s =
#      N / (first submission -> last completion), the median of REPS runs;
#   2. submit -> done latency of LAT_N single `true` jobs one after the other (median, p95): Slurm's
#      `sbatch` + `squeue -t all -j ID` polled every POLL_S, and `srun true`; gpupool's
#      `gpupool submit --wait` timed by this script (client-observed) and the job's own
#      created_at -> finished_at in the coordinator (coordinator-recorded);
#   3. at SLEEP_SLOTS slots: a sweep / array of SLEEP_N jobs that sleep 1 s;
#   4. with podman (when it has IMAGE): PODMAN_N `true` containers: `podman run --rm IMAGE true`
#      alone, S at a time (the engine's own cost per job), as a Slurm array whose jobs run that
#      command, and as a gpupool sweep on a `--runtime podman` worker.
# gpupool's completions are seen by `gpupool wait` (parked on the coordinator until the last job
# ends), then confirmed with one GET /v1/jobs (client-observed); the
# coordinator's own created_at/finished_at give a second figure (coordinator-recorded). Slurm keeps
# no record without slurmdbd, so its figures are this script's observations only.
#
# Knobs (environment): N (200), SLOTS ("2 32"), REPS (1), LAT_N (20), SLEEP_N (100), SLEEP_SLOTS (32),
# PODMAN_N (50), POLL_S (0.05), KEEP (1: keep the temporary folder and its logs), SLURM (auto|0: skip Slurm), PODMAN (auto|0), IMAGE
# (localhost/gpupool/busybox:latest), COORD_ARGS / WORKER_ARGS (extra flags for the coordinator /
# worker, split on spaces), PHASE_TIMEOUT_S (60 + 3 N: the cap on every wait for a batch of jobs),
# TMPDIR (where the temporary folder goes: /tmp).
# CONTAINERS_CONF is set to .ci/containers/containers.conf when unset.
set -uo pipefail

BIN=$(realpath "${1:-build/gpupool}")
N=${N:-200}
SLOTS=${SLOTS:-"2 32"}
REPS=${REPS:-1}
LAT_N=${LAT_N:-20}
SLEEP_N=${SLEEP_N:-100}
SLEEP_SLOTS=${SLEEP_SLOTS:-32}
PODMAN_N=${PODMAN_N:-50}
POLL_S=${POLL_S:-0.05}
SLURM=${SLURM:-auto}
PODMAN=${PODMAN:-auto}
IMAGE=${IMAGE:-localhost/gpupool/busybox:latest}
PHASE_TIMEOUT_S=${PHASE_TIMEOUT_S:-$((60 + 3 * N))}
read -r -a coord_args <<< "${COORD_ARGS:-}"
read -r -a worker_args <<< "${WORKER_ARGS:-}"
cd "$(dirname "$0")/.." || exit 2
repo=$(pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/.ci/containers/containers.conf}
[ -x "$BIN" ] || { echo "vs_slurm: no gpupool binary at $BIN" >&2; exit 2; }
for tool in curl jq ss; do
    command -v "$tool" > /dev/null || { echo "vs_slurm: $tool is missing" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vs-slurm.XXXXXX")
chmod 755 "$tmp"
gp=$tmp/gpupool             # the coordinator's and the worker's files
slurm_dir=$tmp/slurm        # Slurm's config, state and logs
mkdir -p "$gp/jobs"
pids=()                    # every daemon this script started (gpupool's and Slurm's), by pid
slurm_pids=()              # munged, slurmctld, slurmd of the running Slurm
gp_worker_pid=""
t_start=$SECONDS

say() { printf '[%4ds] %s\n' "$((SECONDS - t_start))" "$*" >&2; }
now_ns() { date +%s%N; }
phase="setting up"
# note TEXT: something that went wrong in this phase; said now and listed under the table.
note() {
    say "warning: $phase: $*"
    echo "- $phase: $*" >> "$tmp/notes"
}
# stop_pid PID [GRACE_S]: SIGTERM, up to GRACE_S (5) for it to go, then SIGKILL.
stop_pid() {
    local pid=$1 grace=${2:-5} i
    kill -0 "$pid" 2> /dev/null || return 0
    kill -TERM "$pid" 2> /dev/null
    for ((i = 0; i < grace * 20; i++)); do
        kill -0 "$pid" 2> /dev/null || { wait "$pid" 2> /dev/null; return 0; }
        sleep 0.05
    done
    kill -KILL "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
    return 0
}
# eventually SECONDS COMMAND...: retries every POLL_S until it succeeds or time is up.
eventually() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep "$POLL_S"
    done
}
free_port() { # a free TCP port on loopback, not $1
    local p
    while true; do
        p=$((20000 + RANDOM % 30000))
        [ "$p" != "${1:-}" ] || continue
        [ -z "$(ss -Htln "sport = :$p")" ] && { echo "$p"; return; }
    done
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print ""; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
p95() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print ""; else {i=int(NR*0.95+0.999); if (i>NR) i=NR; print a[i]}}'; }

# ---------------------------------------------------------------- clean-up: always, whatever happened
cleanup() {
    trap '' INT TERM
    [ -n "$gp_worker_pid" ] && stop_pid "$gp_worker_pid" 10
    slurm_stop
    local pid
    for pid in "${pids[@]}"; do
        stop_pid "$pid" 5
    done
    # Containers this run's podman worker or Slurm jobs may have left (labelled by this run only).
    if command -v podman > /dev/null; then
        local label
        label=$(jq -r '"w\(.worker_id)-\(.instance)"' "$gp/work/worker.json" 2> /dev/null)
        [ -n "$label" ] && podman ps -aq --filter "label=gpupool.worker=$label" 2> /dev/null | xargs -r podman rm -f > /dev/null 2>&1
        podman ps -aq --filter "label=vs-slurm=$run_label" 2> /dev/null | xargs -r podman rm -f > /dev/null 2>&1
    fi
    if [ "${KEEP:-0}" = 1 ]; then say "kept $tmp (KEEP=1)"; else rm -rf "$tmp"; fi
}
run_label=$(basename "$tmp")
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- results
declare -A R    # R[key]=figure
record() { R[$1]=$2; }

# ---------------------------------------------------------------- Slurm
slurm_ok=0
slurm_why=""
if [ "$SLURM" = 0 ]; then
    slurm_why="SLURM=0"
elif ! command -v slurmctld > /dev/null || ! command -v munged > /dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        slurm_why="slurm-wlm is not installed and this is not root (apt-get install slurm-wlm munge)"
    elif ! command -v apt-get > /dev/null; then
        slurm_why="slurm-wlm is not installed and there is no apt-get"
    else
        say "installing slurm-wlm and munge (apt-get)"
        if DEBIAN_FRONTEND=noninteractive timeout 600 apt-get -o DPkg::Lock::Timeout=300 install -y -q \
            --no-install-recommends slurm-wlm munge > "$tmp/apt.log" 2>&1 ||
            { DEBIAN_FRONTEND=noninteractive timeout 300 apt-get -o DPkg::Lock::Timeout=300 update -q > /dev/null 2>&1 &&
                DEBIAN_FRONTEND=noninteractive timeout 600 apt-get -o DPkg::Lock::Timeout=300 install -y -q \
                    --no-install-recommends slurm-wlm munge > "$tmp/apt.log" 2>&1; }; then
            :
        fi
        command -v slurmctld > /dev/null && command -v munged > /dev/null ||
            slurm_why="slurm-wlm could not be installed (no network or apt?): $(tail -1 "$tmp/apt.log")"
    fi
fi
if [ -z "$slurm_why" ]; then
    [ "$(id -u)" -eq 0 ] && slurm_ok=1 || slurm_why="the single-node Slurm here runs as root (SlurmUser=root)"
fi

slurm_conf() { # slurm_conf CPUS
    local run=$slurm_dir/run log=$slurm_dir/log
    cat << EOF
ClusterName=bench
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$run/munge/munge.socket.2
MailProg=/bin/true
SlurmctldPort=$slurm_ctld_port
SlurmdPort=$slurm_d_port
StateSaveLocation=$run/state
SlurmdSpoolDir=$run/spool
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd.pid
SlurmctldLogFile=$log/slurmctld.log
SlurmdLogFile=$log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
PriorityType=priority/basic
ReturnToService=2
MaxJobCount=10060
MaxArraySize=10001
MinJobAge=2
SlurmdParameters=config_overrides
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=1000,partition_job_depth=1000,sched_max_job_start=0,bf_continue,bf_interval=30,bf_max_job_test=100
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$1 RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

# The live slurmstepd processes of this run's slurmd (they hold its log open; a zombie holds nothing).
slurm_stepds() {
    local p f
    for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2> /dev/null)" = slurmstepd ] || continue
        for f in "$p"/fd/*; do
            case "$(readlink "$f" 2> /dev/null)" in "$slurm_dir"/*)
                echo "${p#/proc/}"
                break
                ;;
            esac
        done
    done
}
# The processes of this run's Slurm jobs: SLURM_JOB_ID and this run's SLURM_CONF in their environment.
slurm_job_procs() {
    local p env
    for p in /proc/[0-9]*; do
        env=$({ tr '\0' '\n' < "$p/environ"; } 2> /dev/null) || continue
        grep -qx "SLURM_CONF=$slurm_dir/slurm.conf" <<< "$env" && grep -q '^SLURM_JOB_ID=' <<< "$env" && echo "${p#/proc/}"
    done
}

slurm_start() { # slurm_start CPUS: munged + slurmctld + slurmd, until the node is idle
    local cpus=$1 run=$slurm_dir/run log=$slurm_dir/log
    rm -rf "$slurm_dir"
    mkdir -p "$run/munge" "$run/state" "$run/spool" "$log" "$slurm_dir/jobs"
    chmod 711 "$run/munge"
    slurm_ctld_port=$(free_port)
    slurm_d_port=$(free_port "$slurm_ctld_port")
    slurm_conf "$cpus" > "$slurm_dir/slurm.conf"
    export SLURM_CONF=$slurm_dir/slurm.conf
    mungekey --create --keyfile "$run/munge/munge.key" 2> /dev/null ||
        (umask 077 && head -c 1024 /dev/urandom > "$run/munge/munge.key")
    chmod 600 "$run/munge/munge.key"
    setsid munged --foreground --force --key-file "$run/munge/munge.key" --socket "$run/munge/munge.socket.2" \
        --pid-file "$run/munge/munged.pid" --log-file "$log/munged.log" --seed-file "$run/munge/seed" \
        < /dev/null > "$log/munged.out" 2>&1 &
    slurm_pids+=($!)
    eventually 10 test -S "$run/munge/munge.socket.2" || { say "munged did not start: $(tail -3 "$log/munged.log")"; return 1; }
    setsid slurmctld -D -c -f "$SLURM_CONF" < /dev/null > "$log/slurmctld.out" 2>&1 &
    slurm_pids+=($!)
    setsid slurmd -D -N localhost -f "$SLURM_CONF" < /dev/null > "$log/slurmd.out" 2>&1 &
    slurm_pids+=($!)
    node_idle() { [ "$(timeout 5 sinfo -h -n localhost -o %t 2> /dev/null)" = idle ]; }
    if ! eventually 30 node_idle; then
        say "Slurm's node is not idle after 30 s: $(timeout 5 sinfo -h -o '%t %E' 2> /dev/null); $(tail -3 "$log/slurmctld.log" 2> /dev/null)"
        return 1
    fi
    local cpus_seen
    cpus_seen=$(timeout 5 sinfo -h -n localhost -o %c)
    [ "$cpus_seen" = "$cpus" ] || say "warning: Slurm's node has $cpus_seen CPUs, not $cpus"
}

slurm_stop() {
    [ ${#slurm_pids[@]} -gt 0 ] || return 0
    local i pid left
    # Cancel everything, and give the steps time to kill their jobs while slurmd still runs.
    # (at most 15 s in all, whatever state the daemons are in).
    local end=$((SECONDS + 15))
    timeout 5 scancel --partition=main > /dev/null 2>&1
    while [ "$SECONDS" -lt "$end" ]; do
        [ -z "$(timeout 2 squeue -h 2> /dev/null)" ] && [ -z "$(slurm_stepds)" ] && break
        sleep 0.1
    done
    left=$(slurm_stepds)
    for ((i = ${#slurm_pids[@]} - 1; i >= 0; i--)); do # slurmd, slurmctld, then munged
        stop_pid "${slurm_pids[$i]}" 5
    done
    slurm_pids=()
    # slurmstepd ignores SIGTERM: steps still there, and what is left of their jobs, are killed by pid.
    for pid in $({ echo "$left"; slurm_stepds; slurm_job_procs; } | sort -u); do
        kill -KILL "$pid" 2> /dev/null && say "killed a leftover of Slurm: pid $pid ($(cat "/proc/$pid/comm" 2> /dev/null))"
    done
    return 0
}

squeue_count() { timeout 10 squeue -h -r -o %i 2> /dev/null | wc -l; }
slurm_completed_lines() { grep -c '_job_complete: JobId=.* WEXITSTATUS 0' "$slurm_dir/log/slurmctld.log" 2> /dev/null; }
slurm_wait_empty() { # until squeue lists nothing (pending or running) or PHASE_TIMEOUT_S
    local end=$((SECONDS + PHASE_TIMEOUT_S))
    while [ "$(squeue_count)" != 0 ]; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep "$POLL_S"
    done
}

# slurm_batch MODE COUNT COMMAND: MODE array (one sbatch --array) or single (COUNT sbatch calls);
# prints completed jobs/s, or "timeout".
slurm_batch() {
    local mode=$1 n=$2 cmd=$3 before after t0 t1 i
    before=$(slurm_completed_lines)
    t0=$(now_ns)
    if [ "$mode" = array ]; then
        timeout 60 sbatch --parsable --array="1-$n" --chdir "$slurm_dir/jobs" -o /dev/null -e /dev/null \
            --wrap "$cmd" > /dev/null || { note "sbatch failed"; echo "sbatch-failed"; return; }
    else
        # One process per submission and nothing else, as gpupool's loop below (no `timeout` around
        # each: that would be a second process; sbatch gives up on its own, MessageTimeout).
        for ((i = 1; i <= n; i++)); do
            sbatch --parsable --chdir "$slurm_dir/jobs" -o /dev/null -e /dev/null --wrap "$cmd" > /dev/null ||
                { note "sbatch failed"; echo "sbatch-failed"; return; }
        done
    fi
    if ! slurm_wait_empty; then
        timeout 10 scancel --partition=main > /dev/null 2>&1
        note "not done within PHASE_TIMEOUT_S=${PHASE_TIMEOUT_S}s"
        echo timeout
        return
    fi
    t1=$(now_ns)
    sleep 0.5 # the controller logs the last completion before squeue forgets it, but be sure
    after=$(slurm_completed_lines)
    [ $((after - before)) -eq "$n" ] || note "slurmctld logged $((after - before)) of $n jobs as exiting 0"
    awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", n / ((b - a) / 1e9)}'
}

# slurm_latency: LAT_N sbatch jobs one after the other, each polled with squeue -t all -j ID; then
# LAT_N `srun true`. Seconds per job into $tmp/lat-sbatch and $tmp/lat-srun.
slurm_latency() {
    local i id t0 st end
    : > "$tmp/lat-sbatch"
    : > "$tmp/lat-srun"
    for ((i = 1; i <= LAT_N; i++)); do
        t0=$(now_ns)
        id=$(timeout 30 sbatch --parsable --chdir "$slurm_dir/jobs" -o /dev/null -e /dev/null --wrap true) || return 1
        end=$((SECONDS + 60))
        while true; do
            st=$(timeout 10 squeue -h -t all -j "$id" -o %T 2> /dev/null)
            case "$st" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | "") break ;; esac
            [ "$SECONDS" -lt "$end" ] || return 1
            sleep 0.01
        done
        awk -v a="$t0" -v b="$(now_ns)" 'BEGIN {printf "%.4f\n", (b - a) / 1e9}' >> "$tmp/lat-sbatch"
    done
    for ((i = 1; i <= LAT_N; i++)); do
        t0=$(now_ns)
        (cd "$slurm_dir/jobs" && timeout 60 srun -Q true) || return 1
        awk -v a="$t0" -v b="$(now_ns)" 'BEGIN {printf "%.4f\n", (b - a) / 1e9}' >> "$tmp/lat-srun"
    done
}

# ---------------------------------------------------------------- gpupool
gp_url=""
gp_member=""

gp_coord_pid=""
gp_start_coordinator() { # a new pool; again (the same database and port) after the coordinator died
    local listen=127.0.0.1:0
    [ -s "$gp/port" ] && listen=127.0.0.1:$(cat "$gp/port") && rm -f "$gp/port"
    "$BIN" coordinator --listen "$listen" --db "$gp/pool.db" --port-file "$gp/port" \
        --admin-token-file "$gp/admin.token" "${coord_args[@]}" >> "$gp/coordinator.out" 2>> "$gp/coordinator.err" < /dev/null &
    gp_coord_pid=$!
    pids+=("$gp_coord_pid")
    eventually 30 test -s "$gp/port" || { say "the coordinator did not start: $(tail -5 "$gp/coordinator.err")"; return 1; }
    [ -n "$gp_url" ] && return 0
    gp_url=http://127.0.0.1:$(cat "$gp/port")
    eventually 10 test -s "$gp/admin.token" || { say "no admin token"; return 1; }
    local as_admin=("$BIN" --url "$gp_url" --token-file "$gp/admin.token")
    if ! { "${as_admin[@]}" admin team create bench > /dev/null &&
        "${as_admin[@]}" admin grant bench 1000000 > /dev/null &&
        (umask 077 && "${as_admin[@]}" admin token create --team bench --label bench > "$gp/member.token" 2> /dev/null) &&
        (umask 077 && "${as_admin[@]}" admin enroll bench > "$gp/enroll.token" 2> /dev/null); }; then
        say "could not set up the team and tokens"
        return 1
    fi
    gp_member=$(cat "$gp/member.token")
}
# gp_check RUNTIME SLOTS: before each gpupool phase, the coordinator must still run; one that exited
# (a crash, or a signal from outside this script) is noted and started again, with the worker.
gp_check() {
    kill -0 "$gp_coord_pid" 2> /dev/null && return 0
    wait "$gp_coord_pid" 2> /dev/null
    note "the coordinator (pid $gp_coord_pid) exited with status $?: $(tail -1 "$gp/coordinator.err"); started again"
    gp_start_coordinator && gp_worker "$1" "$2"
}
gp() { "$BIN" --url "$gp_url" --token-file "$gp/member.token" "$@"; }
# gp_api PATH: GET with the member token; a request the coordinator does not answer within 10 s is
# said (it is a finding) and tried again, twice.
gp_api() {
    local try
    for try in 1 2 3; do
        kill -0 "$gp_coord_pid" 2> /dev/null || return 1
        curl -sSf --max-time 10 -H "Authorization: Bearer $gp_member" "$gp_url$1" 2> "$tmp/curl.err" && return 0
        note "GET $1 (try $try): $(cat "$tmp/curl.err")"
    done
    return 1
}

# gp_worker RUNTIME SLOTS: (re)starts the one worker (the same identity each time) and waits until a
# job runs on it.
gp_worker() {
    local rt=$1 slots=$2
    [ -n "$gp_worker_pid" ] && stop_pid "$gp_worker_pid" 30
    gp_worker_pid=""
    local global=() extra=() waiter
    [ "$rt" = process ] && extra+=(--unsafe-process-runtime)
    [ -s "$gp/work/worker.json" ] || global+=(--token-file "$gp/enroll.token")
    # One CPU and 64 MiB per slot on offer, as Slurm's CPUs=S: --slots is what binds.
    "$BIN" --log-level info --url "$gp_url" "${global[@]}" worker --share --runtime "$rt" "${extra[@]}" \
        --work-dir "$gp/work" --slots "$slots" --cpus-milli $((slots * 1000)) --memory-mib $((slots * 64)) \
        "${worker_args[@]}" >> "$gp/worker.out" 2>> "$gp/worker.err" < /dev/null &
    gp_worker_pid=$!
    # Warm-up: one job must succeed on it (within 120 s, and while the worker lives).
    gp_recipe one "true" > "$gp/jobs/warm.toml"
    timeout 120 "$BIN" --url "$gp_url" --token-file "$gp/member.token" submit --wait "$gp/jobs/warm.toml" > /dev/null 2>&1 &
    waiter=$!
    while kill -0 "$waiter" 2> /dev/null && kill -0 "$gp_worker_pid" 2> /dev/null; do
        sleep "$POLL_S"
    done
    if ! kill -0 "$gp_worker_pid" 2> /dev/null; then
        stop_pid "$waiter" 1
        note "the gpupool worker ($rt, $slots slots) exited: $(tail -3 "$gp/worker.err")"
        gp_worker_pid=""
        return 1
    fi
    if ! wait "$waiter"; then
        note "the gpupool worker ($rt, $slots slots) did not run a job within 120 s: $(tail -3 "$gp/worker.err")"
        return 1
    fi
}

# gp_recipe one|sweep COMMAND [COUNT]: a recipe of one job, or a sweep of COUNT jobs (one submission).
gp_recipe() {
    cat << EOF
format = 1
name = "vs-{i}"
image = "$IMAGE"
command = "$2"
[resources]
cpus = 1
memory = "32MiB"
max_runtime = "10m"
[retry]
max_attempts = 1
[sweep]
i = [$(if [ "$1" = sweep ]; then seq -s ', ' 1 "$3"; else echo 1; fi)]
EOF
}

# gp_unfinished COUNT: how many of the COUNT newest jobs have not ended.
gp_unfinished() {
    gp_api "/v1/jobs?limit=$1" | jq '[.jobs[] | select(.state != "succeeded" and .state != "failed" and .state != "cancelled")] | length'
}
gp_wait_done() { # gp_wait_done COUNT
    local end=$((SECONDS + PHASE_TIMEOUT_S)) left
    while true; do
        kill -0 "$gp_coord_pid" 2> /dev/null || { note "the coordinator exited"; return 1; }
        left=$(gp_unfinished "$1")
        [ "$left" = 0 ] && return 0
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep "$POLL_S"
    done
}
# gp_recorded COUNT: over the COUNT newest jobs, "SUCCEEDED FIRST_CREATED_MS LAST_FINISHED_MS
# FIRST_FAILURE" (tab-separated; the state and reason of the first job that did not succeed).
gp_recorded() {
    local ids urls=()
    ids=$(gp_api "/v1/jobs?limit=$1" | jq -r '.jobs[].id') || return 1
    for id in $ids; do urls+=("$gp_url/v1/jobs/$id"); done
    [ ${#urls[@]} -gt 0 ] || return 1
    curl -sSf --max-time 120 -H "Authorization: Bearer $gp_member" "${urls[@]}" |
        jq -s -r '[([.[] | select(.state == "succeeded")] | length), (map(.created_at) | min), (map(.finished_at // 0) | max),
                ([.[] | select(.state != "succeeded") | "\(.state): \(.reason)"] | first // "")] | @tsv'
}

# gp_batch MODE COUNT COMMAND: prints "client-observed jobs/s<TAB>coordinator-recorded jobs/s".
gp_batch() {
    local mode=$1 n=$2 cmd=$3 t0 t1 i ok created finished failure
    gp_recipe sweep "$cmd" "$n" > "$gp/jobs/sweep.toml"
    gp_recipe one "$cmd" > "$gp/jobs/one.toml"
    local ids=() out
    t0=$(now_ns)
    if [ "$mode" = array ]; then
        out=$(gp submit "$gp/jobs/sweep.toml" 2> "$gp/submit.err") ||
            { note "submit failed: $(tail -1 "$gp/submit.err")"; echo "submit-failed"; return; }
        ids+=(--sweep "$(sed -n 's/^submitted sweep \([0-9]*\):.*/\1/p' <<< "$out")")
    else
        # One process per submission, its answer appended to a file as Slurm's loop sends sbatch's to
        # /dev/null: no command substitution or sed per job (two more processes each, which this
        # VM makes cost about as much as the submission itself); the ids are read once afterwards.
        : > "$gp/submit.out"
        for ((i = 1; i <= n; i++)); do
            gp submit "$gp/jobs/one.toml" >> "$gp/submit.out" 2> "$gp/submit.err" ||
                { note "submit failed: $(tail -1 "$gp/submit.err")"; echo "submit-failed"; return; }
        done
        mapfile -t -O ${#ids[@]} ids < <(sed -n 's/.*(id \([0-9]*\)).*/\1/p' "$gp/submit.out")
        [ ${#ids[@]} -eq "$n" ] || { note "submit printed ${#ids[@]} ids for $n jobs"; echo "submit-failed"; return; }
    fi
    # The client waits as researchers do (`gpupool wait`: parked on POST /v1/jobs/wait, answered when
    # the last job ends), not by listing every job every POLL_S: with N in the hundreds that listing
    # and its jq took a third of the 2 cores away from the pool being measured.
    timeout "$PHASE_TIMEOUT_S" "$BIN" --url "$gp_url" --token-file "$gp/member.token" wait "${ids[@]}" > /dev/null 2>&1
    if ! gp_wait_done "$n"; then
        kill -0 "$gp_coord_pid" 2> /dev/null || { echo "coordinator-exited"; return; }
        gp_api "/v1/jobs?limit=$n" | jq -r '.jobs[] | select(.state == "queued" or .state == "running" or .state == "assigned") | .id' |
            while read -r id; do gp cancel "$id" > /dev/null 2>&1; done
        note "not done within PHASE_TIMEOUT_S=${PHASE_TIMEOUT_S}s"
        echo timeout
        return
    fi
    t1=$(now_ns)
    IFS=$'\t' read -r ok created finished failure <<< "$(gp_recorded "$n")"
    [ "${ok:-}" = "$n" ] || note "${ok:-?} of $n jobs succeeded (the first other: ${failure:-?})"
    awk -v n="$n" -v a="$t0" -v b="$t1" -v c="${created:-0}" -v f="${finished:-0}" \
        'BEGIN {printf "%.2f\t", n / ((b - a) / 1e9); if (c > 0 && f > c) printf "%.2f", n / ((f - c) / 1e3)}'
}

# gp_latency: LAT_N `gpupool submit --wait` one after the other: client-observed seconds into
# $tmp/lat-gp-client, the coordinator's created_at -> finished_at into $tmp/lat-gp-coord.
gp_latency() {
    local i t0 t1 out
    : > "$tmp/lat-gp-client"
    : > "$tmp/lat-gp-coord"
    gp_recipe one "true" > "$gp/jobs/one.toml"
    for ((i = 1; i <= LAT_N; i++)); do
        t0=$(now_ns)
        out=$(timeout 60 "$BIN" --url "$gp_url" --token-file "$gp/member.token" --json submit --wait "$gp/jobs/one.toml" 2> /dev/null) ||
            return 1
        t1=$(now_ns)
        awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f\n", (b - a) / 1e9}' >> "$tmp/lat-gp-client"
        jq -r '.jobs[0] | (.finished_at - .created_at) / 1000' <<< "$out" >> "$tmp/lat-gp-coord"
    done
}

# podman alone: COUNT `podman run --rm IMAGE true`, SLOTS at a time; prints seconds per job.
podman_alone() {
    local n=$1 slots=$2 t0 t1
    t0=$(now_ns)
    seq 1 "$n" | timeout "$PHASE_TIMEOUT_S" xargs -P "$slots" -I{} \
        podman run --rm --label "vs-slurm=$run_label" "$IMAGE" true > /dev/null 2> "$tmp/podman.err" ||
        { note "podman run failed: $(tail -1 "$tmp/podman.err")"; echo "failed"; return; }
    t1=$(now_ns)
    awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9 / n}'
}

rate_to_cost() { awk -v r="$1" 'BEGIN {if (r + 0 > 0) printf "%.3f", 1 / r; else print r}'; }

# ---------------------------------------------------------------- the run
podman_ok=0
podman_why=""
if [ "$PODMAN" = 0 ]; then
    podman_why="PODMAN=0"
elif ! command -v podman > /dev/null; then
    podman_why="podman is not installed (make containers)"
elif ! podman image exists "$IMAGE" 2> /dev/null; then
    podman_why="podman has no $IMAGE (make containers)"
else
    podman_ok=1
fi

commit=$(git -C "$repo" rev-parse --short HEAD 2> /dev/null || echo unknown)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
version=$("$BIN" version 2> /dev/null | head -1)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
slurm_version=$( ((slurm_ok)) && slurmctld -V 2> /dev/null || echo -)
podman_version=$( ((podman_ok)) && podman --version 2> /dev/null || echo -)
say "gpupool $BIN ($version), N=$N SLOTS=\"$SLOTS\" REPS=$REPS LAT_N=$LAT_N SLEEP_N=$SLEEP_N PODMAN_N=$PODMAN_N"
((slurm_ok)) || say "Slurm skipped: $slurm_why; gpupool's figures only"
((podman_ok)) || say "podman skipped: $podman_why"

gp_start_coordinator || exit 1
say "coordinator on $gp_url"

for S in $SLOTS; do
    slurm_up=0
    if ((slurm_ok)); then
        if slurm_start "$S"; then
            slurm_up=1
            say "Slurm up: CPUs=$S, ports $slurm_ctld_port/$slurm_d_port"
        else
            say "Slurm did not start with CPUs=$S; its figures are missing"
            slurm_stop
        fi
    fi
    phase="gpupool worker, process, $S slots"
    gp_worker process "$S" || exit 1
    say "gpupool worker up: --runtime process --slots $S"

    for mode in array single; do
        s_runs=()
        g_runs=()
        c_runs=()
        for ((rep = 1; rep <= REPS; rep++)); do
            if ((slurm_up)); then
                phase="Slurm, $N true as $mode, $S slots, run $rep"
                v=$(slurm_batch "$mode" "$N" true)
                s_runs+=("$v")
                say "Slurm   $mode  $N x true, $S slots: $v jobs/s"
            fi
            phase="gpupool, $N true as $mode, $S slots, run $rep"
            gp_check process "$S"
            IFS=$'\t' read -r v c <<< "$(gp_batch "$mode" "$N" true)"
            g_runs+=("$v")
            c_runs+=("${c:-}")
            say "gpupool $mode  $N x true, $S slots: $v jobs/s client-observed, ${c:-?} coordinator-recorded"
        done
        ((slurm_up)) && record "slurm.$mode.$S" "$(printf '%s\n' "${s_runs[@]}" | median)"
        record "gp.$mode.$S" "$(printf '%s\n' "${g_runs[@]}" | median)"
        record "gpc.$mode.$S" "$(printf '%s\n' "${c_runs[@]}" | median)"
    done

    if ((slurm_up)); then
        phase="Slurm, latency, $S slots"
        if slurm_latency; then
            record "slurm.lat50.$S" "$(median < "$tmp/lat-sbatch")"
            record "slurm.lat95.$S" "$(p95 < "$tmp/lat-sbatch")"
            record "srun.lat50.$S" "$(median < "$tmp/lat-srun")"
            record "srun.lat95.$S" "$(p95 < "$tmp/lat-srun")"
        else
            note "the latency run failed"
        fi
        say "Slurm   latency, $S slots: sbatch median ${R[slurm.lat50.$S]:-?} s, srun median ${R[srun.lat50.$S]:-?} s"
    fi
    phase="gpupool, latency, $S slots"
    gp_check process "$S"
    if gp_latency; then
        record "gp.lat50.$S" "$(median < "$tmp/lat-gp-client")"
        record "gp.lat95.$S" "$(p95 < "$tmp/lat-gp-client")"
        record "gpc.lat50.$S" "$(median < "$tmp/lat-gp-coord")"
        record "gpc.lat95.$S" "$(p95 < "$tmp/lat-gp-coord")"
    else
        note "the latency run failed"
    fi
    say "gpupool latency, $S slots: submit --wait median ${R[gp.lat50.$S]:-?} s, coordinator-recorded ${R[gpc.lat50.$S]:-?} s"

    if [ "$S" = "$SLEEP_SLOTS" ]; then
        if ((slurm_up)); then
            phase="Slurm, $SLEEP_N sleep 1 as array, $S slots"
            record "slurm.sleep.$S" "$(slurm_batch array "$SLEEP_N" 'sleep 1')"
            say "Slurm   array  $SLEEP_N x sleep 1: ${R[slurm.sleep.$S]} jobs/s"
        fi
        phase="gpupool, $SLEEP_N sleep 1 as array, $S slots"
        gp_check process "$S"
        IFS=$'\t' read -r v c <<< "$(gp_batch array "$SLEEP_N" 'sleep 1')"
        record "gp.sleep.$S" "$v"
        record "gpc.sleep.$S" "${c:-}"
        say "gpupool sweep  $SLEEP_N x sleep 1: $v jobs/s client-observed, ${c:-?} coordinator-recorded"
    fi

    if ((podman_ok)); then
        phase="podman alone, $PODMAN_N, $S at a time"
        record "engine.$S" "$(podman_alone "$PODMAN_N" "$S")"
        say "podman run --rm alone, $S at a time: ${R[engine.$S]} s per job"
        if ((slurm_up)); then
            phase="Slurm, $PODMAN_N podman run --rm as array, $S slots"
            v=$(slurm_batch array "$PODMAN_N" "podman run --rm --label vs-slurm=$run_label $IMAGE true")
            record "slurm.podman.$S" "$(rate_to_cost "$v")"
            say "Slurm   array of $PODMAN_N podman run --rm: ${R[slurm.podman.$S]} s per job"
        fi
        phase="gpupool, $PODMAN_N podman true as array, $S slots"
        gp_check process "$S"
        if gp_worker podman "$S"; then
            IFS=$'\t' read -r v c <<< "$(gp_batch array "$PODMAN_N" true)"
            record "gp.podman.$S" "$(rate_to_cost "$v")"
            record "gpc.podman.$S" "$(rate_to_cost "${c:-}")"
            say "gpupool sweep of $PODMAN_N on podman: ${R[gp.podman.$S]} s per job client-observed, ${R[gpc.podman.$S]} coordinator-recorded"
        fi
    fi
    slurm_stop
done
[ -n "$gp_worker_pid" ] && stop_pid "$gp_worker_pid" 30
gp_worker_pid=""
total_s=$((SECONDS - t_start))

# ---------------------------------------------------------------- the table
# ratio: how many times better gpupool is (gpupool / peer for rates, peer / gpupool for times).
ratio() { # ratio KIND PEER GPUPOOL
    awk -v k="$1" -v p="$2" -v g="$3" 'BEGIN {
        if (p + 0 <= 0 || g + 0 <= 0) { print "-"; exit }
        printf "%.2f×", (k == "rate" ? g / p : p / g) }'
}
cell() { [ -n "${1:-}" ] && echo "$1" || echo "-"; }
row() { # row MEASURE SLOTS PEER_NAME PEER GP GP_COORD KIND TARGET
    local r rc
    r=$(ratio "$7" "${4:-}" "${5:-}")
    rc=$(ratio "$7" "${4:-}" "${6:-}")
    printf '| %s | %s | %s | %s | %s | %s | %s / %s | %s |\n' "$1" "$2" "$3" "$(cell "${4:-}")" "$(cell "${5:-}")" \
        "$(cell "${6:-}")" "$r" "$rc" "$8"
}

echo
echo "== gpupool beside Slurm: $(nproc) cores ($cpu), $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $commit (of this checkout; the binary is $BIN)"
echo "== gpupool: $version ($BIN); Slurm: $slurm_version; podman: $podman_version"
echo "== load average (1, 5, 15 min) at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== N=$N SLOTS=\"$SLOTS\" REPS=$REPS (medians) LAT_N=$LAT_N SLEEP_N=$SLEEP_N PODMAN_N=$PODMAN_N POLL_S=$POLL_S; run took ${total_s}s"
((slurm_ok)) || echo "== Slurm skipped: $slurm_why"
((podman_ok)) || echo "== podman skipped: $podman_why"
echo "== client: this script's own clock (gpupool: \`gpupool wait\` after the submissions, or \`submit --wait\`);"
echo "   coordinator: the coordinator's created_at -> finished_at. Ratio: times better than the peer (>1: gpupool ahead)."
echo
echo "| measure | slots | peer | peer figure | gpupool (client) | gpupool (coordinator) | ratio client / coordinator | target |"
echo "|---|---|---|---|---|---|---|---|"
for S in $SLOTS; do
    tgt_rate=$([ "$S" -le 2 ] && echo "≥ 20×" || echo "≥ 10×")
    row "$N × \`true\`, one array / sweep, completed jobs/s" "$S" Slurm "${R[slurm.array.$S]:-}" "${R[gp.array.$S]:-}" "${R[gpc.array.$S]:-}" rate "$tgt_rate"
    row "$N × \`true\`, one by one, completed jobs/s" "$S" Slurm "${R[slurm.single.$S]:-}" "${R[gp.single.$S]:-}" "${R[gpc.single.$S]:-}" rate "$tgt_rate"
    row "submit → done, median s (Slurm: sbatch + squeue)" "$S" Slurm "${R[slurm.lat50.$S]:-}" "${R[gp.lat50.$S]:-}" "${R[gpc.lat50.$S]:-}" time "gpupool < 0.050 s"
    row "submit → done, p95 s (Slurm: sbatch + squeue)" "$S" Slurm "${R[slurm.lat95.$S]:-}" "${R[gp.lat95.$S]:-}" "${R[gpc.lat95.$S]:-}" time ""
    row "submit → done, median s (Slurm: \`srun true\`)" "$S" "Slurm srun" "${R[srun.lat50.$S]:-}" "${R[gp.lat50.$S]:-}" "${R[gpc.lat50.$S]:-}" time ""
    if [ "$S" = "$SLEEP_SLOTS" ]; then
        row "$SLEEP_N × \`sleep 1\`, one array / sweep, completed jobs/s" "$S" Slurm "${R[slurm.sleep.$S]:-}" "${R[gp.sleep.$S]:-}" "${R[gpc.sleep.$S]:-}" rate ""
    fi
    if ((podman_ok)); then
        row "$PODMAN_N × podman \`true\`, array / sweep, s per job" "$S" "Slurm + podman run --rm" "${R[slurm.podman.$S]:-}" "${R[gp.podman.$S]:-}" "${R[gpc.podman.$S]:-}" time ""
        row "$PODMAN_N × podman \`true\`, s per job, vs the engine alone" "$S" "podman run --rm, $S at a time" "${R[engine.$S]:-}" "${R[gp.podman.$S]:-}" "${R[gpc.podman.$S]:-}" time "≥ 0.67× (within 1.5×)"
    fi
done
if [ -s "$tmp/notes" ]; then
    echo
    echo "Went wrong (the figures above include it):"
    cat "$tmp/notes"
fi
