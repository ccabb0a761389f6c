// A researcher's questions about jobs, and cancelling them: one job, the job list, who submitted a
// job, why it waits, and cancelling a job or a sweep; and how an ended attempt moves its job on.
//
// Free functions over the Coordinator's components, not members of it. Reads walk the JobBook
// (job_book.hpp) and change nothing; a cancel stages through the JobBook and the CreditDesk (the
// attempt's escrow settled, nothing charged for a job cancelled before it ran) and commits through
// Coordinator::commit, the one way the pool's state changes: it is durable once it returns. Who
// sees what: admins every job; members their team's, another team's job being reported missing
// (not forbidden: ids are not a side channel); other roles are refused. Each runs on the
// coordinator's thread, as the Coordinator's own methods do.
#pragma once

#include "core/coordinator/views.hpp"
#include "core/store/records.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace gpupool::coordinator {

class Coordinator;

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

namespace detail {
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
