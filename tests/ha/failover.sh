#!/usr/bin/env bash
# Two coordinators on one real PostgreSQL, a worker (process runtime) and a researcher submitting
# sweeps in a loop, all given both coordinators' URLs.
#   1. kill -9 the active coordinator mid-load: the standby takes over within TAKEOVER_LIMIT_S (10) s;
#      every acknowledged job is there once and succeeds; no two attempts of one job ever ran at the
#      same time; every job's log holds each of its lines exactly once; the ledger balances.
#   2. the killed coordinator is started again on its address and stands by; SIGSTOP the active one
#      for longer than its lease: the standby takes over; SIGCONT the old one: the database refuses
#      its writes (its lease renewal is fenced) and it steps down, answering as a standby that names
#      the new active one. A job submitted afterwards runs.
#
# Usage: failover.sh PATH/TO/gpupool (GPUPOOL_HA_TAKEOVER: the coordinators' --takeover-after, 2s;
# the 10 s limit holds for the default 6s too). Needs PostgreSQL 15's server (initdb, pg_ctl), jq and curl;
# without them it exits 77 (ctest: skipped) with the reason, or 1 when GPUPOOL_REQUIRE_POSTGRES=1.
# The database runs as an unprivileged user in a temp dir (tests/pg/pg_server.sh), stopped on exit.
set -uo pipefail

bin=$(realpath "${1:?usage: failover.sh PATH/TO/gpupool}")
here=$(cd "$(dirname "$0")" && pwd)
TAKEOVER_LIMIT_S=10
LINES=4

skip() {
    if [ "${GPUPOOL_REQUIRE_POSTGRES:-}" = 1 ]; then
        echo "failover: FAIL: $* (GPUPOOL_REQUIRE_POSTGRES=1: this test must run)" >&2
        exit 1
    fi
    echo "failover: SKIPPED: $*" >&2
    exit 77
}
for tool in jq curl; do
    command -v "$tool" > /dev/null || skip "\`$tool\` is not installed"
done
[ -x /usr/lib/postgresql/15/bin/initdb ] || skip "PostgreSQL 15's server is not installed (apt-get install postgresql)"

dir=$(mktemp -d /tmp/gpupool-ha.XXXXXX)
chmod 755 "$dir"
pids=()
failed=0
t0=$SECONDS

cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill -CONT "$pid" 2> /dev/null
        kill -9 "$pid" 2> /dev/null
        wait "$pid" 2> /dev/null
    done
    "$here/../pg/pg_server.sh" stop "$dir/pg" > /dev/null 2>&1
    if [ "$failed" -ne 0 ]; then
        for f in a-killed a b worker submit; do
            echo "---- $f (tail) ----" >&2
            tail -n 25 "$dir/$f.err" >&2 2> /dev/null
        done
    fi
    if [ -n "${GPUPOOL_HA_KEEP:-}" ]; then
        echo "failover: kept $dir (GPUPOOL_HA_KEEP)" >&2
    else
        rm -rf "$dir"
    fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    failed=1
    echo "failover: FAIL: $*" >&2
    exit 1
}
say() { printf 'failover: [%3ds] %s\n' "$((SECONDS - t0))" "$*"; }
eventually() { # eventually SECONDS COMMAND...: retries every 0.2 s until it succeeds or time is up
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
}

"$here/../pg/pg_server.sh" start "$dir/pg" > "$dir/pg.log" 2>&1 || { cat "$dir/pg.log" >&2; fail "PostgreSQL did not start"; }
db=$(cat "$dir/pg/url")

# start_coordinator NAME [PORT]: a coordinator on loopback (a free port by default); its URL in $dir/NAME.url.
start_coordinator() {
    rm -f "$dir/$1.port"
    "$bin" --log-level info coordinator --db "$db" --listen "127.0.0.1:${2:-0}" --port-file "$dir/$1.port" --tick-ms 50 \
        --lease 2m --takeover-after "${GPUPOOL_HA_TAKEOVER:-2s}" --admin-token-file "$dir/admin.token" > "$dir/$1.out" 2> "$dir/$1.err" < /dev/null &
    pids+=($!)
    eval "pid_$1=$!"
    eventually 20 test -s "$dir/$1.port" || fail "coordinator $1 did not start"
    echo "http://127.0.0.1:$(cat "$dir/$1.port")" > "$dir/$1.url"
}
health() { curl -s -o /dev/null -w '%{http_code}' "$(cat "$dir/$1.url")/v1/health"; }
serves() { [ "$(health "$1")" = 200 ]; }
standby_naming() { # standby_naming NAME ACTIVE: NAME answers 503 and names ACTIVE's URL
    local body
    body=$(curl -s "$(cat "$dir/$1.url")/v1/health")
    [ "$(jq -r .error <<< "$body")" = standby ] && [ "$(jq -r .active <<< "$body")" = "$(cat "$dir/$2.url")" ]
}

