#include "core/sched/scheduler.hpp"

#include <map>
#include <tuple>
#include <unordered_map>

namespace gpupool::sched {

namespace {

// Requests that are interchangeable for placement: once one fails in a call, the rest fail too
// (resources only shrink during a call).
using Signature =
    std::tuple<std::int64_t, std::int64_t, std::int64_t, ModelMask, std::int64_t, std::int64_t, std::int64_t>;
Signature signature(const JobRequest& j) {
    return {j.gpus, j.gpu_milli, j.gpu_memory_mib, j.gpu_models, j.cpu_milli, j.memory_mib, j.team.value()};
}

double gpu_share(const JobRequest& job, const PlacementDecision& d) {
    (void)job;
    return static_cast<double>(d.gpu_milli * static_cast<std::int64_t>(d.gpus.size())) / k_milli_per_gpu;
}

std::string preempt_reason(std::size_t victims, const Worker& w, std::int64_t grace_s) {
    return "preempting " + std::to_string(victims) + " job(s) on worker " +
           (w.name.empty() ? std::to_string(w.id.value()) : w.name) + "; it starts when they stop (grace " +
           std::to_string(grace_s) + "s)";
}

} // namespace

Decisions schedule(const ClusterView& view, const std::vector<JobRequest>& pending, const Policy& policy,
                   std::int64_t now) {
    Decisions out;
    std::vector<Worker> workers = view.workers;
    const ScoreScale scale = scale_of(workers);
    FairShareSorter shares(view.teams, policy.ordering);
    OrderingCursor cursor(pending, now, policy.ordering);
    Rng rng(policy.seed ^ static_cast<std::uint64_t>(now));
    std::map<Signature, WaitingJob> failed;
    std::map<Signature, bool> no_victims; // victim sets only shrink during a call
    std::vector<bool> taken(view.running.size(), false);
    // A worker whose attempts are stopping for a preemptor is reserved for it: nobody else may take
    // what is free there meanwhile (that could leave the preemptor short again when they stop).
    std::unordered_map<JobId, std::size_t> stopping_for;
    std::unordered_map<WorkerId, std::size_t> worker_index;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        worker_index[workers[i].id] = i;
    }
    std::vector<bool> was_draining(workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i) {
        was_draining[i] = workers[i].draining;
    }
    std::unordered_map<JobId, std::vector<std::size_t>> reserved_for;
    auto reserve = [&](JobId job, std::size_t w) {
        workers[w].draining = true;
        reserved_for[job].push_back(w);
    };
    for (const auto& r : view.running) {
        if (r.stopping) {
            ++stopping_for[r.preempted_for];
            if (auto it = worker_index.find(r.worker); it != worker_index.end()) {
                reserve(r.preempted_for, it->second);
            }
        }
    }

    while (auto idx = cursor.next(shares)) {
        const JobRequest& job = pending[*idx];
        const bool may_preempt = policy.preemption.enabled && job.priority == Priority::high;
        if (!may_preempt) {
            if (auto it = failed.find(signature(job)); it != failed.end()) {
                out.waiting.push_back({job.id, it->second.outcome, it->second.reason});
                continue;
            }
        }
        auto own = reserved_for.find(job.id);
        if (own != reserved_for.end()) {
            for (auto w : own->second) {
                workers[w].draining = was_draining[w];
            }
        }
        Placement p = place(workers, view.models, job, policy.placement, scale, rng);
        if (own != reserved_for.end() && p.outcome != PlaceOutcome::placed) {
            for (auto w : own->second) {
                workers[w].draining = true;
            }
        }
        if (p.outcome == PlaceOutcome::placed) {
            take(workers[p.worker], job, p.choice);
            PlacementDecision d{job.id,         workers[p.worker].id, p.choice.gpus,
                                p.choice.milli, job.cpu_milli,        job.memory_mib};
            shares.charge(job.team, gpu_share(job, d) * policy.ordering.placement_charge_s);
            out.placements.push_back(std::move(d));
            continue;
        }
        if (p.outcome == PlaceOutcome::not_now && may_preempt) {
            if (auto it = stopping_for.find(job.id); it != stopping_for.end()) {
                out.waiting.push_back({job.id, PlaceOutcome::not_now,
                                       "waiting for " + std::to_string(it->second) + " preempted job(s) to stop"});
                continue;
            }
            auto set = no_victims.contains(signature(job))
                           ? std::nullopt
                           : find_victims(workers, view.running, job, shares, now, policy.preemption,
                                          policy.placement.owner_allows, taken);
            if (!set) {
                no_victims[signature(job)] = true;
            }
            if (set) {
                reserve(job.id, set->worker);
                for (auto v : set->victims) {
                    taken[v] = true;
                    const RunningJob& r = view.running[v];
                    out.preemptions.push_back({r.job, r.attempt, r.worker, job.id, now + policy.preemption.grace_s});
                }
                out.waiting.push_back(
                    {job.id, PlaceOutcome::not_now,
                     preempt_reason(set->victims.size(), workers[set->worker], policy.preemption.grace_s)});
                continue;
            }
        }
        WaitingJob w{job.id, p.outcome, p.reason};
        if (!may_preempt) {
            failed.emplace(signature(job), w);
        }
        out.waiting.push_back(std::move(w));
    }
    return out;
}

} // namespace gpupool::sched
