#include "core/sim/decision_bench.hpp"

#include "core/sched/rng.hpp"
#include "core/sched/scheduler.hpp"

namespace gpupool::sim {

DecisionBenchResult run_decision_bench(const SimCluster& cluster, const std::vector<sched::JobRequest>& pods,
                                       const DecisionBenchOptions& options, const std::function<double()>& now_s) {
    DecisionBenchResult r;
    sched::ClusterView view;
    view.models = cluster.models;
    view.workers = cluster.workers;
    r.workers = view.workers.size();
    r.gpus = cluster.total_gpu_milli / sched::k_milli_per_gpu;
    if (pods.empty()) {
        return r;
    }
    sched::Rng rng(options.seed);
    sched::PlacementPolicy fill;
    fill.scorer = sched::ScorerKind::bestfit;
    const sched::ScoreScale scale = sched::scale_of(view.workers);
    std::int64_t allocated = 0;
    const auto target = static_cast<std::int64_t>(options.load * static_cast<double>(cluster.total_gpu_milli));
    for (std::size_t tries = 0; allocated < target && tries < 100000; ++tries) {
        const sched::JobRequest& job = pods[static_cast<std::size_t>(rng.uniform(pods.size()))];
        sched::Placement p = sched::place(view.workers, view.models, job, fill, scale, rng);
        if (p.outcome == sched::PlaceOutcome::placed) {
            sched::take(view.workers[p.worker], job, p.choice);
            allocated += job.gpus * job.gpu_milli;
        }
    }
    r.loaded_pct = 100.0 * static_cast<double>(allocated) / static_cast<double>(cluster.total_gpu_milli);

    std::vector<sched::JobRequest> queue;
    for (std::size_t i = 0; i < options.queued; ++i) {
        sched::JobRequest j = pods[static_cast<std::size_t>(rng.uniform(pods.size()))];
        j.id = sched::JobId(static_cast<std::int64_t>(i) + 1);
        j.team = sched::TeamId(static_cast<std::int64_t>(rng.uniform(8)) + 1);
        j.submitted_at = static_cast<std::int64_t>(i);
        queue.push_back(j);
    }
    r.queued = queue.size();
    sched::Policy policy;
    policy.placement.scorer = options.scorer;
    policy.placement.workload = sched::typical_workload(pods);
    policy.seed = options.seed;
    for (std::size_t s = 0; s < options.samples && s < queue.size(); ++s) {
        const double t0 = now_s();
        sched::Placement p = sched::place(view.workers, view.models, queue[s], policy.placement, scale, rng);
        r.decision_s.push_back(now_s() - t0);
        (void)p;
    }
    const double t0 = now_s();
    sched::Decisions d = sched::schedule(view, queue, policy, queue.size() + 1);
    r.schedule_s = now_s() - t0;
    r.schedule_placed = d.placements.size();
    return r;
}

} // namespace gpupool::sim