start_coordinator a
eventually 10 serves a || fail "the first coordinator does not serve"
start_coordinator b
eventually 10 standby_naming b a || fail "the second coordinator is not a standby naming the first"
say "a serves $(cat "$dir/a.url"); b stands by $(cat "$dir/b.url")"
grep -q "standing by" "$dir/b.err" || fail "b's log does not say it stands by"

urls="$(cat "$dir/a.url"),$(cat "$dir/b.url")"
admin=$(cat "$dir/admin.token")
as_admin() { "$bin" --url "$urls" --token "$admin" "$@"; }
as_admin admin team create fellows > /dev/null || fail "team fellows"
as_admin admin team create owners > /dev/null || fail "team owners"
member=$(as_admin admin token create --team fellows 2> /dev/null) || fail "member token"
as_admin admin grant fellows 1000 > /dev/null || fail "grant"
(umask 077 && as_admin admin enroll owners > "$dir/enroll.token" 2> /dev/null) || fail "enroll token"
as_member() { "$bin" --url "$urls" --token "$member" "$@"; }

"$bin" --log-level info --url "$urls" --token-file "$dir/enroll.token" worker --share --runtime process \
    --unsafe-process-runtime --work-dir "$dir/work" --heartbeat-ms 1000 --poll-wait-ms 1000 \
    > "$dir/worker.out" 2> "$dir/worker.err" < /dev/null &
pids+=($!)
eventually 20 grep -q "as worker" "$dir/worker.err" || fail "the worker did not register"

# The researcher: a sweep of three jobs, again and again; the ids of every acknowledged job go to
# acked.txt. Submissions that fail while no coordinator serves are not acknowledged (and may or may not exist).
sweep() {
    cat << EOF
format = 1
name = "ha-$1-{n}"
image = "localhost/gpupool/busybox:latest"
command = "for i in \$(seq 1 $LINES); do echo \"ha-$1-{n} line \$i\"; sleep 0.2; done"
[resources]
cpus = 0.1
memory = "64MiB"
max_runtime = "5m"
[sweep]
n = [1, 2, 3]
EOF
}
(
    i=0
    while [ ! -e "$dir/stop" ]; do
        i=$((i + 1))
        sweep "$i" > "$dir/sweep-$i.toml"
        if out=$(as_member --json submit "$dir/sweep-$i.toml" 2>> "$dir/submit.err"); then
            jq -r '.jobs[]' <<< "$out" >> "$dir/acked.txt"
        fi
        sleep 0.3
    done
) &
submitter=$!
pids+=($submitter)

acked_count() { [ -s "$dir/acked.txt" ] && wc -l < "$dir/acked.txt" || echo 0; }
enough_acked() { [ "$(acked_count)" -ge "$1" ]; }
eventually 30 enough_acked 12 || fail "the submissions are not acknowledged"
say "load running: $(acked_count) jobs acknowledged"

# ---- 1. kill -9 the active coordinator ----
kill -9 "$pid_a"
killed_at=$(date +%s%N)
eventually "$TAKEOVER_LIMIT_S" serves b || fail "the standby did not take over within ${TAKEOVER_LIMIT_S}s"
took_ms=$((($(date +%s%N) - killed_at) / 1000000))
say "killed a; b took over after ${took_ms} ms"
grep -q "took over the pool" "$dir/b.err" || fail "b's log does not say it took over"
before=$(acked_count)
eventually 30 enough_acked $((before + 9)) || fail "no submissions were acknowledged after the takeover"
touch "$dir/stop"
wait "$submitter"
say "load stopped: $(acked_count) jobs acknowledged in all"

