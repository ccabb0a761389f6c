// The time-driven simulation: jobs arrive and leave over time and schedule() (the same function the
// coordinator calls) decides at every event time, with ordering, fair share and preemption.
//
// Workloads: the trace (arrival = creation_time, run time = deletion_time - creation_time, at least
// 1 s; four teams assigned round-robin by pod; priority from the QoS class: Guaranteed -> high,
// LS and Burstable -> normal, BE -> low) or a generated one (`generate_workload`: Poisson arrivals per team,
// exponential run times, a mix of GPU shares, whole GPUs and CPU-only jobs, priorities drawn from
// a fixed mix; all from the seed). A preempted job goes back to the queue and restarts from zero,
// or, if it checkpoints (`checkpoint_interval_s`), from its last checkpoint; the run time it loses
// is reported as waste.
// Reported: queueing delay percentiles (p50/p90/p99 over started jobs), GPU utilisation (allocated /
// cluster) sampled at evenly spaced times and its time average, preemptions and the GPU-time they
// threw away, fairness under contention (fairness.hpp: each team's share of the GPUs while two or
// more teams had work queued, against its water-filled weighted share), and Jain's index over the
// teams' whole-run GPU-time divided by weight. Deterministic for a seed. Not thread-safe.
#pragma once

#include "core/sched/scheduler.hpp"
#include "core/sim/alloc_sim.hpp"
#include "core/sim/fairness.hpp"
#include "core/sim/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::sim {

struct TimedJob {
    sched::JobRequest request;   // submitted_at = arrival time
    std::int64_t duration_s = 0; // run time once started
    // > 0: it saves its progress every this many seconds of run time, and a preemption loses only
    // the run time since the last save (RunningJob::checkpoints). 0: it restarts from zero.
    std::int64_t checkpoint_interval_s = 0;
};

struct GenerateOptions {
    int teams = 4;
    std::int64_t jobs = 2000;
    int workers = 32;  // each with 8 GPUs, 96 CPUs, 768 GiB
    double load = 1.2; // offered GPU load / cluster GPUs
    double mean_runtime_s = 3600;
    std::uint64_t seed = 0;
    std::vector<double> team_weights; // empty = all 1
    // The fraction of jobs that checkpoint every `checkpoint_interval_s`. Drawn from a stream of
    // its own, so the rest of the workload is the same whatever the fraction.
    double checkpoint_fraction = 0.0;
    std::int64_t checkpoint_interval_s = 600;
};

// A generated cluster and workload.
struct GeneratedWorkload {
    SimCluster cluster;
    std::vector<TimedJob> jobs;
    std::vector<sched::TeamShare> teams;
};
GeneratedWorkload generate_workload(const GenerateOptions& options);

// The trace's pods as timed jobs (see above for teams and priorities).
std::vector<TimedJob> trace_jobs(const std::vector<TracePod>& pods, sched::ModelCatalog& models);

struct TimeSimOptions {
    sched::Policy policy;
    // The coordinator's admission rules, through the same schedule() entry point it calls. The
    // workloads here carry no credits and no sweep caps, so every job enters; a study of credit
    // rooms or max_parallel sets them here.
    sched::Admission admission{};
    int utilization_samples = 10;
    std::int64_t max_events = 0; // 0 = all
};

struct TeamResult {
    std::int64_t team = 0;
    double weight = 1.0;
    double gpu_seconds = 0.0;
    std::int64_t jobs_started = 0;
};

struct TimeSimResult {
    std::int64_t jobs = 0;
    std::int64_t started = 0;
    std::int64_t finished = 0;
    std::int64_t rejected = 0; // infeasible at submit
    std::int64_t preemptions = 0;
    std::int64_t preempted_jobs = 0; // distinct jobs preempted at least once
    std::int64_t most_preemptions_of_a_job = 0;
    double gpu_seconds = 0.0;      // GPU-time allocated over the run (work kept and work lost)
    double lost_gpu_seconds = 0.0; // GPU-time thrown away by preemption (run since the last checkpoint)
    double delay_p50_s = 0.0;
    double delay_p90_s = 0.0;
    double delay_p99_s = 0.0;
    double delay_p99_high_s = 0.0;                            // queueing delay of high-priority jobs
    double utilization_avg = 0.0;                             // time-averaged allocated GPU / cluster GPU
    std::vector<std::pair<std::int64_t, double>> utilization; // (time, allocated fraction)
    double jain_index = 1.0;                                  // over teams' GPU-seconds / weight
    ContendedResult contended;                                // fairness under contention (fairness.hpp)
    std::vector<TeamResult> teams;
    std::int64_t schedule_calls = 0;
    std::int64_t end_time = 0;
};

TimeSimResult run_time_sim(const SimCluster& cluster, const std::vector<TimedJob>& jobs,
                           const std::vector<sched::TeamShare>& teams, const TimeSimOptions& options);

// Jain's fairness index (sum x)^2 / (n sum x^2); 1 = perfectly even. Empty or all-zero -> 1.
double jain_index(const std::vector<double>& values);

} // namespace gpupool::sim
