// WorkerApi: the worker's side of the coordinator's /v1 worker routes (docs/api.md, "Workers").
//
// Every request goes out from the worker; nothing ever connects in. Answers are classified so the
// agent knows what to do next:
//   - ErrorCode::unavailable — the coordinator could not be reached or answered 5xx: keep the
//     work, spool, retry later with backoff;
//   - ErrorCode::conflict — the attempt is no longer current (fencing, 409): drop it;
//   - anything else (400, 401, 403, 404) — a bug or a revoked token: log it, do not retry blindly.
// One WorkerApi per thread (it owns a curl handle). Log chunks and archives are sent as raw bytes.
#pragma once

#include "core/api/outcome.hpp"
#include "core/net/http_client.hpp"
#include "core/recipe/recipe.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

struct AssignmentMsg {
    std::int64_t attempt = 0;
    std::int64_t job = 0;
    std::int64_t attempt_number = 0;
    std::int64_t gpu_index = -1;
    std::int64_t gpu_milli = 0;
    std::int64_t team = 0; // the job's team (0 from a coordinator that does not say)
    std::string team_name; // for the owner's log (printed escaped; empty when not said)
    recipe::JobSpec spec;
    nlohmann::json raw; // the assignment as received (kept in the spool)
};

struct HeartbeatAnswer {
    std::vector<std::int64_t> stop;
    std::int64_t lease_ms = 0;
};

// How an attempt ended, as the worker reports it (one enum for both ends: core/api/outcome.hpp).
using api::Outcome;
using api::to_string;

class WorkerApi {
public:
    WorkerApi(std::string base_url, std::string token, std::string ca_cert = {});

    void set_token(std::string token);

    struct Registration {
        std::int64_t worker_id = 0;
        std::string token;
    };
    Result<Registration> register_worker(const std::string& name, const nlohmann::json& inventory);
    // `inventory` (when not null) tells the coordinator what this machine offers now.
    Result<HeartbeatAnswer> heartbeat(const std::vector<std::int64_t>& running,
                                      const std::vector<std::int64_t>& unhealthy_gpus, bool draining = false,
                                      const nlohmann::json& inventory = nullptr, bool paused = false);
    Result<std::vector<AssignmentMsg>> poll(std::chrono::milliseconds wait);
    Status start(std::int64_t attempt);
    // The job's input archive (GET /v1/attempts/{id}/inputs).
    Result<std::string> inputs(std::int64_t attempt);
    // Appends `data` at `offset`; returns the attempt's stored log length afterwards.
    Result<std::int64_t> append_log(std::int64_t attempt, std::int64_t offset, std::string_view data);
    Status upload_outputs(std::int64_t attempt, std::string_view archive);
    Status complete(std::int64_t attempt, std::optional<int> exit_code, const std::string& reason, Outcome outcome);

private:
    // The body of a 2xx answer; anything else as an Error classified as above.
    Result<std::string> raw(std::string_view method, const std::string& path, std::string_view body,
                            std::optional<std::chrono::milliseconds> timeout = {});
    Result<nlohmann::json> call(std::string_view method, const std::string& path, std::string_view body,
                                std::optional<std::chrono::milliseconds> timeout = {});

    std::string m_base_url;
    std::string m_ca_cert;
    net::HttpClient m_http;
};

// Parses one assignment object from a poll answer. Pure.
Result<AssignmentMsg> parse_assignment(const nlohmann::json& j);

} // namespace gpupool::worker
