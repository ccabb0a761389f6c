// Retrying ended jobs (`gpupool retry`, POST /v1/jobs/retry): the same jobs queued again for a new
// run of attempts, checked, priced and held to the budgets as a new submission of them would be
// (detail::check_jobs and check_funded, the code paths submit() takes).
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_ops.hpp"

#include <map>
#include <set>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

std::string job_words(JobId id) {
    return "job " + std::to_string(id.value());
}

// Why a job in state `s` cannot be retried (empty: it can).
std::string not_retryable(JobId id, JobState s) {
    const std::string n = std::to_string(id.value());
    switch (s) {
    case JobState::failed:
    case JobState::cancelled:
        return {};
    case JobState::succeeded:
        return job_words(id) + " succeeded: only failed or cancelled jobs are retried (submit its recipe again to " +
               "run it anew)";
    case JobState::queued:
    case JobState::assigned:
    case JobState::running:
        break;
    }
    return job_words(id) + " is " + to_string(s) + ": only failed or cancelled jobs are retried (`gpupool cancel " + n +
           "` first, or wait for it to end: `gpupool wait " + n + "`)";
}

// check_jobs() names the job by its place in the retry (`jobs[2].resources`); say which job it is.
Error name_job(Error e, const std::vector<JobId>& ids) {
    if (e.field.starts_with("jobs[")) {
        const auto close = e.field.find(']');
        const auto i = static_cast<std::size_t>(std::stoll(e.field.substr(5, close - 5)));
        if (i < ids.size()) {
            e.message = job_words(ids[i]) + ": " + e.message;
        }
    }
    return e;
}

// The jobs a retry names (none yet for a sweep: retry() picks them) and their one team.
Result<std::vector<JobId>> retry_selection(const Coordinator& pool, const Principal& who,
                                           const api::RetryRequest& request, TeamId& team) {
    std::vector<JobId> ids;
    if (request.sweep.value() > 0) {
        auto s = pool.job_book().sweeps().find(request.sweep);
        // Another team's sweep is reported as missing, as its jobs are.
        if (s == pool.job_book().sweeps().end() || (who.role != Role::admin && who.team != s->second.team)) {
            return not_found("no sweep " + std::to_string(request.sweep.value()));
        }
        team = s->second.team;
        return ids; // sweep_jobs_to_retry(pool) picks them once the idempotency key is known to be new
    }
    std::set<JobId> seen;
    for (JobId id : request.jobs) {
        auto j = visible_job(pool, who, id);
        if (!j) {
            return j.error();
        }
        if (!seen.insert(id).second) {
            continue;
        }
        if (ids.empty()) {
            team = (*j)->team;
        } else if ((*j)->team != team) {
            return invalid("a retry's jobs are one team's: " + job_words(ids.front()) + " is team `" +
                               pool.tokens().team_name(team) + "`'s, " + job_words(id) + " team `" +
                               pool.tokens().team_name((*j)->team) + "`'s",
                           "jobs");
        }
        ids.push_back(id);
    }
    return ids;
}

// The jobs of a retry's sweep in the end states it asks for (conflict when there are none).
Result<std::vector<JobId>> sweep_jobs_to_retry(const Coordinator& pool, const api::RetryRequest& request) {
    std::set<JobState> states;
    for (const auto& s : request.states) {
        states.insert(s == "cancelled" ? JobState::cancelled : JobState::failed);
    }
    if (states.empty()) {
        states.insert(JobState::failed);
    }
    std::vector<JobId> ids;
    for (const auto& [id, j] : pool.job_book().jobs()) {
        if (j.sweep_id == request.sweep && states.count(j.state) != 0) {
            ids.push_back(id);
        }
    }
    if (ids.empty()) {
        const std::string sweep = std::to_string(request.sweep.value());
        return make_error(ErrorCode::conflict,
                          "sweep " + sweep + " has no " +
                              (states.size() == 2 ? "failed or cancelled" : to_string(*states.begin())) +
                              " jobs to retry (`gpupool jobs --sweep " + sweep + "` lists them)",
                          "sweep");
    }
    return ids;
}

