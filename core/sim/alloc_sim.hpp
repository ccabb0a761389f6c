// The FGD paper's allocation experiment ("arrivals only"), run with gpupool's placement code.
//
// Protocol (../shared/data/README.md): pods sorted by name, shuffled with the seed; random pods from
// the same list appended until the requested GPU reaches tune_ratio (1.3) x the cluster's GPUs;
// each pod placed in turn on one node by the policy's filters and scorer (a pod that fits nowhere
// is skipped); after each pod, arrived and allocated GPU are updated. Reported: allocated / cluster
// GPU when arrived / cluster GPU first reaches 50, 60, ..., 130 %, unallocated GPUs at 130 %, and
// the cluster's fragmentation (fragmentation.hpp, target workload = the trace's typical pods) at
// 100 %, averaged over seeds.
//
// Speed: the FGD score of a (node, task type) pair depends only on the node's CPU and GPU state, so
// it is cached per node and task type and recomputed only after that node changes; each placement
// changes one node. Seeds run in parallel on `threads` threads; each run owns its state, so results
// do not depend on the thread count. Deterministic for a given seed.
#pragma once

#include "core/sched/cluster.hpp"
#include "core/sched/fragmentation.hpp"
#include "core/sched/placement.hpp"
#include "core/sim/trace.hpp"

#include <cstdint>
#include <vector>

namespace gpupool::sim {

struct SimCluster {
    sched::ModelCatalog models;
    std::vector<sched::Worker> workers;
    std::int64_t total_gpu_milli = 0;
};

// GPU memory per model for requests sized in memory (the trace's own pods use milli-GPU).
std::int64_t model_memory_mib(const std::string& model);

SimCluster build_cluster(const std::vector<TraceNode>& nodes);

// Pods as scheduler requests (ids are the pods' positions). `no_sharing` rounds every fractional
// GPU request up to a whole GPU (the counterfactual of a pool without GPU sharing).
std::vector<sched::JobRequest> to_requests(const std::vector<TracePod>& pods, sched::ModelCatalog& models,
                                           bool no_sharing);

inline const std::vector<int> k_checkpoints{50, 60, 70, 80, 90, 100, 110, 120, 130};

struct AllocOptions {
    sched::ScorerKind scorer = sched::ScorerKind::fgd;
    int seeds = 10;
    std::uint64_t first_seed = 0;
    double tune_ratio = 1.3;
    int popularity_pct = sched::k_default_popularity_pct;
    unsigned threads = 1;
    sched::TieBreak tie_break = sched::TieBreak::random;
};

struct AllocRun {
    std::uint64_t seed = 0;
    std::vector<double> alloc_pct; // at k_checkpoints
    double unallocated_gpus_at_130 = 0.0;
    double frag_pct_at_100 = 0.0;
    std::int64_t pods = 0; // after tuning
    std::int64_t unplaced = 0;
};

struct AllocSummary {
    sched::ScorerKind scorer = sched::ScorerKind::fgd;
    std::vector<double> alloc_pct; // means at k_checkpoints
    double sd_at_130 = 0.0;        // sample standard deviation over seeds
    double unallocated_gpus_at_130 = 0.0;
    double frag_pct_at_100 = 0.0;
    std::vector<AllocRun> runs;
};

// One seed. `pods` must be sorted by name; `workload` is the FGD target workload.
AllocRun run_alloc_seed(const SimCluster& cluster, const std::vector<sched::JobRequest>& pods,
                        const sched::Workload& workload, sched::ScorerKind scorer, std::uint64_t seed,
                        double tune_ratio, sched::TieBreak tie_break = sched::TieBreak::random);

// Seeds first_seed .. first_seed + seeds - 1; the workload is typical_workload(pods).
AllocSummary run_alloc(const SimCluster& cluster, const std::vector<sched::JobRequest>& pods,
                       const AllocOptions& options);

} // namespace gpupool::sim
