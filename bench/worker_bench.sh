#!/usr/bin/env bash
# The worker path end to end, through `gpupool run` (in-process coordinator + worker):
#   1. the demo sweep (6 jobs): median wall time of RUNS runs, process runtime and, when podman has
#      the test image, podman;
#   2. throughput: a sweep of N trivial jobs (default 200), jobs per second;
#   3. log latency: a job prints a nanosecond timestamp every 50 ms for 5 s; `gpupool run` streams
#      it live and each line is stamped when it reaches the terminal; median, p90 and max delay.
#
#   bench/worker_bench.sh [path/to/gpupool]      (make bench runs it with build/gpupool)
#   RUNS=5 N=200 bench/worker_bench.sh
set -euo pipefail

BIN=$(realpath "${1:-build/gpupool}")
RUNS=${RUNS:-5}
N=${N:-200}
cd "$(dirname "$0")/.."
repo=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
now_ms() { date +%s%3N; }

echo "== $("$BIN" version 2>/dev/null | head -1), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"

runtimes=(process)
if podman image exists localhost/gpupool/busybox:latest 2> /dev/null; then
    runtimes+=(podman)
fi
echo
echo "== 1. gpupool run recipes/hello-sweep/recipe.toml (6 jobs), median of $RUNS runs"
for rt in "${runtimes[@]}"; do
    times=()
    for i in $(seq 1 "$RUNS"); do
        t0=$(now_ms)
        (cd "$tmp" && "$BIN" run "$repo/recipes/hello-sweep/recipe.toml" --runtime "$rt" --force --data-dir "$tmp/state-$rt" \
            > /dev/null 2>&1)
        times+=($(($(now_ms) - t0)))
    done
    printf '%-8s median %6s ms   runs: %s\n' "$rt" "$(printf '%s\n' "${times[@]}" | median)" "${times[*]}"
done

echo
echo "== 2. throughput: a sweep of $N jobs running \`true\` (process runtime)"
values=$(seq -s ', ' 1 "$N")
cat > "$tmp/many.toml" <<EOF
format = 1
name = "n-{i}"
image = "localhost/gpupool/busybox:latest"
command = "true"
[resources]
cpus = 0.1
memory = "32MiB"
[sweep]
i = [$values]
EOF
t0=$(now_ms)
(cd "$tmp" && "$BIN" run "$tmp/many.toml" --runtime process --data-dir "$tmp/state-many" > "$tmp/many.out" 2>&1)
ms=$(($(now_ms) - t0))
ok=$(grep -c ' succeeded ' "$tmp/many.out" || true)
awk -v n="$N" -v ms="$ms" -v ok="$ok" 'BEGIN {printf "%d jobs (%d succeeded) in %.1f s: %.1f jobs/s\n", n, ok, ms/1000, n*1000/ms}'

echo
echo "== 3. log latency: printed -> on the researcher's terminal (gpupool run streams a single job live)"
cat > "$tmp/ticker.toml" <<'EOF'
format = 1
name = "ticker"
image = "localhost/gpupool/busybox:latest"
command = "i=0; while [ $i -lt 100 ]; do echo tick $(date +%s%N); i=$((i+1)); sleep 0.05; done"
[resources]
cpus = 0.1
memory = "32MiB"
EOF
(cd "$tmp" && "$BIN" run "$tmp/ticker.toml" --runtime process --data-dir "$tmp/state-ticker" 2> /dev/null) |
    while read -r word stamp; do
        if [ "$word" = tick ]; then echo $((($(date +%s%N) - stamp) / 1000000)); fi
    done > "$tmp/latency"
sort -n "$tmp/latency" | awk '{a[NR]=$1} END {
    if (NR == 0) { print "no lines arrived"; exit }
    printf "%d lines: median %d ms, p90 %d ms, max %d ms\n", NR, a[int((NR+1)/2)], a[int(NR*0.9+0.5)], a[NR] }'
