#include "core/sched/preemption.hpp"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace gpupool::sched {

bool preemptible(const RunningJob& victim, const JobRequest& preemptor, const FairShareSorter& shares, std::int64_t now,
                 const PreemptionPolicy& policy) {
    if (preemptor.priority != Priority::high || victim.priority == Priority::high || victim.stopping) {
        return false;
    }
    if (now - victim.started_at < policy.min_runtime_s) {
        return false;
    }
    if (policy.max_per_job > 0 && victim.preempted_before >= policy.max_per_job) {
        return false;
    }
    if (victim.priority == Priority::normal) {
        return shares.above_fair_share(victim.team);
    }
    return !policy.protect_below_share || victim.team == preemptor.team || !shares.below_fair_share(victim.team);
}

double lost_gpu_seconds(const RunningJob& victim, std::int64_t now) {
    std::int64_t since =
        victim.checkpoints ? std::max(victim.started_at, victim.checkpointed_at) : victim.started_at;
    if (const std::int64_t every = victim.checkpoint_every_s; every > 0 && now > victim.started_at) {
        since = std::max(since, victim.started_at + (now - victim.started_at) / every * every);
    }
    const auto gpu_milli = victim.gpu_milli * static_cast<std::int64_t>(victim.gpu_indices.size());
    return static_cast<double>(gpu_milli) / k_milli_per_gpu *
           static_cast<double>(std::max<std::int64_t>(0, now - since));
}

namespace {

// Cost of a victim set, lower is better, compared as a tuple. least_lost_work: (lost GPU-seconds,
// normal victims, victims); fewest_victims: (victims, normal victims, run time).
using Cost = std::tuple<double, std::size_t, double>;

Cost victim_cost(const std::vector<RunningJob>& running, const std::vector<std::size_t>& set, std::int64_t now,
                 VictimChoice choice) {
    double lost = 0.0;
    double run = 0.0;
    std::size_t normals = 0;
    for (auto i : set) {
        lost += lost_gpu_seconds(running[i], now);
        run += static_cast<double>(now - running[i].started_at);
        normals += running[i].priority == Priority::normal ? 1 : 0;
    }
    if (choice == VictimChoice::least_lost_work) {
        return {lost, normals, static_cast<double>(set.size())};
    }
    return {static_cast<double>(set.size()), normals, run};
}

bool fits_without(Worker w, const std::vector<RunningJob>& running, const std::vector<std::size_t>& set,
                  const JobRequest& job) {
    for (auto i : set) {
        const RunningJob& r = running[i];
        give_back(w, r.cpu_milli, r.memory_mib, r.gpu_indices, r.gpu_milli);
    }
    return filter_slots(w) && filter_cpu(w, job) && filter_memory(w, job) && filter_gpu(w, job);
}

// Calls f(combination) for each k-combination of [0, n) in lexicographic order until f returns true.
template <class F>
bool for_each_combination(std::size_t n, std::size_t k, F f) {
    if (k > n) {
        return false;
    }
    std::vector<std::size_t> c(k);
    for (std::size_t i = 0; i < k; ++i) {
        c[i] = i;
    }
    while (true) {
        if (f(c)) {
            return true;
        }
        std::size_t i = k;
        while (i > 0 && c[i - 1] == n - k + i - 1) {
            --i;
        }
        if (i == 0) {
            return false;
        }
        ++c[i - 1];
        for (std::size_t j = i; j < k; ++j) {
            c[j] = c[j - 1] + 1;
        }
    }
}

} // namespace

std::optional<VictimSet> find_victims(const std::vector<Worker>& workers, const std::vector<RunningJob>& running,
                                      const JobRequest& job, const FairShareSorter& shares, std::int64_t now,
                                      const PreemptionPolicy& policy, const OwnerPolicy& owner,
                                      const std::vector<bool>& taken) {
    if (!policy.enabled || job.priority != Priority::high) {
        return std::nullopt;
    }
    std::unordered_map<WorkerId, std::size_t> index;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        index[workers[i].id] = i;
    }
    // Eligible victims per worker, the cheapest first.
    std::vector<std::vector<std::size_t>> eligible(workers.size());
    for (std::size_t i = 0; i < running.size(); ++i) {
        auto it = index.find(running[i].worker);
        if (it == index.end() || (!taken.empty() && taken[i]) || !preemptible(running[i], job, shares, now, policy)) {
            continue;
        }
        eligible[it->second].push_back(i);
    }
    const bool least_lost = policy.choice == VictimChoice::least_lost_work;
    for (auto& e : eligible) {
        std::sort(e.begin(), e.end(), [&](std::size_t a, std::size_t b) {
            if (least_lost) {
                return std::pair(lost_gpu_seconds(running[a], now), running[a].priority) <
                       std::pair(lost_gpu_seconds(running[b], now), running[b].priority);
            }
            return std::pair(running[a].priority, -running[a].started_at) <
                   std::pair(running[b].priority, -running[b].started_at);
        });
        if (e.size() > policy.max_candidates) {
            e.resize(policy.max_candidates);
        }
    }
    std::optional<VictimSet> best;
    Cost best_cost{};
    for (std::size_t k = 1; k <= policy.max_victims; ++k) {
        for (std::size_t w = 0; w < workers.size(); ++w) {
            const Worker& worker = workers[w];
            if (eligible[w].size() < k || !filter_available(worker) || !filter_models(worker, job) ||
                !fits_total(worker, job) || !filter_owner(worker, job, owner) || !filter_avoid(worker, job, now)) {
                continue;
            }
            std::vector<std::size_t> set(k);
            for_each_combination(eligible[w].size(), k, [&](const std::vector<std::size_t>& c) {
                for (std::size_t i = 0; i < k; ++i) {
                    set[i] = eligible[w][c[i]];
                }
                const Cost cost = victim_cost(running, set, now, policy.choice);
                if ((best && !(cost < best_cost)) || !fits_without(worker, running, set, job)) {
                    return false;
                }
                best = VictimSet{w, set};
                best_cost = cost;
                return false; // keep looking for a cheaper set
            });
        }
        if (best && !least_lost) {
            return best; // the smallest size that works
        }
    }
    return best;
}

} // namespace gpupool::sched
