// The scheduler: a pure function of a snapshot. schedule(view, pending, policy, now) -> decisions.
//
// The coordinator loads a ClusterView (workers, running attempts, team usage), calls schedule(),
// commits the decisions in one transaction and then answers waiting workers; `gpupool sim` calls
// the same function. Nothing here reads a clock, a file, a database or a random device: time is
// `now`, randomness comes from `policy.seed` (same inputs and seed => same decisions).
//
// Per call: pending jobs are walked in order (ordering.hpp); each is placed (placement.hpp) on a
// private copy of the workers, so later jobs see earlier placements. A job that cannot be placed is
// reported with its outcome: `infeasible` (reject: bigger than every worker's total, with the
// reason) or `not_now` (stays queued, with a reason for `status`). A `high` job that is not-now may
// preempt (preemption.hpp): the decision lists the victims and the time they must stop by; the job
// itself is placed in a later call, once the victims have released their resources; while victims
// chosen for it are still stopping (RunningJob::stopping), it preempts nobody else. The first
// multi-GPU jobs that fit nowhere and preempt nobody hold a worker each (Policy::reservations).
// Thread safety: reentrant; the view is only read (schedule_in_place: see there).
#pragma once

#include "core/sched/admission.hpp"
#include "core/sched/cluster.hpp"
#include "core/sched/ordering.hpp"
#include "core/sched/placement.hpp"
#include "core/sched/preemption.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::sched {

struct Policy {
    PlacementPolicy placement;
    OrderingPolicy ordering;
    PreemptionPolicy preemption;
    std::uint64_t seed = 0;
    // Reservations per call: the first multi-GPU jobs in order that do not fit (and preempt nobody)
    // each hold the worker nearest to fitting them (the most whole free GPUs, then the most free GPU
    // share): nothing else is placed there in this call, so what frees up there accumulates until
    // the job fits, instead of going to smaller jobs behind it. Without it a multi-GPU job of the
    // team most entitled to the next GPUs waits until the queue drains, and that team falls below
    // its share. 3 is what kept every team within 10% of its share in `gpupool sim` at load 3 on 16
    // workers (docs/scheduler.md); 0: none (before issue #12).
    std::size_t reservations = 3;
};

struct PlacementDecision {
    JobId job;
    WorkerId worker;
    std::vector<std::uint32_t> gpus; // GPU indices on the worker
    std::int64_t gpu_milli = 0;      // on each of them
    std::int64_t cpu_milli = 0;
    std::int64_t memory_mib = 0;
};

// The victim must stop by `stop_by`; the caller then requeues it with submitted_at = the time it
// stopped (its age restarts, so aging cannot lift it above the job it made room for).
struct PreemptionDecision {
    JobId victim;
    AttemptId attempt;
    WorkerId worker;
    JobId for_job;
    std::int64_t stop_by = 0; // now + grace
    // The work stopping it throws away as of the decision (lost_gpu_seconds, preemption.hpp): what
    // the caller counts as preemption waste when it has no better figure.
    double lost_gpu_seconds = 0.0;
};

struct Decisions {
    std::vector<PlacementDecision> placements; // in the order they were decided
    std::vector<PreemptionDecision> preemptions;
    std::vector<WaitingJob> waiting; // every pending job not placed
};

// `policy` with the rules the pool had before issue #12, for before/after comparisons
// (`gpupool sim --old-policy`): priority classes first across the pool (OrderMode::class_first),
// the fewest victims (VictimChoice::fewest_victims), no cap on preemptions per job, low attempts of
// teams below their share not protected, no reservations.
Policy legacy_policy(Policy policy);

Decisions schedule(const ClusterView& view, const std::vector<JobRequest>& pending, const Policy& policy,
                   std::int64_t now);
// The same behind admission (admission.hpp): `queued` jobs first pass its filters; each placement
// then takes its hold from its payers' rooms, and one they cannot cover is not made.
Decisions schedule(const ClusterView& view, const std::vector<JobRequest>& queued, const Admission& admission,
                   const Policy& policy, std::int64_t now);
// The same, deciding on the view's own workers instead of a copy of them (a copy of 10,000 workers
// per pass costs the coordinator more than the pass's decisions): they change while it runs and are
// exactly as they were when it returns, or throws. Not reentrant for one view.
Decisions schedule_in_place(ClusterView& view, const std::vector<JobRequest>& queued, const Admission& admission,
                            const Policy& policy, std::int64_t now);

} // namespace gpupool::sched
