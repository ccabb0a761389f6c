#include "core/sched/scheduler.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace gpupool::sched {

namespace {

// Requests that are interchangeable for placement: once one fails in a call, the rest fail too
// (resources only shrink during a call). A request that avoids workers or owners (avoids()) has
// fewer places to go than its signature says: its failure is not recorded for the others.
using Signature =
    std::tuple<std::int64_t, std::int64_t, std::int64_t, ModelMask, std::int64_t, std::int64_t, std::int64_t>;
// A request kept off some workers (JobRequest::avoid) or owners (avoid_owners: a spot check).
bool avoids(const JobRequest& j) {
    return !j.avoid.empty() || !j.avoid_owners.empty();
}

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

// One call of schedule(): the workers as this pass leaves them, and what it decided so far.
// `workers` starts as the view's workers (the view's own vector, or a copy of it); the pass changes
// them as it places and reserves, and puts back what it changed when it ends, so that a caller who
// lends its own vector gets it back as it was without paying for a copy of the whole pool.
class Pass {
public:
    Pass(const ClusterView& view, std::vector<Worker>& workers, const std::vector<JobRequest>& pending,
         const Policy& policy, std::int64_t now, const Admission* admission)
        : m_view(view), m_pending(pending), m_policy(policy), m_now(now), m_admission(admission), m_workers(workers),
          m_scale(scale_of(m_workers)), m_shares(view.teams, policy.ordering),
          m_rng(policy.seed ^ static_cast<std::uint64_t>(now)), m_taken(view.running.size(), false) {
        if (admission != nullptr && admission->credits) {
            m_rooms = *admission->credits;
        }
        try {
            reserve_for_stopping();
        } catch (...) {
            restore(); // the destructor does not run for a constructor that throws
            throw;
        }
    }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    ~Pass() { restore(); }

    Decisions run() {
        OrderingCursor cursor(m_pending, m_now, m_policy.ordering);
        while (auto idx = cursor.next(m_shares)) {
            one(m_pending[*idx]);
        }
        return std::move(m_out);
    }

private:
    void one(const JobRequest& job) {
        const bool may_preempt = m_policy.preemption.enabled && job.priority == Priority::high;
        if (!may_preempt) {
            if (auto it = m_failed.find(signature(job)); it != m_failed.end()) {
                m_out.waiting.push_back({job.id, it->second.outcome, it->second.reason, Gate::none, {}});
                return;
            }
        }
        auto own = m_reserved_for.find(job.id);
        if (own != m_reserved_for.end()) {
            for (auto w : own->second) {
                m_workers[w].draining = m_saved[m_saved_at.at(w)].draining; // reserved: saved before
            }
        }
        Placement p = place(m_workers, m_view.models, job, m_policy.placement, m_scale, m_rng, m_now);
        if (own != m_reserved_for.end() && p.outcome != PlaceOutcome::placed) {
            for (auto w : own->second) {
                m_workers[w].draining = true;
            }
        }
        if (p.outcome == PlaceOutcome::placed) {
            if (covered(job, p)) {
                commit(job, p);
            }
            return;
        }
        if (p.outcome == PlaceOutcome::not_now && may_preempt && try_preempt(job)) {
            return;
        }
        WaitingJob w{job.id, p.outcome, p.reason, Gate::none, {}};
        if (!may_preempt && !avoids(job)) {
            m_failed.emplace(signature(job), w);
        }
        if (p.outcome == PlaceOutcome::not_now) {
            hold_worker(job);
        }
        m_out.waiting.push_back(std::move(w));
    }

    // Credits: the placement's actual hold comes out of its payers' rooms, or it is not made.
    bool covered(const JobRequest& job, const Placement& p) {
        if (!m_rooms || job.pool_pays) {
            return true;
        }
        const Worker& w = m_workers[p.worker];
        const std::optional<std::uint32_t> gpu =
            p.choice.gpus.empty() ? std::nullopt : std::optional<std::uint32_t>(p.choice.gpus.front());
        const credits::Micro price = hourly_price(job, w, gpu, p.choice.milli, m_admission->prices);
        const credits::Micro hold = hold_of(job, price);
        credits::Micro& left = m_rooms->team[job.team];
        if (hold > left) {
            m_out.waiting.push_back({job.id, PlaceOutcome::not_now, "waiting for credits", Gate::team_credits,
                                     CreditWait{hold, left, 0, w.id, price}});
            return false;
        }
        auto mine = m_rooms->member.find(job.member);
        if (job.member != TokenId{} && mine != m_rooms->member.end()) {
            if (hold > mine->second) {
                m_out.waiting.push_back({job.id, PlaceOutcome::not_now, "waiting for credits", Gate::member_credits,
                                         CreditWait{hold, mine->second, 0, w.id, price}});
                return false;
            }
            mine->second -= hold;
        }
        left -= hold;
        return true;
    }

