// A submission (`POST /v1/jobs`: one job or a whole sweep) and the coordinator's answer, as the
// client builds and reads them and as the service reads and writes them (docs/api.md).
//
// One pair of types on both sides of the wire: the client fills a SubmitRequest and sends
// to_json(); the service validates the body once with submit_request_from_json (every error names
// its field: `max_parallel`, `jobs[3].image`) and hands the request to coordinator::submit (job_ops.hpp) as it
// is. Absent or null members take the defaults below. Value types.
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

struct SubmitRequest {
    std::string source = "api";         // the recipe file's name, for humans
    std::int64_t max_parallel = 0;      // most of the sweep's jobs running at once; 0: no cap
    std::vector<recipe::JobSpec> jobs{};
    std::optional<std::string> team{};  // admins submit for a named team (a member's is their own)
    bool allow_unfunded = false;        // submit even if the estimate exceeds the balance or budget
    // Optional, 1-128 of [A-Za-z0-9_-]: the same key from the same team again returns the sweep
    // it made the first time (a client retrying after a lost answer makes no duplicate).
    std::string idempotency_key{};
};

struct SubmitReply {
    SweepId sweep_id{};
    std::vector<JobId> jobs{}; // in the order of the request's jobs
    bool operator==(const SubmitReply&) const = default;
};

// The body: `source` and `idempotency_key` at most k_max_text_bytes; a `team` that is not
// a string is ignored; `jobs` must be an array of job specs (recipe::job_from_json).
Result<SubmitRequest> submit_request_from_json(const nlohmann::json& body);
// The members left at their defaults (team, allow_unfunded, idempotency_key) are left out.
nlohmann::json to_json(const SubmitRequest& request);

Result<SubmitReply> submit_reply_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SubmitReply& reply);

// The body's "jobs" array as job specs; errors name the job's index (`jobs[3].image`).
Result<std::vector<recipe::JobSpec>> jobs_from_json(const nlohmann::json& body);

} // namespace gpupool::api
