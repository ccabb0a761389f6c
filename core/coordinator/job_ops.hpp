// What researchers do with jobs: submit them, retry them, ask about one job or the list, who
// submitted a job and why it waits, read a job's logs and outputs, upload input archives, and
// cancel a job or a sweep; and how an ended attempt moves its job on.
//
// Free functions over the Coordinator's components, not members of it. Reads walk the JobBook
// (job_book.hpp) and change nothing; a submit, retry or cancel stages its records (a cancel through
// the JobBook and the CreditDesk: the attempt's escrow settled, nothing charged for a job cancelled
// before it ran) and commits through Coordinator::commit, the one way the pool's state changes: it
// is durable once it returns. Logs, outputs and input archives are the blob shelf's
// (blob_shelf.hpp). Who
// sees what: admins every job; members their team's, another team's job being reported missing
// (not forbidden: ids are not a side channel); other roles are refused. Each runs on the
// coordinator's thread, as the Coordinator's own methods do.
#pragma once

#include "core/api/retry.hpp"
#include "core/coordinator/views.hpp"
#include "core/store/records.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace gpupool::coordinator {

class Coordinator;

// A team's sweep of jobs, queued in one transaction (members for their team, admins name one).
// Refused, with the field named, unless each job is one the pool can accept (detail::check_jobs)
// and, with credits enforced, the team can pay for the sweep's estimate (credit_ops.hpp); an
// idempotency key the team used before answers that submission again.
Result<SubmitResult> submit(Coordinator& pool, const Principal& who, SubmitRequest request);
// Queues jobs that ended failed or cancelled again (`gpupool retry`, retry.cpp): the named jobs
// (each must be failed or cancelled, else nothing is retried), or a sweep's jobs in the states
// asked (failed by default). They stay the same jobs: the same ids, their earlier attempts kept,
// JobRecord::retries one more and a new run of attempts (retry.max_attempts again). Accepted as
// a new submission of the same jobs would be, by the same checks (check_jobs: inputs still on
// the coordinator, log cap, feasibility) and the same estimate against the team's balance and
// budgets and the caller's own (check_funded), unless `allow_unfunded`; credits are held when an
// attempt is placed, as for any job. Members retry their team's jobs (another team's are not
// found), admins any one team's. An idempotency key already used by the team returns that retry
// again. One transaction.
Result<api::RetryReply> retry(Coordinator& pool, const Principal& who, const api::RetryRequest& request);
Result<store::JobRecord> read_job(const Coordinator& pool, const Principal& who, JobId id);
// The jobs `query` selects (views.hpp: JobQuery), oldest first; a limit costs what it returns (the
// walk starts from the newest).
Result<JobList> list_jobs(const Coordinator& pool, const Principal& who, const JobQuery& query);
// Who submitted the job: the label of the token it came with ("token N" for an unlabelled one).
std::string submitter_of(const Coordinator& pool, JobId job);
// Why a queued job is not running, from the last scheduling pass (empty when it is not queued).
std::string waiting_reason(const Coordinator& pool, JobId id);
// The job's reason as `status` shows it: why a queued job waits, how far an assigned job's model
// weights have come ("fetching weights (3.2 of 14 GB)"), else the stored reason.
std::string shown_reason(const Coordinator& pool, const store::JobRecord& job);
// Cancels a job that has not ended (conflict if it has): its active attempt ends cancelled and is
// settled, or a queued job ends cancelled at once.
Status cancel_job(Coordinator& pool, const Principal& who, JobId id);
// The same for every job of a sweep that has not ended, in one transaction; returns how many.
Result<std::int64_t> cancel_sweep(Coordinator& pool, const Principal& who, SweepId sweep_id);
// Logs of the job's latest attempt (or `attempt`), from `offset`.
Result<LogSlice> read_logs(Coordinator& pool, const Principal& who, JobId id, std::int64_t offset,
                           std::optional<AttemptId> attempt = std::nullopt);
// The outputs archive of the job's latest attempt; an empty archive for a job that succeeded
// without one (its worker sends nothing when the job wrote nothing); not_found with the reason
// otherwise (not run yet, still running, failed or cancelled with none).
Result<std::string> read_output(Coordinator& pool, const Principal& who, JobId id);
// Inputs travel as one tar archive per distinct input set, uploaded before the submission that
// names it (JobSpec::inputs.archive = its SHA-256); workers fetch it for their attempt
// (worker_ops.hpp). An archive belongs to the team that uploaded it (admins name the team) and
// only that team's jobs can use it.
Status put_inputs(Coordinator& pool, const Principal& who, const std::string& sha256_hex, const UploadedFile& file,
                  const std::optional<std::string>& team = std::nullopt);

namespace detail {
// What a submission's jobs (and a retry's) must be to be accepted: inputs uploaded for the team, a
// log cap within the pool's, resources some worker has. Errors name `jobs[i]`.
Status check_jobs(Coordinator& pool, TeamId team, const std::vector<recipe::JobSpec>& jobs);
// The job `who` may see (the rules above), or why not.
Result<const store::JobRecord*> visible_job(const Coordinator& pool, const Principal& who, JobId id);
// Ends `attempt` and moves its job on (JobBook::stage_attempt_end), settling its escrow in the same
// changes (CreditDesk::stage_settlement): charged unless `chargeable` is false, never for a lost
// attempt. Appends to `changes`; nothing is written until they are committed.
void end_attempt(const Coordinator& pool, store::AttemptRecord& attempt, store::AttemptState state,
                 std::optional<std::int64_t> exit_code, const std::string& reason, store::Changes& changes,
                 bool chargeable = true);
} // namespace detail

} // namespace gpupool::coordinator