    void commit(const JobRequest& job, const Placement& p) {
        take(touch(p.worker), job, p.choice);
        PlacementDecision d{job.id,         m_workers[p.worker].id, p.choice.gpus,
                            p.choice.milli, job.cpu_milli,          job.memory_mib};
        m_shares.charge(job.team, gpu_share(job, d) * m_policy.ordering.placement_charge_s);
        m_out.placements.push_back(std::move(d));
    }

    // A high-priority job that does not fit now: victims to stop for it, if any. True if it is
    // settled (waiting on victims chosen now or before).
    bool try_preempt(const JobRequest& job) {
        if (auto it = m_stopping_for.find(job.id); it != m_stopping_for.end()) {
            m_out.waiting.push_back({job.id,
                                     PlaceOutcome::not_now,
                                     "waiting for " + std::to_string(it->second) + " preempted job(s) to stop",
                                     Gate::none,
                                     {}});
            return true;
        }
        auto set = m_no_victims.contains(signature(job))
                       ? std::nullopt
                       : find_victims(m_workers, m_view.running, job, m_shares, m_now, m_policy.preemption,
                                      m_policy.placement.owner_allows, m_taken);
        if (!set) {
            if (!avoids(job)) {
                m_no_victims[signature(job)] = true;
            }
            return false;
        }
        reserve(job.id, set->worker);
        for (auto v : set->victims) {
            m_taken[v] = true;
            const RunningJob& r = m_view.running[v];
            m_out.preemptions.push_back(
                {r.job, r.attempt, r.worker, job.id, m_now + m_policy.preemption.grace_s, lost_gpu_seconds(r, m_now)});
        }
        m_out.waiting.push_back(
            {job.id,
             PlaceOutcome::not_now,
             preempt_reason(set->victims.size(), m_workers[set->worker], m_policy.preemption.grace_s),
             Gate::none,
             {}});
        return true;
    }

    // Policy::reservations: the worker nearest to fitting a multi-GPU job that fits nowhere now
    // takes nothing else in this call.
    void hold_worker(const JobRequest& job) {
        if (m_held >= m_policy.reservations || job.gpus < 2) {
            return;
        }
        std::optional<std::size_t> best;
        std::pair<std::int64_t, std::int64_t> best_key{-1, -1};
        for (std::size_t i = 0; i < m_workers.size(); ++i) {
            const Worker& w = m_workers[i];
            if (!filter_available(w) || !filter_models(w, job) || !fits_total(w, job) ||
                !filter_owner(w, job, m_policy.placement.owner_allows) || !filter_avoid(w, job, m_now)) {
                continue;
            }
            std::pair<std::int64_t, std::int64_t> key{0, 0};
            for (const auto& g : w.gpus) {
                key.first += g.milli_free >= k_milli_per_gpu ? 1 : 0;
                key.second += std::max<std::int64_t>(0, g.milli_free);
            }
            if (key > best_key) {
                best = i;
                best_key = key;
            }
        }
        if (!best) {
            return;
        }
        ++m_held;
        touch(*best).draining = true;
    }

    // Workers where attempts are stopping for a preemptor are reserved for it (reserve()).
    void reserve_for_stopping() {
        std::unordered_map<WorkerId, std::size_t> index; // only when some attempts are stopping
        for (const auto& r : m_view.running) {
            if (!r.stopping) {
                continue;
            }
            if (index.empty()) {
                for (std::size_t i = 0; i < m_workers.size(); ++i) {
                    index[m_workers[i].id] = i;
                }
            }
            ++m_stopping_for[r.preempted_for];
            if (auto it = index.find(r.worker); it != index.end()) {
                reserve(r.preempted_for, it->second);
            }
        }
    }

