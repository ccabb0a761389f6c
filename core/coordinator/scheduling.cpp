// The scheduling pass: builds the scheduler's view of the pool, calls sched::schedule and
// turns its decisions into assignments, holds and preemptions (Coordinator::place).
#include "core/coordinator/coordinator.hpp"

#include "core/coordinator/internal.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

std::vector<WorkerId> Coordinator::place(Changes& c) {
    const std::int64_t now = m_clock.now_ms();
    sched::ClusterView view;
    std::map<WorkerId, std::size_t> index;
    for (const auto& [id, w] : m_workers) {
        if (w.record.state != WorkerState::active || w.draining || w.paused ||
            now - w.record.last_seen_at > m_options.worker_timeout_ms) {
            continue;
        }
        sched::Worker sw;
        sw.id = id;
        sw.name = w.record.name;
        sw.cpu_milli_total = sw.cpu_milli_free = w.cpu_milli;
        sw.memory_mib_total = sw.memory_mib_free = w.memory_mib;
        if (w.slots > 0) {
            sw.slots_free = w.slots; // less the attempts on it, below
        }
        sw.gpus = w.gpus;
        for (std::size_t g = 0; g < sw.gpus.size(); ++g) {
            sw.gpus[g].model = view.models.intern(w.gpu_models[g]);
            if (std::find(w.unhealthy_gpus.begin(), w.unhealthy_gpus.end(), static_cast<std::int64_t>(g)) !=
                w.unhealthy_gpus.end()) {
                sw.gpus[g].milli_free = 0; // a failing GPU takes no new work
            }
        }
        index[id] = view.workers.size();
        view.workers.push_back(std::move(sw));
    }
    std::map<std::int64_t, std::int64_t> sweep_active;
    for (AttemptId id : m_active_attempts) {
        const AttemptRecord& a = m_attempts.at(id);
        const JobRecord& j = m_jobs.at(a.job);
        sweep_active[j.sweep_id]++;
        auto wi = index.find(a.worker);
        if (wi == index.end()) {
            continue;
        }
        sched::Worker& sw = view.workers[wi->second];
        if (sw.slots_free) {
            --*sw.slots_free;
        }
        sw.cpu_milli_free -= j.spec.resources.cpu_milli;
        sw.memory_mib_free -= j.spec.resources.memory_mib;
        if (a.gpu_index >= 0 && static_cast<std::size_t>(a.gpu_index) < sw.gpus.size()) {
            sw.gpus[static_cast<std::size_t>(a.gpu_index)].milli_free -= a.gpu_milli;
        }
        sched::RunningJob r;
        r.job = a.job;
        r.attempt = a.id;
        r.team = j.team;
        r.priority = j.spec.priority;
        r.worker = a.worker;
        if (a.gpu_index >= 0) {
            r.gpu_indices = {static_cast<std::uint32_t>(a.gpu_index)};
        }
        r.gpu_milli = a.gpu_milli;
        r.cpu_milli = j.spec.resources.cpu_milli;
        r.memory_mib = j.spec.resources.memory_mib;
        r.started_at = (a.started_at ? *a.started_at : a.assigned_at) / 1000;
        view.running.push_back(r);
    }
    for (const auto& [id, t] : m_teams) {
        view.teams.push_back({id, static_cast<double>(t.weight), m_usage.usage(id, now / 1000)});
    }
    std::vector<sched::JobRequest> pending;
    std::map<std::int64_t, std::int64_t> sweep_budget;
    // Credits: what each team may still hold in this pass (balance, and budgets when set).
    const bool enforce = m_options.credits.enforce;
    std::map<TeamId, Micro> room;
    auto room_of = [&](TeamId team) -> Micro& {
        auto it = room.find(team);
        if (it == room.end()) {
            it = room.emplace(team, budget_room(team, now)).first;
        }
        return it->second;
    };
    // And what each submitting member may still hold, for members with caps of their own.
    auto member_of = [&](JobId job) { return m_sweeps.at(m_jobs.at(job).sweep_id).submitter_token; };
    std::map<std::int64_t, std::optional<Micro>> member_rooms;
    auto member_room_of = [&](JobId job) -> std::optional<Micro>& {
        const std::int64_t token = member_of(job);
        auto it = member_rooms.find(token);
        if (it == member_rooms.end()) {
            it = member_rooms.emplace(token, member_room(token, now)).first;
        }
        return it->second;
    };
    std::map<std::int64_t, Micro> member_reserved; // by the member's jobs that entered this pass
    // "team `x` can hold 0.2 credits now (balance 5; budget 1/day, 0.8 spent or held)".
    auto can_hold = [&](TeamId team, Micro left) {
        const TeamRecord& t = m_teams.at(team);
        std::string out = "team `" + t.name + "` can hold " + credits_text(std::max<Micro>(left, 0)) + " now (balance " +
                          format_credits(m_ledger.balance(credits::Account::of_team(team.value())));
        const Micro held = m_ledger.held_by_team(team.value());
        if (t.budget_day_micro) {
            out += "; budget " + format_credits(*t.budget_day_micro) + "/day, " +
                   format_credits(m_ledger.spent_since(team.value(), now - k_day_ms) + held) + " spent or held";
        }
        if (t.budget_week_micro) {
            out += "; budget " + format_credits(*t.budget_week_micro) + "/week, " +
                   format_credits(m_ledger.spent_since(team.value(), now - k_week_ms) + held) + " spent or held";
        }
        return out + ")";
    };
    // The largest hold a job could take on any live worker it fits: a team that cannot cover it
    // does not enter the scheduling pass. (With the smallest, a job placed on a pricier GPU than it
    // can pay for would be chosen and dropped again every pass, blocking that GPU for others.)
    auto max_hold = [&](const recipe::JobSpec& spec) {
        const auto& r = spec.resources;
        Micro worst = 0;
        for (const auto& sw : view.workers) {
            if (r.gpus == 0) {
                worst = std::max(worst, attempt_price(spec, sw.id, -1, 0));
                continue;
            }
            const LiveWorker& lw = m_workers.at(sw.id);
            for (std::size_t g = 0; g < lw.gpus.size(); ++g) {
                const bool model_ok = r.gpu_models.empty() || std::find(r.gpu_models.begin(), r.gpu_models.end(),
                                                                        lw.gpu_models[g]) != r.gpu_models.end();
                if (model_ok && lw.gpus[g].memory_mib >= r.gpu_memory_mib) {
                    worst = std::max(worst, attempt_price(spec, sw.id, static_cast<std::int64_t>(g), r.gpu_milli));
                }
            }
        }
        return credits::cost_of(worst, r.max_runtime_s * 1000);
    };
    for (JobId id : m_queued_jobs) {
        const JobRecord& j = m_jobs.at(id);
        if (enforce && !view.workers.empty()) {
            const Micro need = max_hold(j.spec);
            const Micro left = room_of(j.team);
            if (need > left) {
                m_waiting[id] = "waiting for credits: " + can_hold(j.team, left) + " but this job's hold may be " +
                                credits_text(need) + " (price x max_runtime " +
                                resources::format_duration_s(j.spec.resources.max_runtime_s) + ")";
                continue;
            }
            // A member's jobs beyond what its own budget can hold stay out of the pass, so that they
            // do not take a GPU from a teammate's job only to be dropped below.
            if (const auto& mine = member_room_of(id)) {
                Micro& reserved = member_reserved[member_of(id)];
                if (need > *mine - reserved) {
                    m_waiting[id] = "waiting for credits: " + member_can_hold(member_of(id), *mine - reserved, reserved, now) +
                                    " but this job's hold may be " + credits_text(need) + " (price x max_runtime " +
                                    resources::format_duration_s(j.spec.resources.max_runtime_s) + ")";
                    continue;
                }
                reserved += need;
            }
        }
        const auto& sweep = m_sweeps.at(j.sweep_id);
        if (sweep.max_parallel > 0) {
            auto& used = sweep_budget.try_emplace(j.sweep_id, sweep_active[j.sweep_id]).first->second;
            if (used >= sweep.max_parallel) {
                m_waiting[id] = "its sweep is at max_parallel = " + std::to_string(sweep.max_parallel);
                continue;
            }
            ++used;
        }
        std::vector<std::string> unknown;
        // A job re-queued by preemption queues again from when it stopped, so that aging cannot lift
        // it straight back above the job it made room for.
        std::int64_t queued_since = j.created_at;
        if (auto latest = m_latest_attempt.find(id); latest != m_latest_attempt.end()) {
            const AttemptRecord& last = m_attempts.at(latest->second);
            if (last.state == AttemptState::preempted && last.ended_at) {
                queued_since = *last.ended_at;
            }
        }
        pending.push_back(sched::make_request(id, j.team, j.spec, queued_since / 1000, view.models, &unknown));
        if (!unknown.empty() && pending.back().gpu_models == 0) {
            pending.pop_back();
            m_waiting[id] = "no worker has a GPU of the models it accepts";
        }
    }
    if (pending.empty()) {
        return {};
    }
    if (view.workers.empty()) {
        std::size_t paused = 0;
        for (const auto& [id, w] : m_workers) {
            paused += (w.paused && presence(id) == "paused") ? 1 : 0;
        }
        const std::string why = paused == 0 ? std::string("no worker is connected")
                                            : "no worker is taking work: " + std::to_string(paused) +
                                                  (paused == 1 ? " is" : " are") + " paused by its owner";
        for (const auto& p : pending) {
            m_waiting[p.id] = why;
        }
        return {};
    }
    sched::Decisions d = sched::schedule(view, pending, m_options.policy, now / 1000);
    std::vector<WorkerId> woken;
    for (const auto& w : d.waiting) {
        m_waiting[w.job] = w.reason;
    }
    // Preemption: the victim's attempt ends now (its worker is told to stop in the next heartbeat)
    // and its job goes back to the queue (a preempted job is always re-queued); the preemptor is placed in a
    // later pass, once the victim's resources are free.
    for (const auto& pre : d.preemptions) {
        auto it = m_attempts.find(pre.attempt);
        if (it == m_attempts.end() || !is_active(it->second.state)) {
            continue;
        }
        AttemptRecord copy = it->second;
        end_attempt(copy, AttemptState::preempted, std::nullopt,
                    "preempted for higher-priority job " + std::to_string(pre.for_job.value()), c);
    }
    for (const auto& p : d.placements) {
        JobRecord j = m_jobs.at(p.job);
        const std::int64_t gpu_index = p.gpus.empty() ? -1 : static_cast<std::int64_t>(p.gpus.front());
        const Micro price = attempt_price(j.spec, p.worker, gpu_index, p.gpu_milli);
        const Micro hold = credits::cost_of(price, j.spec.resources.max_runtime_s * 1000);
        if (enforce) {
            Micro& left = room_of(j.team);
            if (hold > left) {
                m_waiting[p.job] = "waiting for credits: " + can_hold(j.team, left) + " but this job's hold on worker " +
                                   std::to_string(p.worker.value()) + " is " + credits_text(hold) + " (" +
                                   format_credits(price) + "/hour x max_runtime " +
                                   resources::format_duration_s(j.spec.resources.max_runtime_s) + ")";
                continue;
            }
            auto& mine = member_room_of(p.job);
            if (mine && hold > *mine) {
                m_waiting[p.job] = "waiting for credits: " + member_can_hold(member_of(p.job), *mine, 0, now) +
                                   " but this job's hold on worker " + std::to_string(p.worker.value()) + " is " +
                                   credits_text(hold);
                continue;
            }
            left -= hold;
            if (mine) {
                *mine -= hold;
            }
        }
        AttemptRecord a;
        a.id = AttemptId(m_next_attempt + static_cast<std::int64_t>(c.attempts.size()));
        a.job = p.job;
        a.worker = p.worker;
        a.gpu_index = gpu_index;
        a.gpu_milli = p.gpu_milli;
        a.state = AttemptState::assigned;
        a.assigned_at = now;
        a.lease_expires_at = now + m_options.lease_ms;
        a.reason = "assigned";
        a.price_micro_per_hour = price;
        c.attempts.push_back(a);
        if (hold > 0) {
            // The hold is taken with the assignment, in the same transaction.
            c.ledger.push_back(credits::Ledger::hold_entry(next_entry_id(c), now, a.id.value(), j.team.value(), hold));
        }
        j.state = JobState::assigned;
        j.attempts += 1;
        j.updated_at = now;
        j.reason = "assigned to worker " + std::to_string(p.worker.value());
        c.jobs.push_back(j);
        m_waiting.erase(p.job);
        if (std::find(woken.begin(), woken.end(), p.worker) == woken.end()) {
            woken.push_back(p.worker);
        }
    }
    return woken;
}

} // namespace gpupool::coordinator
