// The scheduling pass: sched::schedule decides over the view PoolView keeps (pool_view.hpp) with
// what this file adds per pass (usage, credit rooms, prices); the rest of the file turns its
// decisions into assignments, holds and preemptions, and words the waiting reasons.
#include "core/coordinator/coordinator.hpp"

#include "core/coordinator/internal.hpp"
#include "core/resources/quantity.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

std::string Coordinator::credit_wait_reason(const sched::WaitingJob& w, std::int64_t now) const {
    const JobRecord& j = m_job_book.jobs().at(w.job);
    const auto& cw = w.credits;
    const std::string runtime = resources::format_duration_s(j.spec.resources.max_runtime_s);
    const std::string who =
        w.gate == sched::Gate::team_credits
            ? m_credits.team_can_hold(j.team, cw.left, now)
            : m_credits.member_can_hold(m_job_book.sweeps().at(j.sweep_id).submitter_token, cw.left, cw.reserved, now);
    if (!cw.worker) {
        return "waiting for credits: " + who + " but this job's hold may be " + credits_text(cw.need) +
               " (price x max_runtime " + runtime + ")";
    }
    std::string out = "waiting for credits: " + who + " but this job's hold on worker " +
                      std::to_string(cw.worker->value()) + " is " + credits_text(cw.need);
    if (w.gate == sched::Gate::team_credits) {
        out += " (" + format_credits(cw.price_per_hour) + "/hour x max_runtime " + runtime + ")";
    }
    return out;
}

std::string Coordinator::no_worker_reason(std::int64_t now) const {
    // "no worker is taking work: 1 is paused by its owner, 2 are outside their owners' sharing
    // hours (the first shares again in 3h10m)"
    std::size_t paused = 0;
    std::size_t off_hours = 0;
    std::size_t reclaimed = 0;
    std::optional<std::int64_t> next;
    for (const auto& [id, w] : m_roster.workers()) {
        const std::string p = presence(id);
        paused += p == "paused" ? 1 : 0;
        off_hours += p == "off-hours" ? 1 : 0;
        reclaimed += p == "reclaimed" ? 1 : 0;
        if ((p == "paused" || p == "off-hours") && w.sharing_changes_at_ms && *w.sharing_changes_at_ms > now) {
            next = std::min(next.value_or(*w.sharing_changes_at_ms), *w.sharing_changes_at_ms);
        }
    }
    if (paused + off_hours + reclaimed == 0) {
        return k_no_worker_connected;
    }
    std::string out = "no worker is taking work";
    std::string sep = ": ";
    auto add = [&](std::size_t n, const char* one, const char* many) {
        if (n > 0) {
            out += sep + std::to_string(n) + (n == 1 ? one : many);
            sep = ", ";
        }
    };
    add(paused, " is paused by its owner", " are paused by their owners");
    add(off_hours, " is outside its owner's sharing hours", " are outside their owners' sharing hours");
    add(reclaimed, " is in use by its owner", " are in use by their owners");
    if (next) {
        out += " (the first shares again in " + resources::format_duration_s((*next - now + 999) / 1000) + ")";
    }
    return out;
}

// ---- the pass's input --------------------------------------------------------------------------

std::int64_t Coordinator::times_preempted(JobId job) const {
    std::int64_t n = 0;
    if (auto it = m_job_book.attempts_by_job().find(job); it != m_job_book.attempts_by_job().end()) {
        for (AttemptId id : it->second) {
            n += m_job_book.attempts().at(id).state == AttemptState::preempted ? 1 : 0;
        }
    }
    return n;
}

std::vector<sched::AvoidWorker> Coordinator::owner_avoids(JobId job) const {
    std::vector<sched::AvoidWorker> out;
    const std::int64_t limit = m_options.owner_preempt_limit;
    auto it = m_job_book.attempts_by_job().find(job);
    if (limit <= 0 || it == m_job_book.attempts_by_job().end()) {
        return out;
    }
    std::map<WorkerId, std::pair<std::int64_t, std::int64_t>> by_worker; // count, last end (ms)
    for (AttemptId id : it->second) {
        const AttemptRecord& a = m_job_book.attempts().at(id);
        if (preempted_by_owner(a) && a.ended_at) {
            auto& [count, last] = by_worker[a.worker];
            ++count;
            last = std::max(last, *a.ended_at);
        }
    }
    for (const auto& [worker, seen] : by_worker) {
        if (seen.first >= limit) {
            out.push_back({worker, (seen.second + m_options.owner_avoid_ms) / 1000}); // the scheduler's seconds
        }
    }
    return out;
}

