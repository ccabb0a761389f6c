#!/usr/bin/env bash
# A worker behind a real NAT: the coordinator in network namespace C, the worker in namespace W
# behind router namespace R, which masquerades W's private subnet on its outward link (nftables).
# C has no route to W's subnet. The worker enrolls, runs a three-job sweep (process runtime), streams
# logs and uploads outputs through R; mid-job R drops the answers from C for 5 s, then all forwarded
# traffic for PARTITION_S (30) seconds.
# Afterwards every job has succeeded once (one attempt, one charge), and its log is exactly the lines
# it wrote (compared with its output file, which came back too): nothing missing, nothing twice.
# No connection ever opens towards the worker: nft counters of `ct state new` packets entering R
# from C's side, leaving C, and entering W (loopback aside) stay 0, while the worker's own new
# connections count up; R's conntrack entries all originate from W's private address.
#
# Usage: nat_test.sh PATH/TO/gpupool. Needs root, `ip netns`, nft, conntrack and jq. Without them it
# exits 77 (ctest: skipped) with the reason, or 1 when GPUPOOL_REQUIRE_CONTAINERS=1 (CI as root).
# Everything it creates (namespaces, their veths, addresses 10.213.x.y inside them, a temp dir,
# the processes) is removed on exit, failure included.
set -uo pipefail

bin=${1:?usage: nat_test.sh PATH/TO/gpupool}
bin=$(realpath "$bin")
PARTITION_S=${GPUPOOL_NAT_PARTITION_S:-30}
ONEWAY_S=5
LINES=30          # per job, one every 0.5 s: a job runs 15-20 s, so it ends while R drops everything
JOBS=3

skip() {
    if [ "${GPUPOOL_REQUIRE_CONTAINERS:-}" = 1 ]; then
        echo "nat_test: FAIL: $* (GPUPOOL_REQUIRE_CONTAINERS=1: this test must run)" >&2
        exit 1
    fi
    echo "nat_test: SKIPPED: $*" >&2
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "not root: network namespaces need root"
for tool in ip nft conntrack jq; do
    command -v "$tool" > /dev/null || skip "\`$tool\` is not installed (.ci/packages.txt lists it: make deps)"
done

ns_c=gpn$$-c ns_r=gpn$$-r ns_w=gpn$$-w
dir=$(mktemp -d /tmp/gpupool-nat.XXXXXX)
pids=()
failed=0
t0=$SECONDS

cleanup() {
    local pid ns
    for pid in "${pids[@]}"; do
        kill -9 "$pid" 2> /dev/null
        wait "$pid" 2> /dev/null
    done
    for ns in "$ns_w" "$ns_r" "$ns_c"; do
        # Whatever still runs in a namespace we made was started by us (the jobs of the worker).
        for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
        ip netns del "$ns" 2> /dev/null # its veths go with it
    done
    if [ "$failed" -ne 0 ]; then
        echo "---- coordinator stderr (tail) ----" >&2
        tail -n 30 "$dir/coord.err" >&2 2> /dev/null
        echo "---- worker stderr (tail) ----" >&2
        tail -n 40 "$dir/worker.err" >&2 2> /dev/null
    fi
    if [ -n "${GPUPOOL_NAT_KEEP:-}" ]; then
        echo "nat_test: kept $dir (GPUPOOL_NAT_KEEP)" >&2
    else
        rm -rf "$dir"
    fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    failed=1
    echo "nat_test: FAIL: $*" >&2
    exit 1
}
check() { # check DESCRIPTION COMMAND...: runs the command, fails the test with the description if it fails
    local what=$1
    shift
    "$@" || fail "$what"
}
in_c() { ip netns exec "$ns_c" "$@"; }
in_r() { ip netns exec "$ns_r" "$@"; }
in_w() { ip netns exec "$ns_w" "$@"; }
# eventually SECONDS COMMAND...: retries the command every 0.2 s until it succeeds or time is up.
eventually() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
}
say() { printf 'nat_test: [%3ds] %s\n' "$((SECONDS - t0))" "$*"; }

