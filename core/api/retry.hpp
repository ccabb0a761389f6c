// A retry (`POST /v1/jobs/retry`): jobs that ended failed or cancelled run again, as the same jobs,
// and the coordinator's answer, as the client builds and reads them and as the service reads and
// writes them (docs/api.md).
//
// A request names either jobs (`jobs`: ids, each failed or cancelled) or one sweep (`sweep`) with
// the end states whose jobs run again (`states`: "failed", "cancelled"; absent or empty: failed).
// retry_request_from_json checks the shape only (every error names its field); what the jobs are
// and whether the team can pay is coordinator::retry's (job_ops.hpp). Absent or null members take the defaults
// below. Value types.
#pragma once

#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::api {

struct RetryRequest {
    std::vector<JobId> jobs{};         // these jobs, or
    SweepId sweep{};                   // > 0: this sweep's jobs that ended in one of `states`
    std::vector<std::string> states{}; // with `sweep`: "failed", "cancelled"; empty: "failed"
    bool allow_unfunded = false;       // retry even if the estimate exceeds the balance or budget
    // Optional, 1-128 of [A-Za-z0-9_-]: the same key from the same team again returns the retry it
    // made the first time (a client retrying after a lost answer queues nothing twice).
    std::string idempotency_key{};
    bool operator==(const RetryRequest&) const = default;
};

// One job queued again: its id and which retry of it this is (1 for the first).
struct RetriedJob {
    JobId id{};
    std::int64_t retry = 0;
    bool operator==(const RetriedJob&) const = default;
};

struct RetryReply {
    std::vector<RetriedJob> jobs{}; // ascending ids
    bool operator==(const RetryReply&) const = default;
};

// The body: `jobs` an array of positive ids, at most a submission's; `sweep` a positive id; exactly
// one of the two; `states` strings among "failed" and "cancelled".
Result<RetryRequest> retry_request_from_json(const nlohmann::json& body);
// The members left at their defaults are left out.
nlohmann::json to_json(const RetryRequest& request);

Result<RetryReply> retry_reply_from_json(const nlohmann::json& j);
nlohmann::json to_json(const RetryReply& reply);

} // namespace gpupool::api
