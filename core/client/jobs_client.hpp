// JobsClient: the researcher's jobs on the coordinator (submit, show, list, cancel, retry, logs, outputs)
// in the wire types of core/api/, over an ApiClient.
//
// Every answer is read with the api/ types' from_json, so a coordinator's bytes that are not what
// this client expects give an Error naming the member (ErrorCode::internal), never an exception;
// errors of the request itself are ApiClient's. Query strings are built with net::with_query (every
// value percent-encoded). Holds a reference to the ApiClient, which must outlive it; one per thread.
#pragma once

#include "core/api/jobs.hpp"
#include "core/api/retry.hpp"
#include "core/api/submit.hpp"
#include "core/client/api_client.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace gpupool::client {

// Which jobs `jobs()` lists (`GET /v1/jobs`); unset filters are left out of the query.
struct JobsQuery {
    std::string state{};             // "queued", "running", ...; empty: any
    SweepId sweep{};                 // > 0: only this sweep's jobs
    std::int64_t limit = 0;          // > 0: the newest `limit`
    bool all_teams = false;          // admins
    std::string submitted_by{};      // tokens of this label
    bool mine = false;               // the token in use
};

class JobsClient {
public:
    explicit JobsClient(ApiClient& api) : m_api(api) {}

    Result<api::SubmitReply> submit(const api::SubmitRequest& request);
    Result<api::JobView> job(JobId id);
    // Each job's state once they have all ended, or when `wait` is over (POST /v1/jobs/wait).
    Result<api::JobWaitReply> wait(const std::vector<JobId>& ids, std::chrono::milliseconds wait);
    Result<api::JobList> jobs(const JobsQuery& query = {});
    Result<api::JobCancelled> cancel_job(JobId id);
    Result<api::SweepCancelled> cancel_sweep(SweepId sweep);
    // Failed or cancelled jobs queued again (POST /v1/jobs/retry).
    Result<api::RetryReply> retry(const api::RetryRequest& request);
    // The job's latest attempt's log (or `attempt`'s) from `offset`.
    Result<api::LogSlice> logs(JobId id, std::int64_t offset, std::optional<AttemptId> attempt = std::nullopt);
    // The job's outputs archive (tar), as it came.
    Result<std::string> outputs(JobId id);
    // The manifest of the job's latest attempt (or `attempt`'s): docs/evidence.md. A JSON object whose
    // members the caller reads as it needs (it is for people and for `gpupool diff`).
    Result<nlohmann::json> manifest(JobId id, std::optional<AttemptId> attempt = std::nullopt);

private:
    ApiClient& m_api;
};

} // namespace gpupool::client
