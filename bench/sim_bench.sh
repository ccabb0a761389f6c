#!/usr/bin/env bash
# The scheduler's benchmark: the FGD paper's full protocol on the Alibaba trace (10 seeds, every
# policy) printed next to the published figures, with wall times; then the no-sharing
# counterfactual, one time-driven run, and the latency of single decisions.
#
#   bench/sim_bench.sh [path/to/gpupool]      (make bench runs it with build/gpupool)
#   RUNS=3 bench/sim_bench.sh                 wall time of the 10-seed FGD run: median of RUNS
#   THREADS=2 bench/sim_bench.sh              threads for the seeds (default 2, as in CI)
set -euo pipefail

BIN=${1:-build/gpupool}
RUNS=${RUNS:-3}
THREADS=${THREADS:-2}
cd "$(dirname "$0")/.."

if [ ! -x "$BIN" ]; then
    echo "bench: $BIN not found; build first (make build)" >&2
    exit 1
fi

echo "== $("$BIN" version 2>/dev/null | head -1), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo
echo "== Published protocol: 10 seeds (0..9), tune 1.3, all policies, $THREADS thread(s)"
echo "\$ $BIN sim --policy all --seeds 10 --threads $THREADS"
"$BIN" sim --policy all --seeds 10 --threads "$THREADS"
echo
echo "== The same with ties broken by worker order (packing is sensitive to it)"
echo "\$ $BIN sim --policy all --seeds 10 --threads $THREADS --tie-break first"
"$BIN" sim --policy all --seeds 10 --threads "$THREADS" --tie-break first
echo
echo "== Wall time of the default policy, 10 seeds (median of $RUNS runs)"
times=()
for _ in $(seq "$RUNS"); do
    start=$(date +%s.%N)
    "$BIN" sim --policy fgd --seeds 10 --threads "$THREADS" > /dev/null
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc -l)")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "fgd, 10 seeds: runs %s s; median %.2f s\n", "'"${times[*]}"'", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
echo
echo "== No-sharing counterfactual (fractional requests rounded up to a whole GPU)"
echo "\$ $BIN sim --policy all --seeds 10 --threads $THREADS --no-sharing"
"$BIN" sim --policy all --seeds 10 --threads "$THREADS" --no-sharing
echo
echo "== Time-driven replay of the trace (arrivals and departures; the trace keeps this cluster lightly loaded), fgd"
echo "\$ $BIN sim --mode time --policy fgd"
"$BIN" sim --mode time --policy fgd
echo
echo "== Generated workload: 4 teams (weights 1 1 2 4), load 1.2, preemption on"
echo "\$ $BIN sim --mode time --generate --team-weights 1 1 2 4 --policy fgd"
"$BIN" sim --mode time --generate --team-weights 1 1 2 4 --policy fgd
echo
echo "== Sustained overload (load 3, 16 workers): the rules before issue #12, then today's (docs/scheduler.md)"
for rules in --old-policy ""; do
    echo "\$ $BIN sim --mode time --generate --team-weights 1 1 2 4 --jobs 4000 --workers 16 --load 3 $rules"
    "$BIN" sim --mode time --generate --team-weights 1 1 2 4 --jobs 4000 --workers 16 --load 3 $rules
done
echo
echo "== One decision against the 6,212-GPU cluster (half loaded) with 10,000 queued jobs"
for p in fgd bestfit; do
    echo "\$ $BIN sim --mode decision --policy $p"
    "$BIN" sim --mode decision --policy "$p"
done
