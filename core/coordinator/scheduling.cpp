// The scheduling pass: sched::schedule decides over the view PoolView keeps (pool_view.hpp) with
// what this file adds per pass (usage, credit rooms, prices); the rest of the file turns its
// decisions into assignments, holds and preemptions, and words the waiting reasons.
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_ops.hpp"
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

// ---- the pass's input --------------------------------------------------------------------------

namespace detail {

void feed_job(PoolView& view, const WorkerRoster& roster, const JobBook& book, const JobRecord& j,
              const CoordinatorOptions& options) {
    // A job re-queued by preemption queues again from when it stopped, so that aging cannot lift
    // it straight back above the job it made room for.
    std::int64_t queued_since = j.created_at;
    if (auto latest = book.latest_attempt().find(j.id); latest != book.latest_attempt().end()) {
        const AttemptRecord& last = book.attempts().at(latest->second);
        if (last.state == AttemptState::preempted && last.ended_at) {
            queued_since = *last.ended_at;
        }
    }
    const SweepRecord& sweep = book.sweeps().at(j.sweep_id);
    std::vector<TeamId> avoid_owners;
    for (const auto& checked : {j.check_of, j.check_against}) {
        if (!checked) {
            continue;
        }
        const auto a = book.attempts().find(*checked);
        const auto* w = a == book.attempts().end() ? nullptr : roster.find(a->second.worker);
        if (w != nullptr) {
            avoid_owners.push_back(w->record.team);
        }
    }
    view.set_job(j, queued_since, sweep.submitter_token, sweep.max_parallel,
                 j.state == JobState::queued
                     ? book.owner_avoids(j.id, options.owner_preempt_limit, options.owner_avoid_ms)
                     : std::vector<sched::AvoidWorker>{},
                 std::move(avoid_owners));
}

void feed_view(PoolView& view, const WorkerRoster& roster, const JobBook& book, const CoordinatorOptions& options) {
    for (const auto& [id, w] : roster.workers()) {
        view.set_worker(id, w);
    }
    for (AttemptId id : book.active()) {
        const AttemptRecord& a = book.attempts().at(id);
        view.set_attempt(a, book.jobs().at(a.job), book.times_preempted(a.job));
    }
    for (JobId id : book.queued()) {
        feed_job(view, roster, book, book.jobs().at(id), options);
    }
}

} // namespace detail

std::optional<std::string> Coordinator::pool_view_drift() {
    const std::int64_t now = m_clock.now_ms();
    m_pool.refresh(now);
    PoolView fresh(m_options.worker_timeout_ms, m_pool.view().models);
    feed_view(fresh, m_roster, m_job_book, m_options);
    fresh.refresh(now);
    return first_difference(m_pool, fresh);
}

// What one pass decides over: the view as of now, with what depends on the time (fair-share
// usage) and on the ledger (credit rooms) added for the teams and members that have queued jobs.
Coordinator::PassInput Coordinator::pass_input(std::int64_t now) {
    if (m_pool.needs_rebuild()) {
        PoolView fresh(m_options.worker_timeout_ms); // a new catalog: the models of workers that exist
        feed_view(fresh, m_roster, m_job_book, m_options);
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
    const Micro price = m_roster.attempt_price(j.spec.resources, p.worker, gpu_index, p.gpu_milli);
    // A spot check holds nothing: the pool pays its provider when it ends (CreditDesk::stage_check_pay).
    const Micro hold = j.is_check() ? 0 : credits::cost_of(price, j.spec.resources.max_runtime_s * 1000);
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
        const std::string why = m_roster.no_worker_reason(now);
        for (const auto& job : admitted.jobs) {
            d.waiting.push_back({job.id, sched::PlaceOutcome::not_now, why, sched::Gate::none, {}});
        }
    } else {
        d = sched::schedule_in_place(in.view, in.queued, in.admission, m_options.policy, now / 1000);
    }
    for (auto& w : d.waiting) { // the reasons move: the decisions are not read again for them
        const bool credits = w.gate == sched::Gate::team_credits || w.gate == sched::Gate::member_credits;
        m_waiting[w.job] = credits ? credit_wait_reason(w, now) : std::move(w.reason);
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
        end_attempt(*this, copy, AttemptState::preempted, std::nullopt,
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
