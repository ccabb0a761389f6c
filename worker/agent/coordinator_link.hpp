// CoordinatorLink: the agent's one way to the coordinator, so that its logic (deliveries, backoff,
// fencing, stop orders) is tested against a fake without a network, and the real one is WorkerApi.
//
// Contract: the calls and the classification of their failures are WorkerApi's (worker_api.hpp):
// ErrorCode::unavailable — unreachable or 5xx: keep the work and retry later; ErrorCode::conflict —
// the attempt is no longer current: drop it; anything else — log it, do not retry blindly.
// One link per thread (the real one owns a curl handle); LinkFactory makes one for each thread that
// needs one (the agent thread and the poll thread), already holding `token`.
#pragma once

#include "worker/agent/worker_api.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

class CoordinatorLink {
public:
    virtual ~CoordinatorLink() = default;

    virtual void set_token(std::string token) = 0;
    virtual Result<WorkerApi::Registration> register_worker(const std::string& name, const nlohmann::json& inventory) = 0;
    // `inventory` (when not null) tells the coordinator what this machine offers now.
    virtual Result<HeartbeatAnswer> heartbeat(const std::vector<std::int64_t>& running,
                                              const std::vector<std::int64_t>& unhealthy_gpus, bool draining,
                                              const nlohmann::json& inventory, bool paused) = 0;
    virtual Result<std::vector<AssignmentMsg>> poll(std::chrono::milliseconds wait) = 0;
    virtual Status start(std::int64_t attempt) = 0;
    virtual Result<std::string> inputs(std::int64_t attempt) = 0;
    // Appends `data` at `offset`; returns the attempt's stored log length afterwards.
    virtual Result<std::int64_t> append_log(std::int64_t attempt, std::int64_t offset, std::string_view data) = 0;
    virtual Status upload_outputs(std::int64_t attempt, std::string_view archive) = 0;
    virtual Status complete(std::int64_t attempt, std::optional<int> exit_code, const std::string& reason,
                            Outcome outcome) = 0;
};

using LinkFactory = std::function<std::unique_ptr<CoordinatorLink>(const std::string& token)>;

// The real link: WorkerApi over HTTP(S).
class HttpCoordinatorLink final : public CoordinatorLink {
public:
    HttpCoordinatorLink(std::string base_url, std::string token, std::string ca_cert)
        : m_api(std::move(base_url), std::move(token), std::move(ca_cert)) {}

    void set_token(std::string token) override { m_api.set_token(std::move(token)); }
    Result<WorkerApi::Registration> register_worker(const std::string& name, const nlohmann::json& inventory) override {
        return m_api.register_worker(name, inventory);
    }
    Result<HeartbeatAnswer> heartbeat(const std::vector<std::int64_t>& running,
                                      const std::vector<std::int64_t>& unhealthy_gpus, bool draining,
                                      const nlohmann::json& inventory, bool paused) override {
        return m_api.heartbeat(running, unhealthy_gpus, draining, inventory, paused);
    }
    Result<std::vector<AssignmentMsg>> poll(std::chrono::milliseconds wait) override { return m_api.poll(wait); }
    Status start(std::int64_t attempt) override { return m_api.start(attempt); }
    Result<std::string> inputs(std::int64_t attempt) override { return m_api.inputs(attempt); }
    Result<std::int64_t> append_log(std::int64_t attempt, std::int64_t offset, std::string_view data) override {
        return m_api.append_log(attempt, offset, data);
    }
    Status upload_outputs(std::int64_t attempt, std::string_view archive) override {
        return m_api.upload_outputs(attempt, archive);
    }
    Status complete(std::int64_t attempt, std::optional<int> exit_code, const std::string& reason,
                    Outcome outcome) override {
        return m_api.complete(attempt, exit_code, reason, outcome);
    }

private:
    WorkerApi m_api;
};

// Makes HttpCoordinatorLinks to `base_url`.
inline LinkFactory http_links(std::string base_url, std::string ca_cert) {
    return [base_url = std::move(base_url), ca_cert = std::move(ca_cert)](const std::string& token) {
        return std::unique_ptr<CoordinatorLink>(std::make_unique<HttpCoordinatorLink>(base_url, token, ca_cert));
    };
}

} // namespace gpupool::worker
