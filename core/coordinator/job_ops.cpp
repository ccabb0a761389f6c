// A researcher's questions about jobs, and cancelling them (job_ops.hpp); how an ended attempt
// moves its job on (detail::end_attempt).
#include "core/coordinator/job_ops.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

// Cancels job `id` (not ended) in `changes`: its active attempt ends cancelled (and is settled), or
// the job itself ends cancelled when none is running.
void stage_cancel(const Coordinator& pool, JobId id, const std::string& reason, Changes& c) {
    const JobBook& book = pool.job_book();
    auto latest = book.latest_attempt().find(id);
    if (latest != book.latest_attempt().end() && is_active(book.attempts().at(latest->second).state)) {
        AttemptRecord a = book.attempts().at(latest->second);
        end_attempt(pool, a, AttemptState::cancelled, std::nullopt, reason, c);
        return;
    }
    JobRecord job = book.jobs().at(id);
    job.state = JobState::cancelled;
    job.reason = reason;
    job.updated_at = job.finished_at.emplace(pool.now_ms());
    c.jobs.push_back(std::move(job));
}

} // namespace

Result<const JobRecord*> detail::visible_job(const Coordinator& pool, const Principal& who, JobId id) {
    auto it = pool.job_book().jobs().find(id);
    // A job of another team is reported as missing, not forbidden: ids are not a side channel.
    if (it == pool.job_book().jobs().end() ||
        (who.role != Role::admin && !(who.role == Role::member && who.team == it->second.team))) {
        if (who.role != Role::admin && who.role != Role::member) {
            return denied("only team members and admins read jobs");
        }
        return not_found("no job " + std::to_string(id.value()));
    }
    return &it->second;
}

Result<JobRecord> read_job(const Coordinator& pool, const Principal& who, JobId id) {
    auto j = visible_job(pool, who, id);
    if (!j) {
        return j.error();
    }
    return **j;
}

Result<JobList> list_jobs(const Coordinator& pool, const Principal& who, const JobQuery& q) {
    if (who.role != Role::admin && who.role != Role::member) {
        return denied("only team members and admins list jobs");
    }
    if (q.all_teams && who.role != Role::admin) {
        return denied("only admins list the jobs of all teams");
    }
    auto matches = [&](const JobRecord& j) {
        if (q.state && j.state != *q.state) {
            return false;
        }
        if (q.sweep && j.sweep_id != *q.sweep) {
            return false;
        }
        if (q.submitter_token && pool.job_book().sweeps().at(j.sweep_id).submitter_token != *q.submitter_token) {
            return false;
        }
        if (q.submitter_label && submitter_of(pool, j.id) != *q.submitter_label) {
            return false;
        }
        if (!q.all_teams && who.team != j.team && who.role != Role::admin) {
            return false;
        }
        return !(!q.all_teams && who.role == Role::admin && who.team && who.team != j.team);
    };
    // Newest first, so that a limit costs what it returns (until `more` finds one older match).
    JobList out;
    auto end = q.before ? pool.job_book().jobs().lower_bound(*q.before) : pool.job_book().jobs().end();
    for (auto it = std::make_reverse_iterator(end); it != pool.job_book().jobs().rend(); ++it) {
        if (!matches(it->second)) {
            continue;
        }
        if (q.limit > 0 && out.jobs.size() == q.limit) {
            out.more = true;
            break;
        }
        out.jobs.push_back(it->second);
    }
    std::reverse(out.jobs.begin(), out.jobs.end());
    return out;
}

std::string submitter_of(const Coordinator& pool, JobId job) {
    return pool.tokens().token_name(
        pool.job_book().sweeps().at(pool.job_book().jobs().at(job).sweep_id).submitter_token);
}

