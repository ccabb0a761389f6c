// GET /metrics on a real coordinator service (loopback HTTP, SQLite file): who may scrape it on the
// API's listener (admins and the scrape token; members and strangers not), the token-free metrics
// listener that serves nothing else, and that the text follows the pool as requests and jobs happen.
#include "core/util/token_secret.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <set>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_metrics_service {

using namespace gpupool;
using namespace gpupool::test::svc;

namespace {

const std::string k_scrape = "scrape-0123456789abcdef0123456789abcdef";

struct Scraped {
    int status = 0;
    std::string type;
    std::string body;
};

Scraped scrape(const std::string& url, const std::string& token) {
    net::ClientOptions o;
    o.base_url = url;
    o.token = token;
    o.timeout = std::chrono::milliseconds(10'000);
    net::HttpClient c(o);
    auto r = c.request("GET", "/metrics", "");
    REQUIRE(r);
    const std::string* type = r->headers.find("Content-Type");
    return {r->status, type != nullptr ? *type : "", r->body};
}

} // namespace

TEST_CASE("GET /metrics: admins and the scrape token read it, members and strangers do not", "[service][metrics]") {
    Server server(30'000, std::int64_t{64} << 20, 60'000, [](coordinator::ServiceOptions& o) {
        o.metrics_token_sha256 = util::sha256_hex(k_scrape);
        net::ServerOptions listener;
        listener.host = "127.0.0.1";
        listener.port = 0;
        o.metrics_listener = listener;
    });
    auto admin = server.client(server.admin_token);
    call(admin, "POST", "/v1/admin/teams", {{"name", "fellows"}}, 201);
    const std::string member =
        call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];

    CHECK(scrape(server.url, "").status == 401);
    CHECK(scrape(server.url, "gpp_" + std::string(64, '0')).status == 401);
    CHECK(scrape(server.url, k_scrape + "x").status == 401);
    CHECK(scrape(server.url, member).status == 403);

    const Scraped by_admin = scrape(server.url, server.admin_token);
    REQUIRE(by_admin.status == 200);
    CHECK(by_admin.type == "text/plain; version=0.0.4; charset=utf-8");
    // The team creation above, counted under its route.
    CHECK_THAT(by_admin.body,
               Catch::Contains(R"(gpupool_http_requests_total{code="201",method="POST",route="/v1/admin/teams"} 1)"));
    // The refused scrapes, too.
    CHECK_THAT(by_admin.body,
               Catch::Contains(R"(gpupool_http_requests_total{code="403",method="GET",route="/metrics"} 1)"));
    CHECK_THAT(by_admin.body, Catch::Contains(R"(gpupool_team_balance_credits{team="fellows"} 0)"));

    const Scraped by_token = scrape(server.url, k_scrape);
    REQUIRE(by_token.status == 200);
    // (A family without series, such as the workers of a pool that has none, is left out.)
    CHECK_THAT(by_token.body, Catch::Contains("gpupool_attempts_ended_total") &&
                                  Catch::Contains("gpupool_scheduling_pass_duration_seconds_count"));

    // The metrics listener: no token needed, and nothing but /metrics.
    const std::uint16_t port = server.service->metrics_port();
    REQUIRE(port != 0);
    REQUIRE(port != server.service->port());
    const std::string listener = "http://127.0.0.1:" + std::to_string(port);
    const Scraped open = scrape(listener, "");
    REQUIRE(open.status == 200);
    CHECK_THAT(open.body, Catch::Contains("gpupool_build_info"));
    net::ClientOptions o;
    o.base_url = listener;
    o.token = server.admin_token;
    net::HttpClient c(o);
    for (const char* path : {"/v1/pool", "/v1/health", "/v1/admin/teams"}) {
        auto r = c.request("GET", path, "");
        REQUIRE(r);
        CHECK(r->status == 404);
    }
}

