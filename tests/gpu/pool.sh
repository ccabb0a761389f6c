# What tests/gpu/check.sh and tests/gpu/pack.sh share: stopping a process, the MPS pipes a worker
# named, a pool on loopback to run jobs through and its one process-runtime worker. Sourced, not run;
# the caller sets `bin` (the gpupool binary), `here` (this folder), `dir` (its temp folder) and `pids`
# (what its cleanup stops); `worker_pid` is the worker start_worker started.
# shellcheck shell=bash disable=SC2154,SC2034 # bin, here, dir are the caller's; pool_error is for it

stop_pid() { # stop_pid PID: SIGTERM, again after 10 s (a draining worker then stops its jobs), SIGKILL after 20 s
    local pid=$1 i
    kill -TERM "$pid" 2> /dev/null || return 0
    for i in $(seq 1 100); do
        kill -0 "$pid" 2> /dev/null || break
        [ "$i" = 50 ] && kill -TERM "$pid" 2> /dev/null
        sleep 0.2
    done
    kill -KILL "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
}

mps_pipes() { # the pipe directories the worker's MPS daemons said they use (a root worker's are in /run)
    grep -ho -e 'pipes in /[^ ]*' -e 'answering on /[^ ]*' "$dir/worker.err" 2> /dev/null | awk '{print $NF}' | sort -u
}

# stop_pool JOB_SCRIPT: every process in `pids`, what a killed worker left (the jobs running
# JOB_SCRIPT), and an MPS daemon on each pipe directory the worker named.
stop_pool() {
    local pid pipe
    for pid in "${pids[@]}"; do
        stop_pid "$pid"
    done
    pkill -KILL -f "$1" 2> /dev/null
    command -v nvidia-cuda-mps-control > /dev/null || return 0
    for pipe in $(mps_pipes); do
        [ -d "$pipe" ] || continue
        echo quit | CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_LOG_DIRECTORY="$dir/work/mps/log" \
            timeout 10 nvidia-cuda-mps-control > /dev/null 2>&1
    done
}

as_admin() { "$bin" --url "$url" --token-file "$dir/admin.token" "$@"; }
as_member() { "$bin" --url "$url" --token-file "$dir/member.token" "$@"; }
judge() { python3 "$here/judge.py" "$@"; }

# start_pool: a coordinator on loopback (SQLite in $dir, credits recorded), the team `researchers`
# with credits and a member token ($dir/member.token), the team `owners` with an enrollment token
# ($dir/enroll.token); sets `url` and exports what judge.py reads. On failure it returns 1 with the
# reason in `pool_error`.
start_pool() {
    local i
    pool_error=
    "$bin" --log-level info coordinator --db "$dir/pool.db" --listen 127.0.0.1:0 --port-file "$dir/port" \
        --tick-ms 100 --lease 2m --credits record --admin-token-file "$dir/admin.token" \
        > "$dir/coordinator.out" 2> "$dir/coordinator.err" < /dev/null &
    pids+=($!)
    for i in $(seq 100); do
        [ -s "$dir/port" ] && [ -s "$dir/admin.token" ] && break
        sleep 0.2
    done
    if [ ! -s "$dir/port" ] || [ ! -s "$dir/admin.token" ]; then
        pool_error="the coordinator did not start: $(tail -n 3 "$dir/coordinator.err")"
        return 1
    fi
    url="http://127.0.0.1:$(cat "$dir/port")"
    export GPUPOOL_BIN="$bin" GPUPOOL_URL="$url" GPUPOOL_ADMIN_TOKEN_FILE="$dir/admin.token" \
        GPUPOOL_MEMBER_TOKEN_FILE="$dir/member.token"
    if ! {
        as_admin admin team create researchers && as_admin admin team create owners &&
            as_admin admin grant researchers 100000 &&
            (umask 077 && as_admin admin token create --team researchers > "$dir/member.token") &&
            (umask 077 && as_admin admin enroll owners > "$dir/enroll.token")
    } > /dev/null 2>> "$dir/setup.err"; then
        pool_error="setting up the pool: $(tail -n 3 "$dir/setup.err")"
        return 1
    fi
}

# start_worker [FLAG...]: a process-runtime worker on $dir/work with the enrollment token; returns
# once it shares (one more "sharing with" line than before), or 1 when it exited or did not join
# within 30 s.
start_worker() {
    local before _
    before=$(grep -c "sharing with" "$dir/worker.err" 2> /dev/null)
    "$bin" --log-level info --url "$url" --token-file "$dir/enroll.token" worker --share --runtime process \
        --unsafe-process-runtime --work-dir "$dir/work" --heartbeat-ms 1000 --poll-wait-ms 1000 --drain-grace 5s \
        "$@" >> "$dir/worker.out" 2>> "$dir/worker.err" < /dev/null &
    worker_pid=$!
    pids+=("$worker_pid")
    for _ in $(seq 150); do
        [ "$(grep -c "sharing with" "$dir/worker.err" 2> /dev/null)" -gt "${before:-0}" ] && return 0
        kill -0 "$worker_pid" 2> /dev/null || break
        sleep 0.2
    done
    return 1
}

stop_worker() {
    stop_pid "$worker_pid"
    local keep=() pid
    for pid in "${pids[@]}"; do
        [ "$pid" = "$worker_pid" ] || keep+=("$pid")
    done
    pids=("${keep[@]}")
}
