// Coordinator::worker_earnings: one worker's earnings from the ledger (worker_earnings.hpp).
#include "core/coordinator/worker_earnings.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"

#include <set>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

constexpr std::int64_t k_day = 86'400'000;

// Floor division: times before 1970 still land on the day they fall in.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

} // namespace

std::int64_t utc_day_start_ms(std::int64_t now_ms) {
    return floor_div(now_ms, k_day) * k_day;
}

std::int64_t utc_week_start_ms(std::int64_t now_ms) {
    const std::int64_t day = floor_div(now_ms, k_day);
    // Day 0 (1970-01-01) was a Thursday: Monday is 3 days before it.
    const std::int64_t since_monday = ((day + 3) % 7 + 7) % 7;
    return (day - since_monday) * k_day;
}

Result<WorkerEarnings> Coordinator::worker_earnings(const Principal& who, WorkerId worker) const {
    if (who.role != Role::admin && who.role != Role::worker && who.role != Role::member) {
        return denied("a worker's earnings are read by the worker, its team's members and admins");
    }
    const LiveWorker* live = m_roster.find(worker);
    const bool mine =
        live != nullptr && (who.role == Role::admin || (who.role == Role::worker && who.worker == worker) ||
                            (who.role == Role::member && who.team && *who.team == live->record.team));
    if (!mine) {
        return not_found("no worker " + std::to_string(worker.value()) + " among your team's workers");
    }
    const store::WorkerRecord& w = live->record;
    WorkerEarnings e;
    e.worker = worker;
    e.name = w.name;
    e.team = w.team;
    e.team_name = m_tokens.team_name(w.team);
    const std::int64_t now = m_clock.now_ms();
    e.day_start_ms = utc_day_start_ms(now);
    e.week_start_ms = utc_week_start_ms(now);
    std::set<std::int64_t> earning;
    for (const auto& entry : m_credits.ledger().entries()) {
        const bool charge = entry.reason == credits::EntryReason::charge;
        const bool refund =
            entry.reason == credits::EntryReason::refund && entry.debit.kind != credits::AccountKind::pool_fee;
        if ((!charge && !refund) || entry.attempt == 0) {
            continue;
        }
        const auto a = m_job_book.attempts().find(AttemptId(entry.attempt));
        if (a == m_job_book.attempts().end() || a->second.worker != worker) {
            continue;
        }
        const std::int64_t amount = charge ? entry.amount : -entry.amount;
        e.total_micro += amount;
        e.week_micro += entry.at_ms >= e.week_start_ms ? amount : 0;
        e.today_micro += entry.at_ms >= e.day_start_ms ? amount : 0;
        if (charge) {
            earning.insert(entry.attempt);
        }
    }
    for (const std::int64_t attempt : earning) {
        e.settling_micro += m_credits.ledger().earnings(attempt).settling;
    }
    e.attempts = static_cast<std::int64_t>(earning.size());
    return e;
}

} // namespace gpupool::coordinator