    // A worker whose attempts are stopping for a preemptor is reserved for it: nobody else may take
    // what is free there meanwhile (that could leave the preemptor short again when they stop).
    void reserve(JobId job, std::size_t w) {
        touch(w).draining = true;
        m_reserved_for[job].push_back(w);
    }

    // What a pass changes on a worker (take(), draining), saved before its first change.
    struct Saved {
        std::size_t index = 0;
        std::int64_t cpu_milli_free = 0;
        std::int64_t memory_mib_free = 0;
        std::optional<std::int64_t> slots_free;
        bool draining = false;
        std::vector<std::int64_t> gpu_milli_free;
    };

    // The worker at `i`, to change: its state is saved the first time.
    Worker& touch(std::size_t i) {
        Worker& w = m_workers[i];
        if (m_saved_at.try_emplace(i, m_saved.size()).second) {
            Saved s{i, w.cpu_milli_free, w.memory_mib_free, w.slots_free, w.draining, {}};
            for (const auto& g : w.gpus) {
                s.gpu_milli_free.push_back(g.milli_free);
            }
            m_saved.push_back(std::move(s));
        }
        return w;
    }

    void restore() {
        for (const Saved& s : m_saved) {
            Worker& w = m_workers[s.index];
            w.cpu_milli_free = s.cpu_milli_free;
            w.memory_mib_free = s.memory_mib_free;
            w.slots_free = s.slots_free;
            w.draining = s.draining;
            for (std::size_t g = 0; g < s.gpu_milli_free.size(); ++g) {
                w.gpus[g].milli_free = s.gpu_milli_free[g];
            }
        }
        m_saved.clear();
        m_saved_at.clear();
    }

    const ClusterView& m_view;
    const std::vector<JobRequest>& m_pending;
    const Policy& m_policy;
    std::int64_t m_now;
    const Admission* m_admission;
    std::optional<CreditRooms> m_rooms;
    std::vector<Worker>& m_workers;
    ScoreScale m_scale;
    FairShareSorter m_shares;
    Rng m_rng;
    Decisions m_out;
    std::map<Signature, WaitingJob> m_failed;
    std::map<Signature, bool> m_no_victims; // victim sets only shrink during a call
    std::vector<bool> m_taken;
    std::size_t m_held = 0; // workers held by hold_worker() in this call
    std::unordered_map<JobId, std::size_t> m_stopping_for;
    std::unordered_map<JobId, std::vector<std::size_t>> m_reserved_for;
    std::vector<Saved> m_saved;                              // in the order first changed
    std::unordered_map<std::size_t, std::size_t> m_saved_at; // worker index -> its entry in m_saved
};

} // namespace

Policy legacy_policy(Policy policy) {
    policy.ordering.mode = OrderMode::class_first;
    policy.preemption.choice = VictimChoice::fewest_victims;
    policy.preemption.max_per_job = 0;
    policy.preemption.protect_below_share = false;
    policy.reservations = 0;
    return policy;
}

Decisions schedule(const ClusterView& view, const std::vector<JobRequest>& pending, const Policy& policy,
                   std::int64_t now) {
    std::vector<Worker> workers = view.workers;
    return Pass(view, workers, pending, policy, now, nullptr).run();
}

namespace {

Decisions admit_and_run(const ClusterView& view, std::vector<Worker>& workers, const std::vector<JobRequest>& queued,
                        const Admission& admission, const Policy& policy, std::int64_t now) {
    std::vector<WaitingJob> waiting;
    Admitted admitted = admit(queued, view.workers, admission, waiting);
    Decisions out = Pass(view, workers, admitted.jobs, policy, now, &admission).run();
    out.waiting.insert(out.waiting.begin(), waiting.begin(), waiting.end());
    return out;
}

} // namespace

Decisions schedule(const ClusterView& view, const std::vector<JobRequest>& queued, const Admission& admission,
                   const Policy& policy, std::int64_t now) {
    std::vector<Worker> workers = view.workers;
    return admit_and_run(view, workers, queued, admission, policy, now);
}

Decisions schedule_in_place(ClusterView& view, const std::vector<JobRequest>& queued, const Admission& admission,
                            const Policy& policy, std::int64_t now) {
    return admit_and_run(view, view.workers, queued, admission, policy, now);
}

} // namespace gpupool::sched
