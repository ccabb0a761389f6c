// Latency of scheduling decisions against a large view (the coordinator's hot path).
//
// The view is the trace's cluster loaded to `load` of its GPUs with trace pods (best fit), and a
// queue of `queued` trace pods; both are drawn with the seed. Measured: place() for single jobs
// (one decision: filters and scores over every worker), and one schedule() call over the whole
// queue. Wall-clock timing is the caller's concern: the functions take a clock callback so that
// this module stays free of clocks. Not thread-safe.
#pragma once

#include "core/sched/placement.hpp"
#include "core/sim/alloc_sim.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace gpupool::sim {

struct DecisionBenchOptions {
    sched::ScorerKind scorer = sched::ScorerKind::fgd;
    double load = 0.5;
    std::size_t queued = 10000;
    std::size_t samples = 1000;
    std::uint64_t seed = 0;
};

struct DecisionBenchResult {
    std::size_t workers = 0;
    std::int64_t gpus = 0;
    double loaded_pct = 0.0;
    std::vector<double> decision_s; // one place() per sample
    double schedule_s = 0.0;        // one schedule() over the queue
    std::size_t schedule_placed = 0;
    std::size_t queued = 0;
};

// `now_s` returns a monotonic time in seconds.
DecisionBenchResult run_decision_bench(const SimCluster& cluster, const std::vector<sched::JobRequest>& pods,
                                       const DecisionBenchOptions& options, const std::function<double()>& now_s);

} // namespace gpupool::sim
