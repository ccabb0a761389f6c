// WorkerApi: the worker's side of the coordinator's /v1 worker routes (docs/api.md, "Workers").
//
// Every request goes out from the worker; nothing ever connects in. Answers are classified so the
// agent knows what to do next:
//   - ErrorCode::unavailable — the coordinator could not be reached or answered 5xx: keep the
//     work, spool, retry later with backoff;
//   - ErrorCode::conflict — the attempt is no longer current (fencing, 409): drop it;
//   - anything else (400, 401, 403, 404) — a bug or a revoked token: log it, do not retry blindly.
// One WorkerApi per thread (it owns a curl handle). The JSON bodies are core/api's wire types; a
// reply that does not read as its type counts as unavailable. Log chunks and archives are sent as
// raw bytes.
#pragma once

#include "core/api/assignment.hpp"
#include "core/api/heartbeat.hpp"
#include "core/api/outcome.hpp"
#include "core/api/worker_protocol.hpp"
#include "core/net/http_client.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

// How an attempt ended, as the worker reports it (one enum for both ends: core/api/outcome.hpp).
using api::Outcome;
using api::to_string;

class WorkerApi {
public:
    WorkerApi(std::string base_url, std::string token, std::string ca_cert = {});

    void set_token(std::string token);

    Result<api::RegistrationReply> register_worker(const api::Registration& registration);
    Result<api::HeartbeatReply> heartbeat(const api::Heartbeat& beat);
    // The worker exits cleanly (POST /v1/workers/leave): the attempts assigned to it and not started,
    // which the coordinator put back in the queue. Answered within `wait` or not at all (unavailable).
    Result<std::vector<AttemptId>> leave(std::chrono::milliseconds wait);
    // `known`: assignments already handed to this worker, not to be answered with again.
    Result<std::vector<api::Assignment>> poll(std::chrono::milliseconds wait, const std::vector<AttemptId>& known = {});
    Status start(AttemptId attempt);
    // The job's input archive (GET /v1/attempts/{id}/inputs).
    Result<std::string> inputs(AttemptId attempt);
    // Appends `data` at `offset`; returns the attempt's stored log length afterwards.
    Result<std::int64_t> append_log(AttemptId attempt, std::int64_t offset, std::string_view data);
    Status upload_outputs(AttemptId attempt, std::string_view archive);
    Status complete(AttemptId attempt, const api::Completion& completion);
    // Several ends in one request (POST /v1/attempts/complete): one answer per end. not_implemented
    // from a coordinator that predates the route (404), from then on: send them one by one.
    Result<std::vector<api::EndAnswer>> complete_many(const std::vector<api::AttemptEnd>& ends);
    // Several starts in one request (POST /v1/attempts/start): one answer per attempt, as above.
    Result<std::vector<api::EndAnswer>> start_many(const std::vector<AttemptId>& attempts);

private:
    // The body of a 2xx answer; anything else as an Error classified as above.
    Result<std::string> raw(std::string_view method, const std::string& path, std::string_view body,
                            std::optional<std::chrono::milliseconds> timeout = {});
    Result<nlohmann::json> call(std::string_view method, const std::string& path, std::string_view body,
                                std::optional<std::chrono::milliseconds> timeout = {});
    // A batch route's answers; not_implemented (and `one_by_one` set) from a coordinator without it.
    Result<std::vector<api::EndAnswer>> batch(const std::string& path, const nlohmann::json& body, bool& one_by_one,
                                              const char* what);

    std::string m_base_url;
    std::string m_ca_cert;
    net::HttpClient m_http;
    bool m_one_by_one = false;        // the coordinator has no batch route for ends
    bool m_starts_one_by_one = false; // nor for starts (it predates that one)
};

} // namespace gpupool::worker
