// FakeRuntime: a ContainerRuntime whose "containers" are records the test drives by hand — write to
// a job's log, make it exit, see which signals it got. Thread-safe (the agent calls it from its
// thread while the test thread drives it). Behaviour mirrors the real runtimes' contract
// (container_runtime.hpp): SIGTERM ends a job with 143 unless it ignores TERM, SIGKILL with 137.
#pragma once

#include "worker/runtime/container_runtime.hpp"

#include <csignal>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace gpupool::test {

class FakeRuntime final : public worker::ContainerRuntime {
public:
    struct Container {
        worker::ContainerSpec spec;
        std::optional<worker::ExitStatus> exit;
        std::vector<int> signals;
        bool ignores_term = false;
        bool removed = false;
        int reattached = 0;
    };

    std::string name() const override { return "fake"; }
    // Like a container engine unless a test says otherwise (set_capabilities).
    worker::RuntimeCapabilities capabilities() const override {
        std::lock_guard lock(m_mu);
        return m_capabilities;
    }
    Status check() override {
        std::lock_guard lock(m_mu);
        if (m_fail_check) {
            return make_error(ErrorCode::unavailable, "the fake engine is not usable: its daemon is down");
        }
        return {};
    }

    // Takes pull_ms (outside the lock: a slow registry); an image named in missing_image() fails as a
    // registry that does not know it (not_found, the engine's words).
    Status ensure_image(const std::string& image) override {
        std::int64_t wait = 0;
        {
            std::lock_guard lock(m_mu);
            m_pulls.push_back(image);
            wait = m_pull_ms;
            if (m_missing_images.count(image) != 0) {
                return make_error(ErrorCode::not_found, "initializing source docker://" + image +
                                                            ": reading manifest in " + image + ": manifest unknown");
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(wait));
        return {};
    }

    Status start(const worker::ContainerSpec& spec) override {
        std::lock_guard lock(m_mu);
        if (m_fail_start) {
            return make_error(ErrorCode::io, "fake: image not found");
        }
        Container c;
        c.spec = spec;
        c.ignores_term = m_ignore_term_next;
        m_containers[spec.name] = c;
        m_order.push_back(spec.name);
        std::ofstream(spec.log_path, std::ios::app);
        return {};
    }
    Result<std::optional<worker::ExitStatus>> poll(const std::string& name) override {
        std::lock_guard lock(m_mu);
        ++m_polls;
        if (m_fail_poll) {
            return make_error(ErrorCode::io, "fake: the engine does not answer");
        }
        auto it = m_containers.find(name);
        if (it == m_containers.end()) {
            return make_error(ErrorCode::not_found, "fake: no container " + name);
        }
        return it->second.exit;
    }
    Status signal(const std::string& name, int signo) override {
        std::lock_guard lock(m_mu);
        auto it = m_containers.find(name);
        if (it == m_containers.end()) {
            return make_error(ErrorCode::not_found, "fake: no container " + name);
        }
        it->second.signals.push_back(signo);
        if (!it->second.exit && (signo == SIGKILL || !it->second.ignores_term)) {
            it->second.exit = worker::ExitStatus{128 + signo, false};
        }
        return {};
    }
    Status remove(const std::string& name) override {
        std::lock_guard lock(m_mu);
        auto it = m_containers.find(name);
        if (it != m_containers.end()) {
            it->second.removed = true;
            if (!it->second.exit) {
                it->second.exit = worker::ExitStatus{137, false};
            }
        }
        return {};
    }
    Result<std::vector<worker::FoundContainer>> list(const std::string& worker_label) override {
        std::lock_guard lock(m_mu);
        std::vector<worker::FoundContainer> out;
        for (const auto& [n, c] : m_containers) {
            auto l = c.spec.labels.find("gpupool.worker");
            if (!c.removed && l != c.spec.labels.end() && l->second == worker_label) {
                out.push_back({n, c.spec.labels, !c.exit});
            }
        }
        return out;
    }
    Status reattach(const std::string& name, const std::filesystem::path&) override {
        std::lock_guard lock(m_mu);
        auto it = m_containers.find(name);
        if (it == m_containers.end() || it->second.removed) {
            return make_error(ErrorCode::not_found, "fake: no container " + name);
        }
        it->second.reattached++;
        return {};
    }

    // A container's "id" is its name in hex (padded to 64 digits): a test builds the cgroup path
    // of a job's process with container_id(name).
    Result<worker::ProcessMarks> process_marks(const std::string& name) override {
        std::lock_guard lock(m_mu);
        if (m_containers.count(name) == 0) {
            return make_error(ErrorCode::not_found, "fake: no container " + name);
        }
        return worker::ProcessMarks{container_id(name), 0};
    }
    // The image's identity as a test set it (set_image_identity), by default a digest and an id of
    // repeated digits; every ask is recorded.
    Result<worker::ImageIdentity> image_identity(const std::string& image) override {
        std::lock_guard lock(m_mu);
        m_identity_asks.push_back(image);
        return m_identity;
    }
    static constexpr const char* k_digest = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
    static constexpr const char* k_image_id = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    static std::string container_id(const std::string& name) {
        static const char* const k_hex = "0123456789abcdef";
        std::string id;
        for (unsigned char c : name) {
            id += k_hex[c >> 4];
            id += k_hex[c & 15];
        }
        id.resize(64, '0');
        return id;
    }

    // ---- test controls ----
    void write(const std::string& name, const std::string& text) {
        std::lock_guard lock(m_mu);
        std::ofstream(m_containers.at(name).spec.log_path, std::ios::app | std::ios::binary) << text;
    }
    void exit(const std::string& name, int code) {
        std::lock_guard lock(m_mu);
        m_containers.at(name).exit = worker::ExitStatus{code, false};
    }
    // Forget a container, as if the machine had rebooted.
    void vanish(const std::string& name) {
        std::lock_guard lock(m_mu);
        m_containers.erase(name);
    }
    void ignore_term_next(bool v) {
        std::lock_guard lock(m_mu);
        m_ignore_term_next = v;
    }
    void missing_image(const std::string& image) {
        std::lock_guard lock(m_mu);
        m_missing_images.insert(image);
    }
    void pull_ms(std::int64_t ms) {
        std::lock_guard lock(m_mu);
        m_pull_ms = ms;
    }
    std::vector<std::string> pulls() {
        std::lock_guard lock(m_mu);
        return m_pulls;
    }
    void fail_start(bool v) {
        std::lock_guard lock(m_mu);
        m_fail_start = v;
    }
    void fail_check(bool v) {
        std::lock_guard lock(m_mu);
        m_fail_check = v;
    }
    void set_capabilities(worker::RuntimeCapabilities c) {
        std::lock_guard lock(m_mu);
        m_capabilities = c;
    }
    void set_image_identity(Result<worker::ImageIdentity> identity) {
        std::lock_guard lock(m_mu);
        m_identity = std::move(identity);
    }
    std::vector<std::string> identity_asks() {
        std::lock_guard lock(m_mu);
        return m_identity_asks;
    }
    // poll() fails with an io error (an engine that does not answer) until set back.
    void fail_poll(bool v) {
        std::lock_guard lock(m_mu);
        m_fail_poll = v;
    }
    std::int64_t polls() {
        std::lock_guard lock(m_mu);
        return m_polls;
    }
    std::optional<Container> get(const std::string& name) {
        std::lock_guard lock(m_mu);
        auto it = m_containers.find(name);
        return it == m_containers.end() ? std::nullopt : std::optional<Container>(it->second);
    }
    std::vector<std::string> started() {
        std::lock_guard lock(m_mu);
        return m_order;
    }

private:
    mutable std::mutex m_mu;
    worker::RuntimeCapabilities m_capabilities{};
    std::map<std::string, Container> m_containers;
    std::vector<std::string> m_order;
    bool m_ignore_term_next = false;
    bool m_fail_start = false;
    bool m_fail_poll = false;
    bool m_fail_check = false;
    std::int64_t m_polls = 0;
    std::set<std::string> m_missing_images;
    std::int64_t m_pull_ms = 0;
    std::vector<std::string> m_pulls;
    Result<worker::ImageIdentity> m_identity = worker::ImageIdentity{k_digest, k_image_id, ""};
    std::vector<std::string> m_identity_asks;
};

} // namespace gpupool::test
