// The coordinator as a service for tests: a real HTTP server on loopback over a real SQLite file
// (Server), and a small pool on it (Pool): teams "fellows", "others" and "owners", a member token of
// each of the first two, funds, an enrollment token of "owners" (100 registrations) and one
// registered worker.
#pragma once

#include "core/coordinator/service.hpp"
#include "core/net/http_client.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/store/open_store.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpupool::test::svc {

using json = nlohmann::json;

inline recipe::JobSpec spec(const std::string& name, std::int64_t gpu_milli = 250) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"echo", name};
    s.resources.gpus = 1;
    s.resources.gpu_milli = gpu_milli;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    return s;
}

inline json inventory() {
    return {{"cpu_milli", 16000},
            {"memory_mib", 65536},
            {"gpus", json::array({{{"index", 0}, {"model", "L4"}, {"memory_mib", 24576}}})}};
}

struct Server {
    test::TempDir dir;
    std::unique_ptr<coordinator::CoordinatorService> service;
    std::string admin_token;
    std::string url;

    // `sample_every_ms`: how often the pool is sampled for the dashboard (the coordinator's default: a
    // minute); `adjust`: changes to the options before the service starts.
    explicit Server(std::int64_t lease_ms = 30'000, std::int64_t max_log_bytes = std::int64_t{64} << 20,
                    std::int64_t sample_every_ms = 60'000,
                    const std::function<void(coordinator::ServiceOptions&)>& adjust = {}) {
        coordinator::ServiceOptions o;
        o.http.host = "127.0.0.1";
        o.http.port = 0;
        o.http.max_body_bytes = 1024 * 1024;
        o.tick = std::chrono::milliseconds(50);
        o.coordinator.lease_ms = lease_ms;
        o.coordinator.worker_timeout_ms = lease_ms;
        o.coordinator.max_log_bytes = max_log_bytes;
        o.coordinator.sample_every_ms = sample_every_ms;
        o.coordinator.policy.placement.scorer = sched::ScorerKind::bestfit;
        if (adjust) {
            adjust(o);
        }
        auto opened = store::open_store((dir.path() / "pool.db").string());
        REQUIRE(opened);
        service = std::make_unique<coordinator::CoordinatorService>(o, std::move(*opened), coordinator::system_clock());
        REQUIRE(service->start(&admin_token));
        REQUIRE(admin_token.starts_with("gpp_"));
        url = "http://127.0.0.1:" + std::to_string(service->port());
    }

    net::HttpClient client(const std::string& token = {}) const {
        net::ClientOptions o;
        o.base_url = url;
        o.token = token;
        o.timeout = std::chrono::milliseconds(10'000);
        return net::HttpClient(o);
    }
};

inline json call(net::HttpClient& c, const std::string& method, const std::string& path, const json& body = nullptr,
          int expect = 200) {
    auto r = c.request(method, path, body.is_null() ? std::string() : body.dump());
    REQUIRE(r);
    INFO(method << " " << path << " -> " << r->status << " " << r->body);
    REQUIRE(r->status == expect);
    return json::parse(r->body);
}

// Admin, teams, a member of "fellows", a member of "others", and one registered worker.
struct Pool {
    Server server;
    std::string member;
    std::string other;
    std::string enroll;
    std::string worker;
    std::int64_t worker_id = 0;

    // `adjust`: changes to the service's options before it starts (as Server's).
    explicit Pool(std::int64_t lease_ms = 30'000, std::int64_t max_log_bytes = std::int64_t{64} << 20,
                  std::int64_t sample_every_ms = 60'000,
                  const std::function<void(coordinator::ServiceOptions&)>& adjust = {})
        : server(lease_ms, max_log_bytes, sample_every_ms, adjust) {
        auto admin = server.client(server.admin_token);
        for (const char* team : {"fellows", "others", "owners"}) {
            call(admin, "POST", "/v1/admin/teams", {{"name", team}}, 201);
        }
        member = call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
        other = call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "others"}}, 201)["token"];
        enroll = call(admin, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "owners"}, {"uses", 100}},
                      201)["token"];
        for (const char* team : {"fellows", "others"}) {
            call(admin, "POST", "/v1/admin/grants", {{"team", team}, {"amount_micro", 1'000'000'000'000}}, 201);
        }
        auto e = server.client(enroll);
        auto reg = call(e, "POST", "/v1/workers/register", {{"name", "box"}, {"inventory", inventory()}}, 201);
        worker = reg["token"];
        worker_id = reg["worker_id"];
    }

    json submit(const std::vector<recipe::JobSpec>& specs, std::int64_t max_parallel = 0) {
        auto c = server.client(member);
        return call(c, "POST", "/v1/jobs",
                    {{"source", "t.toml"}, {"max_parallel", max_parallel}, {"jobs", json::parse(recipe::to_json(specs).dump())}},
                    201);
    }
};


} // namespace gpupool::test::svc
