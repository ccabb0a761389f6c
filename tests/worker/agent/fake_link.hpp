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
    // ---- the link's calls ----
    Result<api::RegistrationReply> register_worker() {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(AttemptId())) {
            return *e;
        }
        return api::RegistrationReply{WorkerId(7), "worker-token", {}};
    }
    Result<api::HeartbeatReply> heartbeat(const api::Heartbeat& beat) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(AttemptId())) {
            return *e;
        }
        m_beats.push_back(beat);
        api::HeartbeatReply a;
        a.stop.swap(m_stop);
        for (AttemptId id : beat.running) {
            if (auto why = m_stop_named.find(id); why != m_stop_named.end()) {
                a.stop.push_back(id);
                a.stop_reasons.push_back({id, why->second});
                m_stop_named.erase(why);
            }
        }
        a.lease_ms = 30'000;
        return a;
    }
    Result<std::vector<AttemptId>> leave() {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(AttemptId())) {
            return *e;
        }
        ++m_leaves;
        return std::vector<AttemptId>{};
    }
    Result<std::vector<api::Assignment>> poll() {
        std::lock_guard lock(m_mu);
        ++m_polls;
        if (auto e = refusal(AttemptId())) {
            return *e;
        }
        std::vector<api::Assignment> out;
        out.swap(m_assignments);
        return out;
    }
    Status start(AttemptId attempt) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(attempt)) {
            return *e;
        }
        m_started.insert(attempt);
        return {};
    }
    Result<std::int64_t> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) {
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
    Status upload_outputs(AttemptId attempt, std::string_view archive) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(attempt)) {
            return *e;
        }
        m_outputs[attempt] = std::string(archive);
        return {};
    }
    Status complete(AttemptId attempt, const api::Completion& completion) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(attempt)) {
            return *e;
        }
        m_completed[attempt] = completion;
        return {};
    }

    Result<std::vector<api::EndAnswer>> complete_many(const std::vector<api::AttemptEnd>& ends) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(AttemptId())) {
            return *e;
        }
        m_batches.push_back(ends.size());
        std::vector<api::EndAnswer> out;
        for (const auto& e : ends) {
            if (auto no = refusal(e.attempt)) {
                out.push_back({e.attempt, *no});
                continue;
            }
            m_completed[e.attempt] = e.completion;
            out.push_back({e.attempt, std::nullopt});
        }
        return out;
    }

    Result<std::vector<api::EndAnswer>> start_many(const std::vector<AttemptId>& attempts) {
        std::lock_guard lock(m_mu);
        ++m_calls;
        if (auto e = refusal(AttemptId())) {
            return *e;
        }
        m_start_batches.push_back(attempts.size());
        std::vector<api::EndAnswer> out;
        for (AttemptId id : attempts) {
            if (auto no = refusal(id)) {
                out.push_back({id, *no});
                continue;
            }
            m_started.insert(id);
            out.push_back({id, std::nullopt});
        }
        return out;
    }

    // ---- test controls ----
    // Every call fails with `code` (unavailable: the coordinator is away) until cleared (nullopt).
    void fail_all(std::optional<ErrorCode> code) {
        std::lock_guard lock(m_mu);
        m_fail_all = code;
    }
    // Calls about this attempt are refused with 409.
    void conflict(AttemptId attempt) {
        std::lock_guard lock(m_mu);
        m_conflicts.insert(attempt);
    }
    // The next heartbeat that names `attempt` is told to stop it, and why.
    void stop_named(AttemptId attempt, std::string reason) {
        std::lock_guard lock(m_mu);
        m_stop_named[attempt] = std::move(reason);
    }
    void order_stop(AttemptId attempt) {
        std::lock_guard lock(m_mu);
        m_stop.push_back(attempt);
    }
    void assign(api::Assignment a) {
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
    std::int64_t leaves() {
        std::lock_guard lock(m_mu);
        return m_leaves;
    }
    std::int64_t chunks() {
        std::lock_guard lock(m_mu);
        return m_chunks;
    }
    // The size of each batch of completions, in order.
    std::vector<std::size_t> batches() {
        std::lock_guard lock(m_mu);
        return m_batches;
    }
    std::vector<std::size_t> start_batches() {
        std::lock_guard lock(m_mu);
        return m_start_batches;
    }
    std::vector<api::Heartbeat> beats() {
        std::lock_guard lock(m_mu);
        return m_beats;
    }
    bool started(AttemptId attempt) {
        std::lock_guard lock(m_mu);
        return m_started.count(attempt) > 0;
    }
    std::string log(AttemptId attempt) {
        std::lock_guard lock(m_mu);
        return m_logs[attempt];
    }
    std::optional<std::string> outputs(AttemptId attempt) {
        std::lock_guard lock(m_mu);
        auto it = m_outputs.find(attempt);
        return it == m_outputs.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
    std::optional<api::Completion> completion(AttemptId attempt) {
        std::lock_guard lock(m_mu);
        auto it = m_completed.find(attempt);
        return it == m_completed.end() ? std::nullopt : std::optional<api::Completion>(it->second);
    }

    worker::LinkFactory links();

private:
    std::optional<Error> refusal(AttemptId attempt) const {
        if (m_fail_all) {
            return make_error(*m_fail_all, "fake coordinator: refused");
        }
        if (attempt != AttemptId() && m_conflicts.count(attempt)) {
            return make_error(ErrorCode::conflict,
                              "fake coordinator: attempt " + std::to_string(attempt.value()) + " is not current");
        }
        return std::nullopt;
    }

    std::mutex m_mu;
    std::optional<ErrorCode> m_fail_all;
    std::set<AttemptId> m_conflicts;
    std::vector<AttemptId> m_stop;
    std::map<AttemptId, std::string> m_stop_named;
    std::vector<api::Assignment> m_assignments;
    std::int64_t m_calls = 0;
    std::int64_t m_polls = 0;
    std::int64_t m_leaves = 0;
    std::int64_t m_chunks = 0;
    std::vector<api::Heartbeat> m_beats;
    std::set<AttemptId> m_started;
    std::map<AttemptId, std::string> m_logs;
    std::map<AttemptId, std::string> m_outputs;
    std::map<AttemptId, api::Completion> m_completed;
    std::vector<std::size_t> m_batches;
    std::vector<std::size_t> m_start_batches; // the size of each start_many
};

// One thread's link to a FakeCoordinator.
class FakeLink final : public worker::CoordinatorLink {
public:
    explicit FakeLink(FakeCoordinator& c) : m_c(c) {}
    void set_token(std::string) override {}
    Result<api::RegistrationReply> register_worker(const api::Registration&) override { return m_c.register_worker(); }
    Result<api::HeartbeatReply> heartbeat(const api::Heartbeat& beat) override { return m_c.heartbeat(beat); }
    Result<std::vector<AttemptId>> leave(std::chrono::milliseconds) override { return m_c.leave(); }
    Result<std::vector<api::Assignment>> poll(std::chrono::milliseconds, const std::vector<AttemptId>&) override {
        return m_c.poll();
    }
    Status start(AttemptId attempt) override { return m_c.start(attempt); }
    Result<std::string> inputs(AttemptId) override { return make_error(ErrorCode::not_found, "fake: no inputs"); }
    Result<std::int64_t> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) override {
        return m_c.append_log(attempt, offset, data);
    }
    Status upload_outputs(AttemptId attempt, std::string_view archive) override {
        return m_c.upload_outputs(attempt, archive);
    }
    Status complete(AttemptId attempt, const api::Completion& completion) override {
        return m_c.complete(attempt, completion);
    }
    Result<std::vector<api::EndAnswer>> complete_many(const std::vector<api::AttemptEnd>& ends) override {
        return m_c.complete_many(ends);
    }
    Result<std::vector<api::EndAnswer>> start_many(const std::vector<AttemptId>& attempts) override {
        return m_c.start_many(attempts);
    }

private:
    FakeCoordinator& m_c;
};

inline worker::LinkFactory FakeCoordinator::links() {
    return [this](const std::string&) { return std::unique_ptr<worker::CoordinatorLink>(std::make_unique<FakeLink>(*this)); };
}

} // namespace gpupool::test