void Coordinator::feed_job(PoolView& view, const JobRecord& j) const {
    // A job re-queued by preemption queues again from when it stopped, so that aging cannot lift
    // it straight back above the job it made room for.
    std::int64_t queued_since = j.created_at;
    if (auto latest = m_job_book.latest_attempt().find(j.id); latest != m_job_book.latest_attempt().end()) {
        const AttemptRecord& last = m_job_book.attempts().at(latest->second);
        if (last.state == AttemptState::preempted && last.ended_at) {
            queued_since = *last.ended_at;
        }
    }
    const SweepRecord& sweep = m_job_book.sweeps().at(j.sweep_id);
    view.set_job(j, queued_since, sweep.submitter_token, sweep.max_parallel,
                 j.state == JobState::queued ? owner_avoids(j.id) : std::vector<sched::AvoidWorker>{});
}

void Coordinator::feed(PoolView& view) const {
    for (const auto& [id, w] : m_roster.workers()) {
        view.set_worker(id, w);
    }
    for (AttemptId id : m_job_book.active()) {
        const AttemptRecord& a = m_job_book.attempts().at(id);
        view.set_attempt(a, m_job_book.jobs().at(a.job), times_preempted(a.job));
    }
    for (JobId id : m_job_book.queued()) {
        feed_job(view, m_job_book.jobs().at(id));
    }
}

std::optional<std::string> Coordinator::pool_view_drift() {
    const std::int64_t now = m_clock.now_ms();
    m_pool.refresh(now);
    PoolView fresh(m_options.worker_timeout_ms, m_pool.view().models);
    feed(fresh);
    fresh.refresh(now);
    return first_difference(m_pool, fresh);
}

// What one pass decides over: the view as of now, with what depends on the time (fair-share
// usage) and on the ledger (credit rooms) added for the teams and members that have queued jobs.
Coordinator::PassInput Coordinator::pass_input(std::int64_t now) {
    if (m_pool.needs_rebuild()) {
        PoolView fresh(m_options.worker_timeout_ms); // a new catalog: the models of workers that exist
        feed(fresh);
        m_pool = std::move(fresh);
    }
    std::vector<sched::TeamShare> teams;
    for (const auto& [id, t] : m_tokens.teams()) {
        teams.push_back({id, static_cast<double>(t.weight), m_usage.usage(id, now / 1000)});
    }
    m_pool.set_teams(std::move(teams));
    PassInput in{m_pool.refresh_for_pass(now), m_pool.queued(), {}};
    in.admission.sweep_max_parallel = m_pool.sweep_caps();
    // Admission reads the running counts of capped sweeps only: not a copy of every sweep's.
    const auto& running = m_pool.sweep_running();
    for (const auto& [sweep, cap] : in.admission.sweep_max_parallel) {
        if (auto it = running.find(sweep); it != running.end()) {
            in.admission.sweep_running.emplace_hint(in.admission.sweep_running.end(), sweep, it->second);
        }
    }
    const auto& rates = m_options.credits.rates;
    in.admission.prices.cpu_micro_per_core_hour = rates.cpu_micro_per_core_hour;
    in.admission.prices.default_gpu_micro_per_hour = rates.default_micro_per_gpu_hour;
    for (std::uint32_t m = 0; m < in.view.models.size(); ++m) {
        in.admission.prices.gpu_micro_per_hour.push_back(rates.gpu_rate(in.view.models.name(m)));
    }
    if (m_options.credits.enforce) {
        auto& rooms = in.admission.credits.emplace();
        for (TeamId team : m_pool.queued_teams()) {
            rooms.team[team] = m_credits.budget_room(team, now);
        }
        for (TokenId token : m_pool.queued_members()) {
            if (auto room = m_credits.member_room(token, now)) {
                rooms.member[token] = *room;
            }
        }
    }
    return in;
}