// Whether `ids` may be retried: each failed or cancelled, its inputs still kept, and the lot
// accepted as a submission of the same jobs would be (check_jobs, check_funded).
Status check_retry(Coordinator& pool, const Principal& who, TeamId team, const std::vector<JobId>& ids,
                   bool allow_unfunded) {
    std::vector<recipe::JobSpec> specs;
    std::map<std::string, std::vector<recipe::JobSpec>> by_source; // the sweeps' recipes, for the estimate
    for (JobId id : ids) {
        const JobRecord& j = pool.job_book().jobs().at(id);
        if (auto why = not_retryable(id, j.state); !why.empty()) {
            return make_error(ErrorCode::conflict, why, "jobs");
        }
        if (j.is_check()) {
            return make_error(ErrorCode::conflict,
                              job_words(id) + " is a spot check of attempt " + std::to_string(j.check_of->value()) +
                                  " (docs/evidence.md): the pool runs it once, it is not retried",
                              "jobs");
        }
        // It can still run only if its inputs are still on the coordinator.
        if (const auto& sha = j.spec.inputs.archive; !sha.empty()) {
            auto size = pool.blobs().input_size(team, sha);
            if (!size) {
                return size.error();
            }
            if (!*size) {
                return make_error(ErrorCode::conflict,
                                  job_words(id) + "'s inputs archive (" + sha +
                                      ") is no longer on the coordinator, so it cannot run again; submit its recipe "
                                      "again (`gpupool submit`), which uploads its inputs anew",
                                  "jobs");
            }
        }
        specs.push_back(j.spec);
        by_source[pool.job_book().sweeps().at(j.sweep_id).source].push_back(j.spec);
    }
    if (auto st = check_jobs(pool, team, specs); !st) {
        return name_job(st.error(), ids);
    }
    if (!pool.options().credits.enforce || allow_unfunded) {
        return {};
    }
    // As a submission of the same jobs would be, each sweep's priced with its own recipe's history.
    std::optional<Estimate> est;
    for (const auto& [source, jobs] : by_source) {
        Estimate part = estimate_for(pool, team, source, jobs);
        if (!est) {
            est = std::move(part);
            continue;
        }
        est->total_estimate_micro += part.total_estimate_micro;
        est->total_max_micro += part.total_max_micro;
    }
    return check_funded(pool, who, team, *est, ids.size(), true);
}

} // namespace

Result<api::RetryReply> retry(Coordinator& pool, const Principal& who, const api::RetryRequest& request) {
    if (who.role != Role::admin && who.role != Role::member) {
        return denied("only team members and admins retry jobs");
    }
    if (request.jobs.empty() == (request.sweep.value() == 0)) {
        return invalid("name either jobs or one sweep", "jobs");
    }
    if (request.jobs.size() > k_max_jobs_per_submission) {
        return invalid("a retry names at most " + std::to_string(k_max_jobs_per_submission) + " jobs", "jobs");
    }
    TeamId team;
    auto ids = retry_selection(pool, who, request, team);
    if (!ids) {
        return ids.error();
    }
    const std::string& key = request.idempotency_key;
    if (!key.empty()) {
        if (auto st = check_idempotency_key(key); !st) {
            return st.error();
        }
        // Retried before with this key (the answer was lost): that retry again, nothing new.
        api::RetryReply again;
        for (const auto& [id, j] : pool.job_book().jobs()) {
            if (j.team == team && j.retry_key == key) {
                again.jobs.push_back({id, j.retries});
            }
        }
        if (!again.jobs.empty()) {
            return again;
        }
    }
    if (request.sweep.value() > 0) {
        ids = sweep_jobs_to_retry(pool, request);
        if (!ids) {
            return ids.error();
        }
    }
    if (auto st = check_retry(pool, who, team, *ids, request.allow_unfunded); !st) {
        return st.error();
    }
    const std::int64_t now = pool.now_ms();
    Changes c;
    api::RetryReply reply;
    for (JobId id : *ids) {
        JobRecord j = pool.job_book().jobs().at(id);
        j.retries += 1;
        j.retry_key = key;
        j.state = JobState::queued;
        j.finished_at.reset();
        j.exit_code.reset();
        j.updated_at = now;
        j.reason = "queued again (retry " + std::to_string(j.retries) + ")";
        reply.jobs.push_back({id, j.retries});
        c.jobs.push_back(std::move(j));
    }
    // All of them in one transaction, or none.
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return reply;
}

} // namespace gpupool::coordinator