b_url=$(cat "$dir/b.url")
as_member_b() { "$bin" --url "$b_url" --token "$member" "$@"; }
all_done() {
    local n
    n=$(as_member_b --json jobs --limit 0 | jq '[.jobs[] | select(.state != "succeeded")] | length') || return 1
    [ "$n" = 0 ]
}
eventually 120 all_done || fail "not every job succeeded: $(as_member_b jobs --limit 0 | grep -v succeeded | head)"
jobs_json=$(as_member_b --json jobs --limit 0)
listed=$(jq -r '.jobs[].id' <<< "$jobs_json" | sort -n)
[ "$(sort -n "$dir/acked.txt" | uniq -d | wc -l)" = 0 ] || fail "a job id was acknowledged twice"
missing=$(comm -23 <(sort "$dir/acked.txt") <(echo "$listed" | sort))
[ -z "$missing" ] || fail "acknowledged jobs missing after the takeover: $missing"
names=$(jq -r '.jobs[].name' <<< "$jobs_json")
[ "$(sort <<< "$names" | uniq -d | wc -l)" = 0 ] || fail "a submission was stored twice: $(sort <<< "$names" | uniq -d | head -3)"
say "every one of $(acked_count) acknowledged jobs is there once ($(wc -l <<< "$listed") jobs stored) and succeeded"

overlaps=0
bad_logs=0
for id in $listed; do
    view=$(as_member_b --json status "$id")
    # Attempts sorted by start: each must have ended before the next started.
    if ! jq -e '[.attempt_history[] | select(.started_at != null)] | sort_by(.started_at) |
            [range(1; length) as $i | .[$i - 1].ended_at != null and .[$i - 1].ended_at <= .[$i].started_at] | all' \
        <<< "$view" > /dev/null; then
        overlaps=$((overlaps + 1))
    fi
    name=$(jq -r .name <<< "$view")
    log=$(as_member_b logs "$id" 2> /dev/null)
    for i in $(seq 1 "$LINES"); do
        [ "$(grep -cx "$name line $i" <<< "$log")" = 1 ] || { bad_logs=$((bad_logs + 1)); break; }
    done
done
[ "$overlaps" = 0 ] || fail "$overlaps jobs had two attempts running at the same time"
[ "$bad_logs" = 0 ] || fail "$bad_logs jobs have a log without each of its lines exactly once"
metrics=$(curl -s -H "Authorization: Bearer $admin" "$b_url/metrics")
for gauge in gpupool_ledger_imbalance_credits gpupool_ledger_escrow_unaccounted_credits; do
    value=$(awk -v g="$gauge" '$1 == g {print $2}' <<< "$metrics")
    [ "$value" = 0 ] || fail "$gauge is '$value' after the takeover (the ledger does not balance)"
done
say "no overlapping attempts, every log whole, the ledger balanced"

# ---- 2. SIGSTOP the active one past its lease; SIGCONT: fenced, it steps down ----
mv "$dir/a.err" "$dir/a-killed.err"
start_coordinator a "$(cat "$dir/a.port")" # its machine came back: the same address, a new process
eventually 10 standby_naming a b || fail "the restarted coordinator is not a standby naming b"
kill -STOP "$pid_b"
stopped_at=$SECONDS
eventually "$TAKEOVER_LIMIT_S" serves a || fail "a did not take over from the stopped b"
say "b stopped; a took over after $((SECONDS - stopped_at))s"
sleep 1
kill -CONT "$pid_b"
eventually 10 grep -q "stepping down" "$dir/b.err" || fail "b did not step down after SIGCONT"
grep "stepping down" "$dir/b.err" | grep -qi "lease" || fail "b stepped down for another reason: $(grep 'stepping down' "$dir/b.err")"
eventually 10 standby_naming b a || fail "b does not answer as a standby naming a"
say "b woke up, was fenced: $(grep -o 'stepping down.*' "$dir/b.err" | head -1 | cut -c1-160)"

sweep final | sed 's/n = \[1, 2, 3\]/n = [1]/' > "$dir/final.toml"
final=$(as_member --json submit "$dir/final.toml" | jq -r '.jobs[0]') || fail "submit after the second takeover"
succeeded() { [ "$(as_member --json status "$final" | jq -r .state)" = succeeded ]; }
eventually 60 succeeded || fail "the job submitted after the second takeover did not succeed"
say "a job submitted afterwards ran on a: PASS"