// ---- applying the decisions ---------------------------------------------------------------------

void Coordinator::assign(const sched::PlacementDecision& p, AttemptId id, std::int64_t now, Changes& c) {
    JobRecord j = m_job_book.jobs().at(p.job);
    const std::int64_t gpu_index = p.gpus.empty() ? -1 : static_cast<std::int64_t>(p.gpus.front());
    const Micro price = attempt_price(j.spec, p.worker, gpu_index, p.gpu_milli);
    const Micro hold = credits::cost_of(price, j.spec.resources.max_runtime_s * 1000);
    AttemptRecord a;
    a.id = id;
    a.job = p.job;
    a.worker = p.worker;
    a.gpu_index = gpu_index;
    a.gpu_milli = p.gpu_milli;
    a.state = AttemptState::assigned;
    a.assigned_at = now;
    a.lease_expires_at = now + m_options.lease_ms;
    a.reason = "assigned";
    a.price_micro_per_hour = price;
    a.retry = j.retries;
    c.attempts.push_back(a);
    if (hold > 0) {
        // The hold is taken with the assignment, in the same transaction.
        c.ledger.push_back(
            credits::Ledger::hold_entry(m_credits.next_entry_id(c), now, a.id.value(), j.team.value(), hold));
    }
    j.state = JobState::assigned;
    j.attempts += 1;
    j.updated_at = now;
    j.reason = "assigned to worker " + std::to_string(p.worker.value());
    c.jobs.push_back(j);
    m_waiting.erase(p.job);
}

std::vector<WorkerId> Coordinator::place(Changes& c) {
    const std::int64_t now = m_clock.now_ms();
    PassInput in = pass_input(now);
    if (in.queued.empty()) {
        return {};
    }
    sched::Decisions d;
    if (in.view.workers.empty()) {
        // Nothing to place on: the admission reasons still say which jobs would wait anyway.
        const auto admitted = sched::admit(in.queued, in.view.workers, in.admission, d.waiting);
        const std::string why = no_worker_reason(now);
        for (const auto& job : admitted.jobs) {
            d.waiting.push_back({job.id, sched::PlaceOutcome::not_now, why, sched::Gate::none, {}});
        }
    } else {
        d = sched::schedule_in_place(in.view, in.queued, in.admission, m_options.policy, now / 1000);
    }
    for (const auto& w : d.waiting) {
        const bool credits = w.gate == sched::Gate::team_credits || w.gate == sched::Gate::member_credits;
        m_waiting[w.job] = credits ? credit_wait_reason(w, now) : w.reason;
    }
    // Preemption: the victim's attempt ends now (its worker is told to stop in the next heartbeat)
    // and its job goes back to the queue (a preempted job is always re-queued); the preemptor is
    // placed in a later pass, once the victim's resources are free.
    for (const auto& pre : d.preemptions) {
        auto it = m_job_book.attempts().find(pre.attempt);
        if (it == m_job_book.attempts().end() || !is_active(it->second.state)) {
            continue;
        }
        AttemptRecord copy = it->second;
        end_attempt(copy, AttemptState::preempted, std::nullopt,
                    "preempted for higher-priority job " + std::to_string(pre.for_job.value()), c);
    }
    std::vector<WorkerId> woken;
    if (d.placements.empty()) {
        return woken;
    }
    auto first = take_ids(store::IdKind::attempt, static_cast<std::int64_t>(d.placements.size()));
    if (!first) {
        spdlog::error("no attempt ids for this pass's {} placements: {}", d.placements.size(), first.error().message);
        return woken;
    }
    for (const auto& p : d.placements) {
        assign(p, AttemptId((*first)++), now, c);
        if (std::find(woken.begin(), woken.end(), p.worker) == woken.end()) {
            woken.push_back(p.worker);
        }
    }
    return woken;
}

} // namespace gpupool::coordinator