TEST_CASE("GET /metrics follows a job from the queue to its end", "[service][metrics]") {
    Pool p;
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}, {"gpu_memory_used_mib", {1234}}});
    p.submit({spec("one", 500)});
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    const std::int64_t attempt = polled["assignments"][0]["attempt"];
    call(w, "POST", "/v1/attempts/" + std::to_string(attempt) + "/start", json::object());
    call(w, "POST", "/v1/workers/heartbeat", {{"running", {attempt}}, {"gpu_memory_used_mib", {1234}}});

    std::string text = scrape(p.server.url, p.server.admin_token).body;
    CHECK_THAT(text, Catch::Contains(R"(gpupool_jobs{priority="normal",state="running",team="fellows"} 1)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_workers{gpu_model="L4",state="online"} 1)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_gpu_memory_allocated_bytes{gpu_model="L4"} 12884901888)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_gpu_memory_used_bytes{gpu_model="L4"} 1293942784)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_queue_wait_seconds_count{team="fellows"} 1)"));

    call(w, "POST", "/v1/attempts/" + std::to_string(attempt) + "/complete", {{"exit_code", 0}});
    text = scrape(p.server.url, p.server.admin_token).body;
    CHECK_THAT(text, Catch::Contains(R"(gpupool_attempts_ended_total{outcome="succeeded"} 1)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_jobs_ended{state="succeeded",team="fellows"} 1)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_attempt_run_seconds_count{outcome="succeeded",team="fellows"} 1)"));
    CHECK_THAT(text, !Catch::Contains(R"(state="running",team="fellows"})"));
    CHECK_THAT(text, Catch::Contains("gpupool_ledger_imbalance_credits 0"));
}

TEST_CASE("every metric ops/ and docs/operating.md name is one the coordinator serves", "[service][metrics][ops]") {
    // A pool that has done a bit of everything: a job ended, one runs, one waits, a worker reports.
    Pool p;
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}, {"gpu_memory_used_mib", {10}}});
    p.submit({spec("done", 500)});
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    const std::int64_t first = polled["assignments"][0]["attempt"];
    call(w, "POST", "/v1/attempts/" + std::to_string(first) + "/start", json::object());
    call(w, "POST", "/v1/attempts/" + std::to_string(first) + "/complete", {{"exit_code", 0}});
    p.submit({spec("runs", 500), spec("waits", 1000)});
    polled = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    const std::int64_t second = polled["assignments"][0]["attempt"];
    call(w, "POST", "/v1/attempts/" + std::to_string(second) + "/start", json::object());
    call(w, "POST", "/v1/workers/heartbeat", {{"running", {second}}, {"gpu_memory_used_mib", {10}}});
    const std::string text = scrape(p.server.url, p.server.admin_token).body;

    std::set<std::string> served;
    const std::regex type_line(R"(# TYPE (\w+) (\w+))");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), type_line); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        served.insert(name);
        if ((*it)[2] == "histogram") {
            for (const char* suffix : {"_bucket", "_sum", "_count"}) {
                served.insert(name + suffix);
            }
        }
    }
    REQUIRE(served.size() > 20);
    const std::regex metric(R"(gpupool_[a-z_]+)");
    const std::regex doc_row(R"(^\| `([a-z_]+)`(?:, `([a-z_]+)`)?(?:, `([a-z_]+)`)? \| (gauge|counter|histogram) \|)");
    std::size_t named = 0;
    for (const char* file : {"ops/prometheus/gpupool-alerts.yml", "ops/grafana/gpupool-dashboard.json"}) {
        const std::string body = test::slurp(test::source_dir() / file);
        REQUIRE_FALSE(body.empty());
        for (auto it = std::sregex_iterator(body.begin(), body.end(), metric); it != std::sregex_iterator(); ++it) {
            INFO(file << " names " << it->str());
            CHECK(served.count(it->str()) == 1);
            ++named;
        }
    }
    // The table in docs/operating.md names them without the prefix.
    std::istringstream doc(test::slurp(test::source_dir() / "docs/operating.md"));
    std::string line;
    std::size_t rows = 0;
    while (std::getline(doc, line)) {
        std::smatch m;
        if (std::regex_search(line, m, doc_row)) {
            ++rows;
            for (std::size_t i = 1; i <= 3; ++i) {
                if (m[i].matched) {
                    INFO("docs/operating.md lists " << m[i].str());
                    CHECK(served.count("gpupool_" + m[i].str()) == 1);
                }
            }
        }
    }
    CHECK(named >= 25); // the regex found the names (27 when written)
    CHECK(rows >= 20);
}

} // namespace test_metrics_service
} // namespace
