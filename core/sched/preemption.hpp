// Preemption: which running attempts a `high` job may stop when nothing else fits.
//
// Rules:
//  - Only a job submitted as `high` preempts, and only when it does not fit anywhere now.
//  - Victims are `low` attempts, or `normal` attempts of teams above their fair share
//    (FairShareSorter::above_fair_share). Never a `high` attempt. With `protect_below_share`
//    (default) a team below its fair share loses no `low` attempt to another team's job either:
//    otherwise the others' `high` jobs take back the GPUs fair share just gave it.
//  - Never an attempt that has run less than `min_runtime_s`, nor one already stopping, nor one
//    whose job was already preempted `max_per_job` times (RunningJob::preempted_before; 0 = no
//    cap): a job is not thrown back to the queue over and over.
//  - All victims are on ONE worker, and after they stop the job fits there (a share of one GPU,
//    or its whole GPUs, plus CPU and memory).
//  - `least_lost_work` (default): of the sets of up to `max_victims` among each worker's
//    `max_candidates` eligible attempts that lose the least, the one that throws away the least
//    work (lost_gpu_seconds: GPU share x run time since the start, or since the last checkpoint of
//    a job that checkpoints: the last one known, or the last whole `checkpoint_every_s` interval of
//    one that declared it); ties: fewer `normal` victims, then fewer victims.
//    `fewest_victims` (the rule before issue #12): the smallest set; among sets of equal size the
//    one with the fewest `normal` victims, then the least run time.
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

enum class VictimChoice : std::uint8_t { least_lost_work, fewest_victims };

struct PreemptionPolicy {
    bool enabled = true;
    std::int64_t min_runtime_s = 600;
    std::int64_t grace_s = 60;
    std::size_t max_victims = 4;    // larger sets are not searched
    std::size_t max_candidates = 8; // per worker, the cheapest first (low before normal for fewest_victims)
    std::int64_t max_per_job = 1;   // preemptions after which a job is not preempted again; 0 = no cap
    VictimChoice choice = VictimChoice::least_lost_work;
    bool protect_below_share = true;
};

// GPU-seconds of work that stopping `victim` at `now` throws away (rules above).
double lost_gpu_seconds(const RunningJob& victim, std::int64_t now);

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