# Namespaces an earlier run left behind when it was killed before its trap ran (ctest's timeout
# kills with SIGKILL): ours are named gpn<pid>-c|r|w; those whose test process is gone go.
for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E '^gpn[0-9]+-[crw]$'); do
    owner=${ns#gpn}
    owner=${owner%-*}
    if ! kill -0 "$owner" 2> /dev/null; then
        for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
        ip netns del "$ns" 2> /dev/null && echo "nat_test: removed $ns, left by an earlier run" >&2
    fi
done

# ---- the network: C (10.213.1.1) -- (10.213.1.2) R (10.213.2.1) -- (10.213.2.2) W ----
ip netns add "$ns_c" 2> /dev/null || skip "\`ip netns add\` does not work here"
ip netns add "$ns_r" || fail "ip netns add $ns_r"
ip netns add "$ns_w" || fail "ip netns add $ns_w"
# The veths are made inside the namespaces: nothing appears in the host's namespace.
check "veth C-R" ip link add c-pub netns "$ns_c" type veth peer name r-pub netns "$ns_r"
check "veth R-W" ip link add r-priv netns "$ns_r" type veth peer name w-priv netns "$ns_w"
check "address C" in_c ip addr add 10.213.1.1/24 dev c-pub
check "address R outward" in_r ip addr add 10.213.1.2/24 dev r-pub
check "address R inward" in_r ip addr add 10.213.2.1/24 dev r-priv
check "address W" in_w ip addr add 10.213.2.2/24 dev w-priv
for ns in "$ns_c" "$ns_r" "$ns_w"; do
    check "lo up in $ns" ip -n "$ns" link set lo up
done
check "links up" in_c ip link set c-pub up
check "links up" in_r ip link set r-pub up
check "links up" in_r ip link set r-priv up
check "links up" in_w ip link set w-priv up
check "W's default route via R" in_w ip route add default via 10.213.2.1
check "R forwards" in_r sysctl -qw net.ipv4.ip_forward=1

in_r nft -f - << 'EOF' || fail "R's nftables ruleset"
table inet gpt {
    counter from_c_new {}
    counter from_c_to_private {}
    counter from_c_invalid {}
    counter from_w_new {}
    counter partition_dropped {}
    counter oneway_dropped {}
    chain pre {
        type filter hook prerouting priority -150; policy accept;
        iifname "r-pub" ct state new counter name "from_c_new"
        iifname "r-pub" ip daddr 10.213.2.0/24 counter name "from_c_to_private"
        iifname "r-pub" ct state invalid counter name "from_c_invalid"
        iifname "r-priv" ct state new counter name "from_w_new"
    }
    chain forwarding {
        type filter hook forward priority 0; policy accept;
    }
}
table ip gpt_nat {
    chain post {
        type nat hook postrouting priority 100; policy accept;
        oifname "r-pub" ip saddr 10.213.2.0/24 counter masquerade
    }
}
EOF
# Without "loose" pickup a mid-stream TCP packet with no conntrack entry is `invalid`, not `new`:
# `ct state new` from C's side then means only what opens a connection (SYN, or any UDP/ICMP).
check "R: strict TCP tracking" in_r sysctl -qw net.netfilter.nf_conntrack_tcp_loose=0
in_c nft -f - << 'EOF' || fail "C's nftables ruleset"
table inet gpt {
    counter out_new {}
    chain outbound {
        type filter hook output priority -150; policy accept;
        oifname != "lo" ct state new counter name "out_new"
    }
}
EOF
in_w nft -f - << 'EOF' || fail "W's nftables ruleset"
table inet gpt {
    counter in_new {}
    counter out_new {}
    chain inbound {
        type filter hook input priority -150; policy accept;
        iifname != "lo" ct state new counter name "in_new"
    }
    chain outbound {
        type filter hook output priority -150; policy accept;
        oifname != "lo" ct state new counter name "out_new"
    }
}
EOF
counter() { # counter NS-RUNNER NAME -> packets
    "$1" nft -j list counter inet gpt "$2" | jq -e '.nftables[] | select(.counter) | .counter.packets'
}
# C cannot reach W's private subnet: no route, and W is reachable only through R's masquerade.
check "C must have no route to W's subnet" bash -c "! ip netns exec $ns_c ip route get 10.213.2.2 > /dev/null 2>&1"

# ---- the pool: coordinator in C; admin and researcher commands from C; the worker in W ----
url_file=$dir/port
ip netns exec "$ns_c" "$bin" coordinator --listen 10.213.1.1:0 --db "$dir/pool.db" --port-file "$url_file" --tick-ms 50 \
    --lease 2m > "$dir/coord.out" 2> "$dir/coord.err" < /dev/null &
pids+=($!)
eventually 15 test -s "$url_file" || fail "the coordinator did not start"
url=http://10.213.1.1:$(cat "$url_file")
admin=$(grep -o 'gpp_[0-9a-f]*' "$dir/coord.out" | head -n 1)
[ -n "$admin" ] || fail "no admin token in the coordinator's output"
as_admin() { in_c "$bin" --url "$url" --token "$admin" "$@"; }
check "team fellows" as_admin admin team create fellows > /dev/null
check "team owners" as_admin admin team create owners > /dev/null
member=$(as_admin admin token create --team fellows 2> /dev/null) || fail "member token"
check "grant" as_admin admin grant fellows 100 > /dev/null
(umask 077 && as_admin admin enroll owners > "$dir/enroll.token" 2> /dev/null) || fail "enroll token"
as_member() { in_c "$bin" --url "$url" --token "$member" "$@"; }

# Heartbeats every 3 s and log chunks every 0.5 s: the request the one-way drop catches in flight
# is most often a log upload, which the coordinator applies and the worker must send again.
ip netns exec "$ns_w" "$bin" --log-level info --url "$url" --token-file "$dir/enroll.token" worker --share --runtime process \
    --unsafe-process-runtime --work-dir "$dir/work" --heartbeat-ms 3000 --poll-wait-ms 1000 \
    > "$dir/worker.out" 2> "$dir/worker.err" < /dev/null &
pids+=($!)
eventually 20 grep -q "sharing with $url as worker" "$dir/worker.err" || fail "the worker did not register"
say "worker registered from behind R"

pad=$(printf '%0100d' 0) # longer lines: several KiB of log per job
cat > "$dir/sweep.toml" << EOF
format = 1
name = "nat-{n}"
image = "localhost/gpupool/busybox:latest"
command = "i=1; while [ \$i -le $LINES ]; do echo \"job {n} line \$i $pad\" | tee -a \"\$GPUPOOL_OUTPUT_DIR/lines.txt\"; i=\$((i+1)); sleep 0.5; done"
[resources]
cpus = 0.1
memory = "64MiB"
max_runtime = "5m"
[outputs]
paths = ["lines.txt"]
[sweep]
n = [$(seq -s ', ' 1 "$JOBS")]
EOF
submitted=$(as_member --json submit "$dir/sweep.toml") || fail "submit"
mapfile -t ids < <(jq -r '.jobs[]' <<< "$submitted")
[ "${#ids[@]}" -eq "$JOBS" ] || fail "expected $JOBS job ids, got: $submitted"

job_field() { as_member --json status "$1" | jq -r "$2"; }
log_lines() { as_member logs "$1" 2> /dev/null | grep -c "line"; }
streaming() { # each job runs and at least 3 of its lines crossed R already
    local id
    for id in "${ids[@]}"; do
        [ "$(job_field "$id" .state)" = running ] && [ "$(log_lines "$id")" -ge 3 ] || return 1
    done
}
eventually 30 streaming || fail "the jobs' logs did not stream through the NAT"
say "jobs ${ids[*]} running, their logs streaming through R"

# ---- the partition ----
# First ONEWAY_S seconds one way only: R drops what comes from C's side, so requests already on an
# open connection reach the coordinator but their answers are lost (the worker must send again what
# the coordinator already has). Then PARTITION_S seconds of nothing at all.
oneway=$(in_r nft --echo --handle add rule inet gpt forwarding iifname r-pub counter name oneway_dropped drop |
    grep -o 'handle [0-9]*' | awk '{print $2}')
[ -n "$oneway" ] || fail "could not add the one-way drop rule"
say "one way: R drops what C sends towards W for ${ONEWAY_S}s"
sleep "$ONEWAY_S"
handle=$(in_r nft --echo --handle add rule inet gpt forwarding counter name partition_dropped drop |
    grep -o 'handle [0-9]*' | awk '{print $2}')
[ -n "$handle" ] || fail "could not add the drop rule"
check "remove the one-way rule" in_r nft delete rule inet gpt forwarding handle "$oneway"
part_start=$SECONDS
say "partition: R drops all forwarded traffic for ${PARTITION_S}s"
# What the coordinator has once the requests already past R have landed (their replies are dropped).
sleep 1
before=()
for id in "${ids[@]}"; do before+=("$(as_member logs "$id" | wc -c)"); done
sleep $((PARTITION_S - 3))
# Meanwhile the coordinator heard nothing (the logs did not grow) and the worker finished the jobs.
for i in "${!ids[@]}"; do
    now=$(as_member logs "${ids[$i]}" | wc -c)
    [ "$now" -eq "${before[$i]}" ] || fail "job ${ids[$i]}'s log grew during the partition ($now vs ${before[$i]} bytes)"
    [ "$(job_field "${ids[$i]}" .state)" = running ] || fail "job ${ids[$i]} left running during the partition"
done
ended=$(grep -c "ended after .*exited with status 0" "$dir/worker.err")
[ "$ended" -eq "$JOBS" ] || fail "the worker should have finished all $JOBS jobs during the partition, it says $ended"
left=$((PARTITION_S - (SECONDS - part_start)))
[ "$left" -le 0 ] || sleep "$left"
check "remove the drop rule" in_r nft delete rule inet gpt forwarding handle "$handle"
part_end=$SECONDS
dropped=$(counter in_r partition_dropped)
say "partition over: $dropped packets dropped ($(counter in_r oneway_dropped) one way before);" \
    "$ended jobs ended meanwhile (spooled on W)"
[ "$dropped" -gt 0 ] || fail "the partition dropped nothing"

all_succeeded() {
    local id
    for id in "${ids[@]}"; do [ "$(job_field "$id" .state)" = succeeded ] || return 1; done
}
eventually 90 all_succeeded || fail "not every job succeeded after the partition"
say "all jobs succeeded, $((SECONDS - part_end))s after the partition ended"
# Log uploads the coordinator applied but whose answers R dropped: the worker timed out at offset N
# while the coordinator already had more; it sent those bytes again (the logs below hold them once).
lost=""
while read -r attempt offset; do
    for i in "${!ids[@]}"; do
        if [ "$(job_field "${ids[$i]}" '.attempt_history[0].id')" = "$attempt" ] && [ "${before[$i]}" -gt "$offset" ]; then
            lost+=" attempt $attempt from byte $offset (the coordinator had ${before[$i]});"
        fi
    done
done < <(grep -o 'during log upload (no answer from [^ ]*/v1/attempts/[0-9]*/logs?offset=[0-9]*' "$dir/worker.err" |
    sed -E 's|.*/attempts/([0-9]+)/logs\?offset=([0-9]+)|\1 \2|')
say "log uploads applied whose answers were lost, sent again:${lost:- none this run}"

# ---- exactly once: logs, outputs, attempts, charges ----
credits=$(as_member --json credits --limit 200) || fail "credits"
for id in "${ids[@]}"; do
    name=$(job_field "$id" .name)
    n=${name#nat-}
    expected=$(for i in $(seq 1 "$LINES"); do echo "job $n line $i $pad"; done)
    as_member logs "$id" > "$dir/log-$id" || fail "logs $id"
    [ "$(cat "$dir/log-$id")" = "$expected" ] ||
        fail "job $id's log is not exactly its $LINES lines: $(diff <(echo "$expected") "$dir/log-$id" | head -n 5)"
    # Exactly: the newline count too (the comparison above drops trailing newlines).
    [ "$(wc -l < "$dir/log-$id")" -eq "$LINES" ] || fail "job $id's log has $(wc -l < "$dir/log-$id") lines"
    check "fetch $id" as_member fetch "$id" "$dir/fetched" > /dev/null
    cmp -s "$dir/log-$id" "$dir/fetched/$name/lines.txt" || fail "job $id's output file differs from its log"
    [ "$(job_field "$id" .attempts)" = 1 ] || fail "job $id ran $(job_field "$id" .attempts) attempts, expected 1"
    [ "$(job_field "$id" '[.attempt_history[].state] | join(",")')" = succeeded ] || fail "job $id's attempts"
    charges=$(jq "[.movements[] | select(.job == $id and .reason == \"charge\")] | length" <<< "$credits")
    refunds=$(jq "[.movements[] | select(.job == $id and .reason == \"refund\")] | length" <<< "$credits")
    [ "$charges" -eq 1 ] && [ "$refunds" -eq 0 ] || fail "job $id: $charges charges and $refunds refunds, expected 1 and 0"
done
say "each job: one attempt, one charge, its $LINES lines exactly once in its log and its output file"

# ---- nobody opened a connection towards the worker ----
from_c_new=$(counter in_r from_c_new)
from_c_private=$(counter in_r from_c_to_private)
from_c_invalid=$(counter in_r from_c_invalid)
from_w_new=$(counter in_r from_w_new)
c_out_new=$(counter in_c out_new)
w_in_new=$(counter in_w in_new)
w_out_new=$(counter in_w out_new)
say "new connections: W->C $w_out_new (seen at R: $from_w_new); C->anything $c_out_new, at R from C $from_c_new," \
    "to W's subnet $from_c_private, into W $w_in_new (invalid from C: $from_c_invalid)"
[ "$from_c_new" -eq 0 ] || fail "R saw $from_c_new new connection packets from C's side"
[ "$from_c_private" -eq 0 ] || fail "R saw $from_c_private packets from C addressed to W's private subnet"
[ "$c_out_new" -eq 0 ] || fail "C opened $c_out_new connections outward"
[ "$w_in_new" -eq 0 ] || fail "W received $w_in_new new connection packets"
[ "$from_w_new" -gt 0 ] && [ "$w_out_new" -gt 0 ] || fail "the counters saw no connection from W at all"
in_r conntrack -L > "$dir/conntrack" 2> /dev/null || fail "conntrack -L in R"
entries=$(grep -c . "$dir/conntrack")
[ "$entries" -gt 0 ] || fail "R's conntrack table is empty"
foreign=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^src=/) { if ($i != "src=10.213.2.2") print; break } }' \
    "$dir/conntrack" | wc -l)
[ "$foreign" -eq 0 ] || fail "R's conntrack has $foreign entries not opened by W: $(head -n 3 "$dir/conntrack")"
grep -q "dst=10.213.1.2 " "$dir/conntrack" || fail "R's conntrack shows no masqueraded reply (dst=10.213.1.2)"
say "R's conntrack: $entries entries, all opened by W (10.213.2.2), replies to R's outward address"
say "PASS in $((SECONDS - t0))s"
