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

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

class CoordinatorLink {
public:
    virtual ~CoordinatorLink() = default;

    virtual void set_token(std::string token) = 0;
    virtual Result<api::RegistrationReply> register_worker(const api::Registration& registration) = 0;
    virtual Result<api::HeartbeatReply> heartbeat(const api::Heartbeat& beat) = 0;
    // The worker exits cleanly: offline at once, its unstarted attempts back in the queue (returned).
    virtual Result<std::vector<AttemptId>> leave(std::chrono::milliseconds wait) = 0;
    // `known`: assignments this worker has already been handed (so the coordinator, which re-sends
    // an assignment until its start arrives, parks the poll instead of answering with them again).
    virtual Result<std::vector<api::Assignment>> poll(std::chrono::milliseconds wait,
                                                      const std::vector<AttemptId>& known) = 0;
    virtual Status start(AttemptId attempt) = 0;
    virtual Result<std::string> inputs(AttemptId attempt) = 0;
    // Appends `data` at `offset`; returns the attempt's stored log length afterwards.
    virtual Result<std::int64_t> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) = 0;
    virtual Status upload_outputs(AttemptId attempt, std::string_view archive) = 0;
    virtual Status complete(AttemptId attempt, const api::Completion& completion) = 0;
    // Several ends in one request: one answer per end taken or refused (an end missing from the
    // answer goes again later). By default one complete() each, stopping at the first unavailable.
    virtual Result<std::vector<api::EndAnswer>> complete_many(const std::vector<api::AttemptEnd>& ends) {
        std::vector<api::EndAnswer> out;
        for (const auto& e : ends) {
            auto st = complete(e.attempt, e.completion);
            if (!st && st.error().code == ErrorCode::unavailable) {
                if (out.empty()) {
                    return st.error();
                }
                break;
            }
            out.push_back({e.attempt, st ? std::nullopt : std::optional<Error>(st.error())});
        }
        return out;
    }
    // Several starts in one request, answered as complete_many. By default one start() each.
    virtual Result<std::vector<api::EndAnswer>> start_many(const std::vector<AttemptId>& attempts) {
        std::vector<api::EndAnswer> out;
        for (AttemptId id : attempts) {
            auto st = start(id);
            if (!st && st.error().code == ErrorCode::unavailable) {
                if (out.empty()) {
                    return st.error();
                }
                break;
            }
            out.push_back({id, st ? std::nullopt : std::optional<Error>(st.error())});
        }
        return out;
    }
};

using LinkFactory = std::function<std::unique_ptr<CoordinatorLink>(const std::string& token)>;

// The real link: WorkerApi over HTTP(S).
class HttpCoordinatorLink final : public CoordinatorLink {
public:
    HttpCoordinatorLink(std::string base_url, std::string token, std::string ca_cert)
        : m_api(std::move(base_url), std::move(token), std::move(ca_cert)) {}

    void set_token(std::string token) override { m_api.set_token(std::move(token)); }
    Result<api::RegistrationReply> register_worker(const api::Registration& registration) override {
        return m_api.register_worker(registration);
    }
    Result<api::HeartbeatReply> heartbeat(const api::Heartbeat& beat) override { return m_api.heartbeat(beat); }
    Result<std::vector<AttemptId>> leave(std::chrono::milliseconds wait) override { return m_api.leave(wait); }
    Result<std::vector<api::Assignment>> poll(std::chrono::milliseconds wait,
                                              const std::vector<AttemptId>& known) override {
        return m_api.poll(wait, known);
    }
    Status start(AttemptId attempt) override { return m_api.start(attempt); }
    Result<std::string> inputs(AttemptId attempt) override { return m_api.inputs(attempt); }
    Result<std::int64_t> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) override {
        return m_api.append_log(attempt, offset, data);
    }
    Status upload_outputs(AttemptId attempt, std::string_view archive) override {
        return m_api.upload_outputs(attempt, archive);
    }
    Status complete(AttemptId attempt, const api::Completion& completion) override {
        return m_api.complete(attempt, completion);
    }
    Result<std::vector<api::EndAnswer>> complete_many(const std::vector<api::AttemptEnd>& ends) override {
        auto answers = m_api.complete_many(ends);
        if (!answers && answers.error().code == ErrorCode::not_implemented) {
            return CoordinatorLink::complete_many(ends); // one by one
        }
        return answers;
    }

    Result<std::vector<api::EndAnswer>> start_many(const std::vector<AttemptId>& attempts) override {
        auto answers = m_api.start_many(attempts);
        if (!answers && answers.error().code == ErrorCode::not_implemented) {
            return CoordinatorLink::start_many(attempts); // one by one
        }
        return answers;
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
