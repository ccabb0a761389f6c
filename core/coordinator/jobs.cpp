// Researchers' jobs coming in and their bytes going out (job_ops.hpp): submit, logs, outputs and
// input archives. The job views and cancels are job_ops.cpp; retries retry.cpp.
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>
#include <iterator>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace detail {

Status check_jobs(Coordinator& pool, TeamId team, const std::vector<recipe::JobSpec>& jobs) {
    ByResources<std::optional<std::string>> infeasible; // one walk of the GPU kinds per distinct request
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (const auto& sha = jobs[i].inputs.archive; !sha.empty()) {
            auto size = pool.blobs().input_size(team, sha);
            if (!size) {
                return size.error();
            }
            if (!*size) {
                return invalid("no inputs with digest " + sha + " were uploaded for team `" +
                                   pool.tokens().teams().at(team).name +
                                   "`; upload the archive first (PUT /v1/inputs/" + sha + ")",
                               "jobs[" + std::to_string(i) + "].inputs.archive");
            }
        }
        if (const std::int64_t limit = pool.options().max_log_limit_bytes;
            limit > 0 && jobs[i].logs.max_size_mib * 1024 * 1024 > limit) {
            return invalid("job `" + jobs[i].name + "` asks to keep " + std::to_string(jobs[i].logs.max_size_mib) +
                               " MiB of log per attempt; this pool keeps at most " +
                               std::to_string(limit / (1024 * 1024)) + " MiB (its operators set --max-log-limit-mib)",
                           "jobs[" + std::to_string(i) + "].logs.max_size");
        }
        const auto& spec = jobs[i];
        if (const auto& why =
                infeasible.get(spec.resources, [&] { return pool.roster().infeasible_reason(spec.resources); })) {
            Error e =
                make_error(ErrorCode::invalid_input, "job `" + jobs[i].name + "` can never run on this pool: " + *why,
                           "jobs[" + std::to_string(i) + "].resources");
            return e;
        }
    }
    return {};
}

} // namespace detail

Result<SubmitResult> submit(Coordinator& pool, const Principal& who, SubmitRequest request) {
    std::optional<TeamId> team;
    if (who.role == Role::member) {
        team = who.team;
    } else if (who.role == Role::admin) {
        if (!request.team) {
            return invalid("admins submit for a team: set `team`", "team");
        }
        auto named = pool.tokens().team_named(*request.team);
        if (!named) {
            return named.error();
        }
        team = *named;
    } else {
        return denied("only team members and admins submit jobs");
    }
    if (const auto& key = request.idempotency_key; !key.empty()) {
        if (auto st = check_idempotency_key(key); !st) {
            return st.error();
        }
        if (auto it = pool.job_book().sweep_by_key().find({*team, key}); it != pool.job_book().sweep_by_key().end()) {
            // Submitted before (the answer was lost): the same sweep again, nothing new.
            SubmitResult again;
            again.sweep_id = it->second;
            for (const auto& [id, j] : pool.job_book().jobs()) {
                if (j.sweep_id == it->second) {
                    again.jobs.push_back(id);
                }
            }
            return again;
        }
    }
    if (request.jobs.empty()) {
        return invalid("a submission needs at least one job", "jobs");
    }
    if (request.jobs.size() > k_max_jobs_per_submission) {
        return invalid("a submission has at most " + std::to_string(k_max_jobs_per_submission) + " jobs, got " +
                           std::to_string(request.jobs.size()),
                       "jobs");
    }
    if (request.max_parallel < 0) {
        return invalid("must be 0 (no limit) or more", "max_parallel");
    }
    if (auto st = check_jobs(pool, *team, request.jobs); !st) {
        return st.error();
    }
    if (pool.options().credits.enforce && !request.allow_unfunded) {
        const Estimate est = estimate_for(pool, *team, request.source, request.jobs);
        if (auto st = check_funded(pool, who, *team, est, request.jobs.size(), false); !st) {
            return st.error();
        }
    }
    auto sweep_id = pool.take_ids(store::IdKind::sweep, 1);
    if (!sweep_id) {
        return sweep_id.error();
    }
    auto first_job = pool.take_ids(store::IdKind::job, static_cast<std::int64_t>(request.jobs.size()));
    if (!first_job) {
        return first_job.error();
    }
    const std::int64_t now = pool.now_ms();
    Changes c;
    SweepRecord sweep{SweepId(*sweep_id), *team, who.token_id, request.source,
                      static_cast<std::int64_t>(request.jobs.size()), request.max_parallel, now,
                      request.idempotency_key};
    c.sweeps.push_back(sweep);
    SubmitResult result;
    result.sweep_id = sweep.id;
    std::int64_t next_job = *first_job;
    for (auto& spec : request.jobs) {
        JobRecord j;
        j.id = JobId(next_job++);
        j.sweep_id = sweep.id;
        j.team = *team;
        j.spec = std::move(spec);
        j.created_at = j.updated_at = now;
        j.reason = "queued";
        result.jobs.push_back(j.id);
        c.jobs.push_back(std::move(j));
    }
    // All N jobs in one transaction, or none.
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return result;
}

