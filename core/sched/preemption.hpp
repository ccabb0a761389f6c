// Preemption: which running attempts a `high` job may stop when nothing else fits.
//
// Rules:
//  - Only a job submitted as `high` preempts, and only when it does not fit anywhere now.
//  - Victims are `low` attempts, or `normal` attempts of teams above their fair share
//    (FairShareSorter::above_fair_share). Never a `high` attempt.
//  - Never an attempt that has run less than `min_runtime_s`, nor one already stopping.
//  - All victims are on ONE worker, and after they stop the job fits there (a share of one GPU,
//    or its whole GPUs, plus CPU and memory). The set is the smallest over all workers; among sets
//    of equal size the one losing the least run time wins (low before normal).
//  - Victims get `grace_s` to checkpoint and exit; they go back to the queue (the caller requeues).
// Pure functions.
#pragma once

#include "core/sched/cluster.hpp"
#include "core/sched/ordering.hpp"
#include "core/sched/placement.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace gpupool::sched {

struct PreemptionPolicy {
    bool enabled = true;
    std::int64_t min_runtime_s = 600;
    std::int64_t grace_s = 60;
    std::size_t max_victims = 4;    // larger sets are not searched
    std::size_t max_candidates = 8; // per worker, youngest first
};

bool preemptible(const RunningJob& victim, const JobRequest& preemptor, const FairShareSorter& shares, std::int64_t now,
                 const PreemptionPolicy& policy);

struct VictimSet {
    std::size_t worker = 0;           // index into workers
    std::vector<std::size_t> victims; // indices into running
};

// The smallest victim set, or nothing. `taken[i]` marks running[i] as already chosen as a victim in
// this round (it cannot be chosen twice); its size must equal running.size() or be empty.
std::optional<VictimSet> find_victims(const std::vector<Worker>& workers, const std::vector<RunningJob>& running,
                                      const JobRequest& job, const FairShareSorter& shares, std::int64_t now,
                                      const PreemptionPolicy& policy, const OwnerPolicy& owner,
                                      const std::vector<bool>& taken = {});

} // namespace gpupool::sched