void detail::end_attempt(const Coordinator& pool, AttemptRecord& attempt, AttemptState state,
                         std::optional<std::int64_t> exit_code, const std::string& reason, Changes& changes,
                         bool chargeable) {
    const std::int64_t now = pool.now_ms();
    const std::int64_t runtime_ms = attempt.started_at ? now - *attempt.started_at : 0;
    pool.job_book().stage_attempt_end(attempt, state, exit_code, reason, now, changes);
    // Settle the escrow in the same transaction as the state change; a spot check has none: the
    // pool pays its provider.
    const JobRecord& job = pool.job_book().jobs().at(attempt.job);
    const TeamId provider = pool.roster().at(attempt.worker).record.team;
    const bool charged = chargeable && state != AttemptState::lost;
    if (job.is_check()) {
        pool.credit_desk().stage_check_pay(attempt, job.team, provider, charged, runtime_ms,
                                           job.spec.resources.max_runtime_s * 1000, now, changes);
        return;
    }
    pool.credit_desk().stage_settlement(attempt, job.team, provider, charged, runtime_ms, now, changes);
}

Status cancel_job(Coordinator& pool, const Principal& who, JobId id) {
    auto j = visible_job(pool, who, id);
    if (!j) {
        return j.error();
    }
    const JobRecord& job = **j;
    if (is_terminal(job.state)) {
        return make_error(ErrorCode::conflict,
                          "job " + std::to_string(id.value()) + " has already " + to_string(job.state));
    }
    if (job.is_check() && who.role != Role::admin) {
        return make_error(ErrorCode::forbidden,
                          "job " + std::to_string(id.value()) + " is the pool's spot check of attempt " +
                              std::to_string(job.check_of->value()) + " (docs/evidence.md): only an admin cancels it");
    }
    Changes c;
    stage_cancel(pool, id, "cancelled by user", c);
    return pool.commit(c);
}

Result<std::int64_t> cancel_sweep(Coordinator& pool, const Principal& who, SweepId sweep_id) {
    auto s = pool.job_book().sweeps().find(sweep_id);
    if (s == pool.job_book().sweeps().end() || (who.role != Role::admin && who.team != s->second.team) ||
        (who.role != Role::admin && who.role != Role::member)) {
        if (who.role != Role::admin && who.role != Role::member) {
            return denied("only team members and admins cancel sweeps");
        }
        return not_found("no sweep " + std::to_string(sweep_id.value()));
    }
    std::vector<JobId> ids;
    for (const auto& [id, j] : pool.job_book().jobs()) {
        if (j.sweep_id == sweep_id && !is_terminal(j.state)) {
            if (j.is_check() && who.role != Role::admin) {
                return make_error(ErrorCode::forbidden, "sweep " + std::to_string(sweep_id.value()) +
                                                            " is the pool's spot check (docs/evidence.md): only an "
                                                            "admin cancels it");
            }
            ids.push_back(id);
        }
    }
    Changes c;
    for (JobId id : ids) {
        stage_cancel(pool, id, "sweep cancelled by user", c);
    }
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return static_cast<std::int64_t>(ids.size());
}

std::string shown_reason(const Coordinator& pool, const JobRecord& j) {
    if (j.state == JobState::queued) {
        return waiting_reason(pool, j.id);
    }
    if (j.state == JobState::assigned) {
        if (auto latest = pool.job_book().latest_attempt().find(j.id);
            latest != pool.job_book().latest_attempt().end()) {
            const AttemptRecord& a = pool.job_book().attempts().at(latest->second);
            if (const api::FetchProgress* f = pool.roster().fetching(a.worker, a.id); f != nullptr) {
                const auto gb = [](std::int64_t bytes) {
                    char buf[32];
                    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1e9);
                    return std::string(buf);
                };
                return "fetching weights (" + gb(f->done_bytes) + " of " +
                       (f->total_bytes > 0 ? gb(f->total_bytes) : std::string("?")) + " GB)";
            }
        }
    }
    return j.reason;
}

std::string waiting_reason(const Coordinator& pool, JobId id) {
    auto j = pool.job_book().jobs().find(id);
    if (j == pool.job_book().jobs().end() || j->second.state != JobState::queued) {
        return {};
    }
    auto it = pool.waiting().find(id);
    return it == pool.waiting().end() ? std::string(k_waiting_for_pass) : it->second;
}

} // namespace gpupool::coordinator
