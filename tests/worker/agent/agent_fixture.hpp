// The worker agent's test fixture: a coordinator that can be stopped and started again on the
// same port and database, an agent running on its own thread, and the options and helpers the
// agent tests share (a FakeRuntime stands in for podman).
#pragma once

#include "core/coordinator/service.hpp"
#include "core/store/open_store.hpp"
#include "core/net/http_client.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/support.hpp"
#include "tests/worker/fake_runtime.hpp"
#include "worker/agent/agent.hpp"
#include "worker/agent/steady_clock.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

namespace gpupool::test::agent {

using json = nlohmann::json;
using namespace std::chrono_literals;
using test::eventually;

inline recipe::JobSpec job_spec(const std::string& name) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {"sh", "-c", "true"};
    s.resources.gpus = 1;
    s.resources.gpu_milli = 500;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 60;
    s.params = {{"lr", "0.1"}};
    s.env = {{"MODE", "test"}};
    return s;
}

// A coordinator that can be stopped and started again on the same port and database.
struct Pool {
    test::TempDir dir;
    std::unique_ptr<coordinator::CoordinatorService> service;
    std::uint16_t port = 0;
    std::string admin, member, enroll;

    Pool() {
        start();
        auto a = client(admin);
        call(a, "POST", "/v1/admin/teams", {{"name", "fellows"}}, 201);
        member = call(a, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
        enroll = call(a, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "fellows"}, {"uses", 100}}, 201)["token"];
    }
    ~Pool() { stop(); }

    void start() {
        coordinator::ServiceOptions o;
        o.http.host = "127.0.0.1";
        o.http.port = port;
        o.http.stop_grace = 500ms;
        o.tick = 50ms;
        o.coordinator.lease_ms = 5'000;
        o.coordinator.worker_timeout_ms = 5'000;
        o.coordinator.credits.enforce = false; // credits have their own tests
        o.coordinator.policy.preemption.min_runtime_s = 0; // so a test can preempt at once
        auto opened = store::open_store((dir.path() / "pool.db").string());
        REQUIRE(opened);
        service = std::make_unique<coordinator::CoordinatorService>(o, std::move(*opened), coordinator::system_clock());
        std::string token;
        REQUIRE(service->start(&token));
        if (!token.empty()) {
            admin = token;
        }
        port = service->port();
    }
    void stop() {
        if (service) {
            service->stop();
            service.reset();
        }
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }

    net::HttpClient client(const std::string& token) const {
        net::ClientOptions o;
        o.base_url = url();
        o.token = token;
        o.timeout = 10s;
        return net::HttpClient(o);
    }
    static json call(net::HttpClient& c, const std::string& method, const std::string& path, const json& body = nullptr,
                     int expect = 200) {
        auto r = c.request(method, path, body.is_null() ? std::string() : body.dump());
        REQUIRE(r);
        INFO(method << " " << path << " -> " << r->status << " " << r->body);
        REQUIRE(r->status == expect);
        return r->body.empty() ? json() : json::parse(r->body);
    }
    std::int64_t submit(const recipe::JobSpec& s) {
        auto c = client(member);
        auto r = call(c, "POST", "/v1/jobs",
                      {{"source", "t.toml"}, {"max_parallel", 0}, {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}},
                      201);
        return r["jobs"][0].get<std::int64_t>();
    }
    json job(std::int64_t id) {
        auto c = client(member);
        return call(c, "GET", "/v1/jobs/" + std::to_string(id));
    }
    std::string logs(std::int64_t id) {
        auto c = client(member);
        return call(c, "GET", "/v1/jobs/" + std::to_string(id) + "/logs?offset=0")["data"].get<std::string>();
    }
};

// What the agent said to the real coordinator, counted, so a test waits for "three more
// heartbeats" instead of sleeping for what it hopes is long enough.
struct LinkCounts {
    std::atomic<std::int64_t> heartbeats{0};
    std::atomic<std::int64_t> draining_heartbeats{0};
    std::atomic<std::int64_t> unhealthy_heartbeats{0}; // naming a GPU as unhealthy
    std::atomic<std::int64_t> paused_heartbeats{0};
    std::atomic<std::int64_t> reclaimed_heartbeats{0}; // naming a GPU its owner uses
    std::atomic<std::int64_t> gpu_memory_used_mib{-1}; // the last heartbeat's total (-1: none said)
    std::atomic<std::int64_t> polls{0};                // answered
    std::atomic<std::int64_t> leaves{0};               // leave requests answered
    std::atomic<std::int64_t> unavailable{0};          // calls that found the coordinator away
};

