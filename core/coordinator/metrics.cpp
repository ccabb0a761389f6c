// The pool's numbers for monitoring (metrics.hpp): outcomes, credit totals, and pool_metrics().
#include "core/coordinator/metrics.hpp"

#include "core/coordinator/credit_desk.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_book.hpp"
#include "core/coordinator/spot_checks.hpp"
#include "core/coordinator/token_book.hpp"
#include "core/coordinator/worker_roster.hpp"

#include <algorithm>
#include <set>
#include <tuple>

namespace gpupool::coordinator {

using store::AttemptState;
using store::JobState;

const char* to_string(AttemptOutcome o) {
    switch (o) {
    case AttemptOutcome::succeeded:
        return "succeeded";
    case AttemptOutcome::failed:
        return "failed";
    case AttemptOutcome::cancelled:
        return "cancelled";
    case AttemptOutcome::lost:
        return "lost";
    case AttemptOutcome::worker_fault:
        return "worker_fault";
    case AttemptOutcome::banned:
        return "banned";
    case AttemptOutcome::preempted_scheduler:
        return "preempted_by_scheduler";
    case AttemptOutcome::preempted_owner:
        return "preempted_by_owner";
    }
    return "unknown";
}

std::optional<AttemptOutcome> outcome_of(const store::AttemptRecord& a) {
    // The reasons are the coordinator's own words (worker_ops.cpp, scheduling.cpp, coordinator.cpp);
    // tests/core/coordinator/test_metrics.cpp drives each path and checks what it is counted as.
    const auto starts = [&](std::string_view prefix) { return a.reason.rfind(prefix, 0) == 0; };
    switch (a.state) {
    case AttemptState::assigned:
    case AttemptState::running:
        return std::nullopt;
    case AttemptState::succeeded:
        return AttemptOutcome::succeeded;
    case AttemptState::failed:
        return AttemptOutcome::failed;
    case AttemptState::cancelled:
        return AttemptOutcome::cancelled;
    case AttemptState::lost:
        if (starts("worker fault")) {
            return AttemptOutcome::worker_fault;
        }
        return starts("worker banned") ? AttemptOutcome::banned : AttemptOutcome::lost;
    case AttemptState::preempted:
        return detail::preempted_by_owner(a) ? AttemptOutcome::preempted_owner : AttemptOutcome::preempted_scheduler;
    }
    return std::nullopt;
}

void tally_entry(const credits::Entry& e, std::map<std::int64_t, CreditTotals>& teams) {
    switch (e.reason) {
    case credits::EntryReason::grant:
    case credits::EntryReason::adjustment:
    case credits::EntryReason::expiry:
        if (e.credit.kind == credits::AccountKind::team) {
            teams[e.credit.team].granted += e.amount;
        } else {
            teams[e.debit.team].granted -= e.amount;
        }
        break;
    case credits::EntryReason::charge:
        teams[e.credit.team].earned += e.amount;
        teams[e.payer].spent += e.amount;
        break;
    case credits::EntryReason::fee:
        teams[e.payer].spent += e.amount;
        break;
    case credits::EntryReason::check_pay: // earned from the pool, not spent by a team
        teams[e.credit.team].earned += e.amount;
        break;
    case credits::EntryReason::refund:
        // A voided attempt: its provider did not earn it, its team did not spend it.
        if (e.debit.kind != credits::AccountKind::pool_fee) {
            teams[e.debit.team].earned -= e.amount;
        }
        teams[e.payer].spent -= e.amount;
        teams[e.payer].refunded += e.amount;
        break;
    case credits::EntryReason::hold:
    case credits::EntryReason::release:
    case credits::EntryReason::payout: // earned already, when charged
        break;
    }
}

void PoolCounters::count_ended(const store::AttemptRecord& attempt) {
    if (auto o = outcome_of(attempt)) {
        ++attempts[static_cast<std::size_t>(*o)];
        if (attempt.started_at && attempt.ended_at && attempt.gpu_milli > 0) {
            const auto ran_ms = std::max<std::int64_t>(*attempt.ended_at - *attempt.started_at, 0);
            gpu_seconds[static_cast<std::size_t>(*o)] +=
                static_cast<double>(attempt.gpu_milli) / 1000.0 * static_cast<double>(ran_ms) / 1000.0;
        }
    }
}

void PoolCounters::count_job(std::optional<JobState> before, const store::JobRecord& job) {
    const bool was = before && store::is_terminal(*before);
    if (was) {
        --ended_jobs[{job.team.value(), *before}];
    }
    if (store::is_terminal(job.state)) {
        ++ended_jobs[{job.team.value(), job.state}];
    }
}

namespace {

// Adds one to the count of `key` in a vector of rows kept sorted by key.
template <class Row, class Key>
void bump(std::vector<Row>& rows, std::map<Key, std::size_t>& at, const Key& key, Row fresh) {
    auto [it, inserted] = at.try_emplace(key, rows.size());
    if (inserted) {
        rows.push_back(std::move(fresh));
    }
    ++rows[it->second].count;
}

} // namespace

namespace {

// A worker's spot checks (spot_checks.hpp): its record when it has one, and whether it is quarantined.
void count_checks(PoolMetrics& m, const store::WorkerRecord& w, const std::string& presence) {
    if (w.state == store::WorkerState::quarantined) {
        ++m.workers_quarantined;
    }
    if (const auto record = check_record(w); record.checks() > 0 && presence != "banned") {
        m.checked.push_back({w.id.value(), w.name, record.agreed, record.disagreed, verify::reliability(record)});
    }
}

} // namespace

PoolMetrics pool_metrics(const TokenBook& tokens, const WorkerRoster& roster, const JobBook& jobs,
                         const CreditDesk& desk, const PoolCounters& counters, std::int64_t now_ms) {
    PoolMetrics m;
    m.at_ms = now_ms;
    m.attempts = counters.attempts;
    m.attempt_gpu_seconds = counters.gpu_seconds;

    // Live jobs by (state, team, priority), keyed by the enums and the team's id while counting, so
    // that a long queue costs no string per job; the rows are in the order their keys first appear.
    std::map<std::tuple<store::JobState, TeamId, recipe::Priority>, std::size_t> job_at;
    const auto live_job = [&](const store::JobRecord& j) {
        auto [it, inserted] = job_at.try_emplace(std::tuple{j.state, j.team, j.spec.priority}, m.live_jobs.size());
        if (inserted) {
            m.live_jobs.push_back({store::to_string(j.state), tokens.team_name(j.team),
                                   recipe::to_string(j.spec.priority), 0});
        }
        ++m.live_jobs[it->second].count;
    };
    std::map<TeamId, double> oldest_by_team;
    for (JobId id : jobs.queued()) {
        const store::JobRecord& j = jobs.jobs().at(id);
        live_job(j);
        std::int64_t since = j.created_at;
        if (auto prev = jobs.latest_attempt().find(id); prev != jobs.latest_attempt().end()) {
            since = jobs.attempts().at(prev->second).ended_at.value_or(since);
        }
        double& oldest = oldest_by_team[j.team];
        oldest = std::max(oldest, static_cast<double>(m.at_ms - since) / 1000.0);
    }
    for (const auto& [team, oldest] : oldest_by_team) {
        m.oldest_queued_s[tokens.team_name(team)] = oldest;
    }
    std::set<JobId> active_jobs;
    for (AttemptId id : jobs.active()) {
        active_jobs.insert(jobs.attempts().at(id).job);
    }
    for (JobId id : active_jobs) {
        live_job(jobs.jobs().at(id));
    }
    for (const auto& [key, count] : counters.ended_jobs) {
        if (count > 0) {
            m.ended_jobs.push_back({store::to_string(key.second), tokens.team_name(TeamId{key.first}), "", count});
        }
    }

    // GPUs per worker: memory given to active attempts, and how many share each.
    std::map<std::pair<WorkerId, std::int64_t>, std::pair<std::int64_t, std::int64_t>> gpu_use; // milli, attempts
    for (AttemptId id : jobs.active()) {
        const store::AttemptRecord& a = jobs.attempts().at(id);
        if (a.gpu_index >= 0) {
            auto& u = gpu_use[{a.worker, a.gpu_index}];
            u.first += a.gpu_milli;
            u.second += 1;
        }
    }
    std::map<std::pair<std::string, std::string>, std::size_t> worker_at;
    std::map<std::pair<std::string, std::string>, std::size_t> gpu_at;
    std::map<std::string, PoolMetrics::Memory> memory;
    for (const auto& [id, w] : roster.workers()) {
        const std::string state = roster.presence(id, now_ms);
        if (state != "banned" && state != "drained") {
            m.heartbeats.push_back(
                {id.value(), w.record.name, static_cast<double>(m.at_ms - w.record.last_seen_at) / 1000.0});
        }
        count_checks(m, w.record, state);
        std::set<std::string> models;
        const auto& gpus = w.inventory.gpus;
        const bool reports_use = w.gpu_memory_used_mib.size() == gpus.size();
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            const auto& g = gpus[i];
            models.insert(g.model);
            const bool failing =
                std::find(w.unhealthy_gpus.begin(), w.unhealthy_gpus.end(), g.index) != w.unhealthy_gpus.end();
            const std::string gpu_state = state == "online" && failing ? "unhealthy" : state;
            bump(m.gpus, gpu_at, std::pair{g.model, gpu_state}, PoolMetrics::Gpus{g.model, gpu_state, 0});
            if (gpu_state != "online") {
                continue;
            }
            auto& mem = memory[g.model];
            mem.model = g.model;
            mem.offered_mib += g.memory_mib;
            if (auto u = gpu_use.find({id, g.index}); u != gpu_use.end()) {
                mem.allocated_mib += g.memory_mib * u->second.first / 1000;
                mem.busy_gpus += 1;
                mem.gpu_attempts += u->second.second;
            }
            if (reports_use) {
                mem.used_mib += w.gpu_memory_used_mib[i];
                mem.gpus_reporting_use += 1;
            }
        }
        if (models.empty()) {
            models.insert("cpu");
        }
        for (const auto& model : models) {
            bump(m.workers, worker_at, std::pair{model, state}, PoolMetrics::Workers{model, state, 0});
        }
    }
    for (auto& [model, mem] : memory) {
        m.memory.push_back(std::move(mem));
    }

    std::int64_t held = 0;
    for (const auto& [id, t] : tokens.teams()) {
        PoolMetrics::Credits c;
        c.team = t.name;
        if (auto it = counters.credits.find(id.value()); it != counters.credits.end()) {
            c.totals = it->second;
        }
        c.balance = desk.ledger().balance(credits::Account::of_team(id.value()));
        c.held = desk.ledger().held_by_team(id.value());
        held += c.held;
        m.credits.push_back(std::move(c));
    }
    m.ledger_total = desk.ledger().total();
    m.escrow_unaccounted = desk.ledger().balance(credits::Account::escrow()) - held;
    return m;
}

} // namespace gpupool::coordinator