Result<LogSlice> read_logs(Coordinator& pool, const Principal& who, JobId id, std::int64_t offset,
                           std::optional<AttemptId> attempt) {
    auto j = visible_job(pool, who, id);
    if (!j) {
        return j.error();
    }
    AttemptId aid;
    if (attempt) {
        auto it = pool.job_book().attempts().find(*attempt);
        if (it == pool.job_book().attempts().end() || it->second.job != id) {
            return not_found("job " + std::to_string(id.value()) + " has no attempt " + std::to_string(attempt->value()));
        }
        aid = *attempt;
    } else {
        auto latest = pool.job_book().latest_attempt().find(id);
        if (latest == pool.job_book().latest_attempt().end()) {
            return LogSlice{AttemptId(0), {}, 0, is_terminal((*j)->state)};
        }
        aid = latest->second;
    }
    if (offset < 0) {
        return invalid("must be 0 or more", "offset");
    }
    constexpr std::int64_t k_max_slice = 1 << 20;
    auto read = pool.blobs().read_log(aid, offset, k_max_slice);
    if (!read) {
        return read.error();
    }
    const std::int64_t from = read->from;
    LogSlice s;
    s.attempt = aid;
    s.next_offset = from + static_cast<std::int64_t>(read->data.size());
    if (from > offset) {
        const std::int64_t cap = log_cap(pool.job_book().jobs().at(pool.job_book().attempts().at(aid).job).spec,
                                         pool.options().max_log_bytes);
        s.data = "[gpupool: bytes " + std::to_string(offset) + " to " + std::to_string(from) +
                 " of this log were dropped: the pool keeps the first " + std::to_string(log_head_bytes(cap)) +
                 " bytes and the last " + std::to_string(cap - log_head_bytes(cap)) +
                 " bytes of each attempt's log (a recipe can keep more: [logs] max_size)]\n";
    }
    s.data += read->data;
    s.finished = !is_active(pool.job_book().attempts().at(aid).state) && read->length && s.next_offset >= *read->length;
    return s;
}

Result<std::string> read_output(Coordinator& pool, const Principal& who, JobId id) {
    auto j = visible_job(pool, who, id);
    if (!j) {
        return j.error();
    }
    const JobRecord& job = **j;
    const std::string name = "job " + std::to_string(id.value());
    auto latest = pool.job_book().latest_attempt().find(id);
    if (latest == pool.job_book().latest_attempt().end()) {
        if (job.state == JobState::cancelled) {
            return not_found(name + " was cancelled before it ran: it has no outputs");
        }
        const std::string why = waiting_reason(pool, id);
        return not_found(name + " has not run yet" + (why.empty() ? std::string() : ": " + why));
    }
    if (const AttemptRecord& a = pool.job_book().attempts().at(latest->second); a.voided_at) {
        return make_error(ErrorCode::conflict, "the outputs of job " + std::to_string(id.value()) + " came from attempt " +
                                                   std::to_string(a.id.value()) + " on worker " +
                                                   std::to_string(a.worker.value()) +
                                                   ", whose results an admin voided; the job runs again");
    }
    auto out = pool.blobs().output(latest->second);
    if (!out) {
        return out.error();
    }
    if (!*out) {
        switch (job.state) {
        case JobState::queued:
        case JobState::assigned:
        case JobState::running:
            return not_found(name + " is " + to_string(job.state) + ": its outputs come back when it ends (`gpupool wait " +
                             std::to_string(id.value()) + "`)");
        case JobState::succeeded:
            // A worker uploads nothing when the job wrote no outputs (a failed upload fails the
            // job): the empty archive, two 512-byte zero blocks, which is what such an upload held.
            return std::string(1024, '\0');
        case JobState::failed:
            return not_found(name + " failed (" + job.reason + ") and no outputs came back");
        case JobState::cancelled:
            return not_found(name + " was cancelled (" + job.reason + ") and no outputs came back");
        }
    }
    return std::move(**out);
}

Status put_inputs(Coordinator& pool, const Principal& who, const std::string& sha, const UploadedFile& file,
                  const std::optional<std::string>& team_name) {
    std::optional<TeamId> team;
    if (who.role == Role::member) {
        team = who.team;
    } else if (who.role == Role::admin) {
        if (!team_name) {
            return invalid("admins name the team the inputs are for: ?team=NAME", "team");
        }
        auto t = pool.tokens().team_named(*team_name);
        if (!t) {
            return t.error();
        }
        team = *t;
    } else {
        return denied("only team members and admins upload inputs");
    }
    if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return invalid("must be the lowercase hex SHA-256 of the body", "sha256");
    }
    if (file.size > pool.blobs().max_blob_bytes()) {
        return invalid("the inputs archive is " + std::to_string(file.size) + " bytes, over the pool's limit of " +
                           std::to_string(pool.blobs().max_blob_bytes()),
                       "inputs");
    }
    if (file.sha256_hex != sha) {
        return invalid("the body's SHA-256 is " + file.sha256_hex + ", not the digest in the path", "sha256");
    }
    return pool.blobs().put_input(*team, sha, file.path, pool.now_ms());
}

} // namespace gpupool::coordinator