// The real HTTP link, counting into LinkCounts.
class CountingLink final : public worker::CoordinatorLink {
public:
    CountingLink(const std::string& url, const std::string& token, LinkCounts& counts)
        : m_real(url, token, ""), m_counts(counts) {}
    void set_token(std::string token) override { m_real.set_token(std::move(token)); }
    Result<api::RegistrationReply> register_worker(const api::Registration& registration) override {
        return count(m_real.register_worker(registration));
    }
    Result<api::HeartbeatReply> heartbeat(const api::Heartbeat& beat) override {
        auto r = count(m_real.heartbeat(beat));
        if (r) {
            ++m_counts.heartbeats;
            m_counts.draining_heartbeats += beat.draining ? 1 : 0;
            m_counts.unhealthy_heartbeats += beat.unhealthy_gpus.empty() ? 0 : 1;
            m_counts.paused_heartbeats += beat.sharing != api::SharingState::sharing ? 1 : 0;
            m_counts.reclaimed_heartbeats += beat.reclaimed_gpus.empty() ? 0 : 1;
            if (!beat.gpu_memory_used_mib.empty()) {
                std::int64_t total = 0;
                for (auto mib : beat.gpu_memory_used_mib) {
                    total += mib;
                }
                m_counts.gpu_memory_used_mib = total;
            }
        }
        return r;
    }
    Result<std::vector<AttemptId>> leave(std::chrono::milliseconds wait) override {
        auto r = count(m_real.leave(wait));
        m_counts.leaves += r ? 1 : 0;
        return r;
    }
    Result<std::vector<api::Assignment>> poll(std::chrono::milliseconds wait,
                                              const std::vector<AttemptId>& known) override {
        auto r = count(m_real.poll(wait, known));
        m_counts.polls += r ? 1 : 0;
        return r;
    }
    Status start(AttemptId attempt) override { return count(m_real.start(attempt)); }
    Result<std::string> inputs(AttemptId attempt) override { return count(m_real.inputs(attempt)); }
    Result<std::int64_t> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) override {
        return count(m_real.append_log(attempt, offset, data));
    }
    Status upload_outputs(AttemptId attempt, std::string_view archive) override {
        return count(m_real.upload_outputs(attempt, archive));
    }
    Status complete(AttemptId attempt, const api::Completion& completion) override {
        return count(m_real.complete(attempt, completion));
    }
    Result<std::vector<api::EndAnswer>> complete_many(const std::vector<api::AttemptEnd>& ends) override {
        return count(m_real.complete_many(ends));
    }
    Result<std::vector<api::EndAnswer>> start_many(const std::vector<AttemptId>& attempts) override {
        return count(m_real.start_many(attempts));
    }

private:
    template <class R>
    R count(R r) {
        if (!r && r.error().code == ErrorCode::unavailable) {
            ++m_counts.unavailable;
        }
        return r;
    }

    worker::HttpCoordinatorLink m_real;
    LinkCounts& m_counts;
};

inline worker::LinkFactory counting_links(const std::string& url, LinkCounts& counts) {
    return [url, &counts](const std::string& token) {
        return std::unique_ptr<worker::CoordinatorLink>(std::make_unique<CountingLink>(url, token, counts));
    };
}

// Real (monotonic) time that a test can jump forward: grace periods pass at once, while
// heartbeats and leases go on as usual.
class JumpClock final : public util::Clock {
public:
    std::int64_t now_ms() const override { return m_real.now_ms() + m_jumped.load(); }
    void jump_ms(std::int64_t ms) { m_jumped += ms; }

private:
    worker::SteadyClock m_real;
    std::atomic<std::int64_t> m_jumped{0};
};

struct RunningAgent {
    worker::Agent agent;
    std::thread thread;
    Status result;

    RunningAgent(worker::AgentOptions o, worker::ContainerRuntime& rt, worker::GpuProbe& probe,
                 worker::AgentDeps deps = {})
        : agent(std::move(o), rt, probe, std::move(deps)) {
        thread = std::thread([this] { result = agent.run(); });
    }
    ~RunningAgent() { halt(); }
    void halt() {
        agent.stop();
        if (thread.joinable()) {
            thread.join();
        }
    }
    void drain_and_join() {
        agent.drain();
        thread.join();
    }
};

inline worker::AgentOptions options(const Pool& pool, const std::filesystem::path& work) {
    worker::AgentOptions o;
    o.coordinator_url = pool.url();
    o.token = pool.enroll;
    o.name = "test-box";
    o.work_dir = work;
    o.cpu_milli = 8000;
    o.memory_mib = 16384;
    o.heartbeat = 200ms;
    o.poll_wait = 500ms;
    o.stop_grace = 300ms;
    o.runtime_grace = 300ms;
    o.log_flush = 100ms;
    o.backoff_initial = 100ms;
    o.backoff_max = 500ms;
    o.tick = 20ms;
    o.give_up_after_drain = 2s;
    return o;
}

inline worker::StaticGpuProbe one_gpu() {
    return worker::StaticGpuProbe({{0, "GPU-test-0", "NVIDIA L4", "L4", 24576}});
}

inline std::string container_of(test::FakeRuntime& rt, std::size_t n = 0) {
    std::string name;
    REQUIRE(eventually([&] {
        auto s = rt.started();
        if (s.size() > n) {
            name = s[n];
            return true;
        }
        return false;
    }));
    return name;
}

inline std::string state_of(Pool& pool, std::int64_t id) { return pool.job(id)["state"].get<std::string>(); }

// The job's first attempt was lost, `why` in its reason; its second container (`second`, a new
// name) then finishes the job.
inline void expect_lost_then_rerun(Pool& pool, test::FakeRuntime& rt, std::int64_t id, const std::string& first,
                                   const std::string& why) {
    const auto second = container_of(rt, 1);
    CHECK(second != first);
    REQUIRE(eventually([&] { return pool.job(id)["attempts"] == 2; }));
    const json history = pool.job(id)["attempt_history"];
    REQUIRE(history.size() == 2);
    CHECK(history[0]["state"] == "lost");
    CHECK_THAT(history[0]["reason"].get<std::string>(), Catch::Contains(why));
    rt.exit(second, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "succeeded"; }));
}

} // namespace gpupool::test::agent
