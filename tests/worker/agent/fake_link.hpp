// FakeCoordinator: a CoordinatorLink's far side held in memory — what the worker sent (start
// reports, log bytes by offset, outputs, completions, heartbeats) and what it answers (assignments,
// stop orders, refusals), so delivery and the agent are tested without HTTP and without waiting.
// links() makes the per-thread FakeLinks the agent asks for. Thread-safe.
#pragma once

#include "worker/agent/coordinator_link.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpupool::test {

class FakeCoordinator {
public:
    struct Completion {
        std::optional<int> exit_code{};
        std::string reason{};
        worker::Outcome outcome = worker::Outcome::exited;
    };
    struct Beat {
        std::vector<std::int64_t> running{};
        std::vector<std::int64_t> unhealthy_gpus{};
        bool draining = false;
        bool with_inventory = false;
        bool paused = false;
    };

    // ---- the link's calls ----
    Result<worker::WorkerApi::Registration> register_worker() {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(0)) {
            return *e;
        }
        return worker::WorkerApi::Registration{7, "worker-token"};
    }
    Result<worker::HeartbeatAnswer> heartbeat(const Beat& beat) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(0)) {
            return *e;
        }
        m_beats.push_back(beat);
        worker::HeartbeatAnswer a;
        a.stop.swap(m_stop);
        a.lease_ms = 30'000;
        return a;
    }
    Result<std::vector<worker::AssignmentMsg>> poll() {
        std::lock_guard lock(m_mu);
        ++m_polls;
        if (auto e = refusal(0)) {
            return *e;
        }
        std::vector<worker::AssignmentMsg> out;
        out.swap(m_assignments);
        return out;
    }
    Status start(std::int64_t attempt) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(attempt)) {
            return *e;
        }
        m_started.insert(attempt);
        return {};
    }
    Result<std::int64_t> append_log(std::int64_t attempt, std::int64_t offset, std::string_view data) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(attempt)) {
            return *e;
        }
        auto& log = m_logs[attempt];
        if (offset <= static_cast<std::int64_t>(log.size())) {
            log.resize(static_cast<std::size_t>(offset));
            log += data;
        }
        ++m_chunks;
        return static_cast<std::int64_t>(log.size());
    }
    Status upload_outputs(std::int64_t attempt, std::string_view archive) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(attempt)) {
            return *e;
        }
        m_outputs[attempt] = std::string(archive);
        return {};
    }
    Status complete(std::int64_t attempt, std::optional<int> exit_code, const std::string& reason,
                    worker::Outcome outcome) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(attempt)) {
            return *e;
        }
        m_completed[attempt] = {exit_code, reason, outcome};
        return {};
    }

    // ---- test controls ----
    // Every call fails with `code` (unavailable: the coordinator is away) until cleared (nullopt).
    void fail_all(std::optional<ErrorCode> code) {
        std::lock_guard lock(m_mu);
        m_fail_all = code;
    }
    // Calls about this attempt are refused with 409.
    void conflict(std::int64_t attempt) {
        std::lock_guard lock(m_mu);
        m_conflicts.insert(attempt);
    }
    void order_stop(std::int64_t attempt) {
        std::lock_guard lock(m_mu);
        m_stop.push_back(attempt);
    }
    void assign(worker::AssignmentMsg a) {
        std::lock_guard lock(m_mu);
        m_assignments.push_back(std::move(a));
    }

    // ---- what the worker sent ----
    std::int64_t calls() {
        std::lock_guard lock(m_mu);
        return m_calls;
    }
    std::int64_t polls() {
        std::lock_guard lock(m_mu);
        return m_polls;
    }
    std::int64_t chunks() {
        std::lock_guard lock(m_mu);
        return m_chunks;
    }
    std::vector<Beat> beats() {
        std::lock_guard lock(m_mu);
        return m_beats;
    }
    bool started(std::int64_t attempt) {
        std::lock_guard lock(m_mu);
        return m_started.count(attempt) > 0;
    }
    std::string log(std::int64_t attempt) {
        std::lock_guard lock(m_mu);
        return m_logs[attempt];
    }
    std::optional<std::string> outputs(std::int64_t attempt) {
        std::lock_guard lock(m_mu);
        auto it = m_outputs.find(attempt);
        return it == m_outputs.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
    std::optional<Completion> completion(std::int64_t attempt) {
        std::lock_guard lock(m_mu);
        auto it = m_completed.find(attempt);
        return it == m_completed.end() ? std::nullopt : std::optional<Completion>(it->second);
    }

    worker::LinkFactory links();

private:
    std::optional<Error> refusal(std::int64_t attempt) const {
        if (m_fail_all) {
            return make_error(*m_fail_all, "fake coordinator: refused");
        }
        if (attempt != 0 && m_conflicts.count(attempt)) {
            return make_error(ErrorCode::conflict, "fake coordinator: attempt " + std::to_string(attempt) + " is not current");
        }
        return std::nullopt;
    }

    std::mutex m_mu;
    std::optional<ErrorCode> m_fail_all;
    std::set<std::int64_t> m_conflicts;
    std::vector<std::int64_t> m_stop;
    std::vector<worker::AssignmentMsg> m_assignments;
    std::int64_t m_calls = 0;
    std::int64_t m_polls = 0;
    std::int64_t m_chunks = 0;
    std::vector<Beat> m_beats;
    std::set<std::int64_t> m_started;
    std::map<std::int64_t, std::string> m_logs;
    std::map<std::int64_t, std::string> m_outputs;
    std::map<std::int64_t, Completion> m_completed;
};

// One thread's link to a FakeCoordinator.
class FakeLink final : public worker::CoordinatorLink {
public:
    explicit FakeLink(FakeCoordinator& c) : m_c(c) {}
    void set_token(std::string) override {}
    Result<worker::WorkerApi::Registration> register_worker(const std::string&, const nlohmann::json&) override {
        return m_c.register_worker();
    }
    Result<worker::HeartbeatAnswer> heartbeat(const std::vector<std::int64_t>& running,
                                              const std::vector<std::int64_t>& unhealthy_gpus, bool draining,
                                              const nlohmann::json& inventory, bool paused) override {
        return m_c.heartbeat({running, unhealthy_gpus, draining, !inventory.is_null(), paused});
    }
    Result<std::vector<worker::AssignmentMsg>> poll(std::chrono::milliseconds) override { return m_c.poll(); }
    Status start(std::int64_t attempt) override { return m_c.start(attempt); }
    Result<std::string> inputs(std::int64_t) override { return make_error(ErrorCode::not_found, "fake: no inputs"); }
    Result<std::int64_t> append_log(std::int64_t attempt, std::int64_t offset, std::string_view data) override {
        return m_c.append_log(attempt, offset, data);
    }
    Status upload_outputs(std::int64_t attempt, std::string_view archive) override {
        return m_c.upload_outputs(attempt, archive);
    }
    Status complete(std::int64_t attempt, std::optional<int> exit_code, const std::string& reason,
                    worker::Outcome outcome) override {
        return m_c.complete(attempt, exit_code, reason, outcome);
    }

private:
    FakeCoordinator& m_c;
};

inline worker::LinkFactory FakeCoordinator::links() {
    return [this](const std::string&) { return std::unique_ptr<worker::CoordinatorLink>(std::make_unique<FakeLink>(*this)); };
}

} // namespace gpupool::test
