// The researchers' views of their jobs, as the service writes them and the client reads them
// (docs/api.md): a job with its attempts (`GET /v1/jobs/{id}`), the list (`GET /v1/jobs`), a slice
// of a job's log (`GET /v1/jobs/{id}/logs`) and the answers to cancelling.
//
// The service fills these from its records and sends to_json(); the client reads them back with
// the *_from_json functions, which treat the bytes as hostile: every member's JSON type is checked
// and an error names the member (`attempt_history[1].started_at`), never an exception. Members a
// coordinator may leave out take the defaults below; those a command prints differently when they
// are missing are std::optional, and to_json leaves them out when unset. Times are Unix
// milliseconds; null on the wire is nullopt here. States are the wire names ("queued", "running",
// "succeeded", ...). Value types.
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::api {

// One run of a job on one worker.
struct AttemptView {
    AttemptId id{};
    WorkerId worker{};
    std::int64_t gpu_index = -1; // -1: CPU only
    std::int64_t gpu_milli = 0;
    std::string state{};
    std::int64_t assigned_at = 0;
    std::optional<std::int64_t> started_at{};
    std::optional<std::int64_t> ended_at{};
    std::optional<std::int64_t> exit_code{};
    std::string reason{};
    std::int64_t price_micro_per_hour = 0;
    std::int64_t cost_micro = 0;
    std::optional<std::int64_t> voided_at{}; // set when an admin voided its result
    std::int64_t retry = 0;                  // the run of its job: 0 as submitted, N after the job's Nth retry
    // Assigned or running as of a backup the pool was restored from, and its worker has not reported
    // since: it may have ended, or never run, after the backup was taken.
    bool unconfirmed = false;
    bool operator==(const AttemptView&) const = default;
};

// A job as `GET /v1/jobs/{id}` shows it. `id` and `state` are required.
struct JobView {
    JobId id{};
    SweepId sweep_id{};
    TeamId team{};
    std::string submitted_by{}; // the label of the token it came with
    std::string name{};
    std::string state{};
    std::int64_t attempts = 0; // attempts started so far, over all its runs
    std::int64_t retries = 0;  // times it was retried after it ended (`gpupool retry`)
    std::int64_t created_at = 0;
    std::int64_t updated_at = 0;
    std::optional<std::int64_t> finished_at{};
    std::optional<std::int64_t> exit_code{};
    std::string reason{};         // how it ended
    std::string waiting_reason{}; // why it waits (queued jobs)
    recipe::JobSpec spec{};
    std::optional<std::int64_t> cost_micro{}; // charged so far, all attempts
    std::int64_t held_micro = 0;              // in escrow for its running attempt
    std::vector<AttemptView> attempt_history{};
    // A spot check (docs/evidence.md): the attempt whose result it runs again; absent otherwise.
    std::optional<std::int64_t> check_of{};
    bool operator==(const JobView&) const = default;
};

// A job as `GET /v1/jobs` lists it. `id` and `state` are required.
struct JobSummary {
    JobId id{};
    SweepId sweep_id{};
    TeamId team{};
    std::optional<std::string> team_name{};
    std::optional<std::string> submitted_by{};
    std::string name{};
    std::int64_t sweep_index = 0;
    std::string state{};
    std::int64_t attempts = 0;
    std::optional<std::int64_t> exit_code{};
    std::string reason{}; // why it waits (queued jobs) or how it ended
    std::int64_t cost_micro = 0;
    std::optional<std::int64_t> check_of{}; // a spot check: the attempt it runs again
    bool operator==(const JobSummary&) const = default;
};

struct JobList {
    std::vector<JobSummary> jobs{};
    bool more = false; // older jobs match too
    bool operator==(const JobList&) const = default;
};

// Bytes of one attempt's log from `offset`. `attempt` 0: the job has not started an attempt.
struct LogSlice {
    AttemptId attempt{};
    std::int64_t offset = 0;
    std::int64_t next_offset = 0; // where the next read starts
    bool finished = false;        // the attempt has ended: no more bytes will come
    std::string data{};
    bool operator==(const LogSlice&) const = default;
};

// `POST /v1/jobs/{id}/cancel`.
struct JobCancelled {
    std::vector<JobId> cancelled{};
    bool operator==(const JobCancelled&) const = default;
};

// `POST /v1/sweeps/{id}/cancel`.
struct SweepCancelled {
    SweepId sweep_id{};
    std::int64_t cancelled = 0; // how many of its jobs were cancelled
    bool operator==(const SweepCancelled&) const = default;
};

// `POST /v1/jobs/wait` {"jobs": [ids], "wait_ms": N}: answered once every job named has ended, or
// when the wait is over (at most the coordinator's longest poll), with each job's state.
struct JobWaitRequest {
    std::vector<JobId> jobs{};
    std::int64_t wait_ms = 0;
    bool operator==(const JobWaitRequest&) const = default;
};
struct JobProgress {
    JobId id{};
    std::string state{};
    std::optional<std::int64_t> exit_code{};
    bool operator==(const JobProgress&) const = default;
};
struct JobWaitReply {
    std::vector<JobProgress> jobs{};
    bool done = false; // every job named has ended
    bool operator==(const JobWaitReply&) const = default;
};

nlohmann::json to_json(const JobWaitRequest& w);
nlohmann::json to_json(const JobWaitReply& w);
Result<JobWaitRequest> job_wait_request_from_json(const nlohmann::json& j);
Result<JobWaitReply> job_wait_reply_from_json(const nlohmann::json& j);

nlohmann::json to_json(const AttemptView& a);
nlohmann::json to_json(const JobView& j);
nlohmann::json to_json(const JobSummary& j);
nlohmann::json to_json(const JobList& list);
nlohmann::json to_json(const LogSlice& slice);
nlohmann::json to_json(const JobCancelled& c);
nlohmann::json to_json(const SweepCancelled& c);

// `field` prefixes the member names in errors.
Result<AttemptView> attempt_view_from_json(const nlohmann::json& j, const std::string& field = "");
Result<JobView> job_view_from_json(const nlohmann::json& j);
Result<JobSummary> job_summary_from_json(const nlohmann::json& j, const std::string& field = "");
Result<JobList> job_list_from_json(const nlohmann::json& j);
Result<LogSlice> log_slice_from_json(const nlohmann::json& j);
Result<JobCancelled> job_cancelled_from_json(const nlohmann::json& j);
Result<SweepCancelled> sweep_cancelled_from_json(const nlohmann::json& j);

} // namespace gpupool::api
