// A real Prometheus server (Debian's `prometheus`) scrapes a real `gpupool coordinator` process on
// loopback with the scrape token, after a real worker process ran a job; the test reads the job's
// metrics back through Prometheus' HTTP query API. Without prometheus installed it is skipped,
// loudly, unless GPUPOOL_REQUIRE_PROMETHEUS=1 (CI), where it fails.
#include "core/net/url.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/process.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_metrics_prometheus {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;
namespace bp = boost::process;
using namespace std::chrono_literals;

namespace {

const std::string k_scrape = "scrape-fedcba9876543210fedcba9876543210";

// A port free now on loopback (Prometheus takes it a moment later).
std::uint16_t free_port() {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    return a.local_endpoint().port();
}

// Prometheus on `port`, scraping `target` every second twice: with the scrape token, and without.
class PrometheusProcess {
public:
    PrometheusProcess(const fs::path& exe, const fs::path& dir, std::uint16_t port, const std::string& target,
                      const fs::path& token_file)
        : m_dir(dir) {
        fs::create_directories(dir / "data");
        std::ofstream cfg(dir / "prometheus.yml");
        cfg << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            << "scrape_configs:\n"
            << "  - job_name: gpupool\n    static_configs:\n      - targets: ['" << target << "']\n"
            << "    authorization:\n      type: Bearer\n      credentials_file: " << token_file.string() << "\n"
            << "  - job_name: gpupool-no-token\n    static_configs:\n      - targets: ['" << target << "']\n";
        cfg.close();
        m_child = bp::child(
            exe, "--config.file=" + (dir / "prometheus.yml").string(), "--storage.tsdb.path=" + (dir / "data").string(),
            "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn",
            bp::std_out > (dir / "stdout").string(), bp::std_err > (dir / "stderr").string(), bp::std_in < bp::null);
    }
    ~PrometheusProcess() {
        if (m_child.running()) {
            ::kill(m_child.id(), SIGTERM);
            m_child.wait();
        }
    }
    PrometheusProcess(const PrometheusProcess&) = delete;
    PrometheusProcess& operator=(const PrometheusProcess&) = delete;
    std::string log() const { return test::slurp(m_dir / "stderr"); }
    bool running() { return m_child.running(); }

private:
    fs::path m_dir;
    bp::child m_child;
};

// The value of an instant query's single series, or "" when it has none (yet).
std::string query_one(const std::string& prometheus_url, const std::string& promql) {
    auto c = test::http_client(prometheus_url, "");
    auto r = c.request("GET", "/api/v1/query?query=" + net::percent_encode(promql));
    if (!r || r->status != 200) {
        return {};
    }
    const json body = json::parse(r->body, nullptr, false);
    if (!body.is_object() || body.value("status", "") != "success") {
        return {};
    }
    const json& result = body["data"]["result"];
    if (!result.is_array() || result.size() != 1) {
        return {};
    }
    return result[0]["value"][1].get<std::string>();
}

json call(const std::string& url, const std::string& token, const std::string& method, const std::string& path,
          const json& body) {
    auto c = test::http_client(url, token);
    auto r = c.request(method, path, body.dump());
    REQUIRE(r);
    INFO(method << " " << path << ": " << r->body);
    REQUIRE(r->status / 100 == 2);
    return json::parse(r->body);
}

} // namespace

TEST_CASE("a real Prometheus scrapes the coordinator with its token and reads back a job that ran",
          "[coordinator-cli][metrics][prometheus]") {
    const fs::path exe = bp::search_path("prometheus");
    if (exe.empty()) {
        const char* required = std::getenv("GPUPOOL_REQUIRE_PROMETHEUS");
        if (required != nullptr && std::string(required) == "1") {
            FAIL("prometheus is not installed (Debian package `prometheus`) and GPUPOOL_REQUIRE_PROMETHEUS=1");
        }
        WARN("prometheus is not installed (Debian package `prometheus`): the scrape test is skipped");
        return;
    }
    test::TempDir dir;
    const fs::path token_file = dir.path() / "scrape.token";
    test::write_file(token_file, k_scrape + "\n");
    fs::permissions(token_file, fs::perms::owner_read | fs::perms::owner_write);
    fs::create_directories(dir.path() / "coord");
    test::CoordinatorProcess coord(dir.path() / "coord", {"--metrics-token-file", token_file.string()});
    const std::string url = coord.url();
    const std::string admin = coord.admin();
    call(url, admin, "POST", "/v1/admin/teams", {{"name", "fellows"}});
    call(url, admin, "POST", "/v1/admin/grants", {{"team", "fellows"}, {"amount_micro", 1'000'000'000}});
    const std::string member =
        call(url, admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}})["token"];
    const std::string enroll =
        call(url, admin, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "fellows"}})["token"];

    // A real worker runs a real process.
    test::WorkerProcess worker(dir.path() / "worker", url, enroll);
    recipe::JobSpec s;
    s.name = "scraped";
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {"echo measured"};
    s.shell = true;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 120;
    const json sub = call(url, member, "POST", "/v1/jobs",
                          {{"source", "t.toml"}, {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}});
    const std::int64_t job = sub["jobs"][0];
    REQUIRE(test::eventually(
        [&] {
            auto r = test::http_client(url, member).request("GET", "/v1/jobs/" + std::to_string(job));
            return r && r->status == 200 && json::parse(r->body).value("state", "") == "succeeded";
        },
        30s));

    const std::uint16_t port = free_port();
    const std::string target = "127.0.0.1:" + std::to_string(coord.port());
    PrometheusProcess prometheus(exe, dir.path() / "prometheus", port, target, token_file);
    const std::string purl = "http://127.0.0.1:" + std::to_string(port);
    INFO("prometheus log: " << prometheus.log());
    // Read back through Prometheus: the job's attempt, the job, and the scrape itself.
    std::string value;
    const bool seen = test::eventually(
        [&] {
            value = query_one(purl, R"(gpupool_attempts_ended_total{job="gpupool",outcome="succeeded"})");
            return !value.empty();
        },
        60s, 250ms);
    INFO("prometheus log: " << prometheus.log());
    REQUIRE(seen);
    CHECK(value == "1");
    CHECK(query_one(purl, R"(gpupool_jobs_ended{job="gpupool",state="succeeded",team="fellows"})") == "1");
    CHECK(query_one(purl, R"(up{job="gpupool"})") == "1");
    CHECK(query_one(purl, R"(gpupool_workers{job="gpupool",gpu_model="cpu",state="online"})") == "1");
    // Without the token the coordinator refuses the scrape: Prometheus marks that target down.
    REQUIRE(test::eventually([&] { return query_one(purl, R"(up{job="gpupool-no-token"})") == "0"; }, 30s, 250ms));
    CHECK(query_one(purl, R"(gpupool_attempts_ended_total{job="gpupool-no-token"})").empty());
    CHECK(prometheus.running());
}

TEST_CASE("coordinator process: metrics options that would expose or weaken /metrics are usage errors",
          "[coordinator-cli][metrics]") {
    test::TempDir dir;
    const std::string db = (dir.path() / "pool.db").string();
    auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"coordinator", "--db", db, "--listen", "127.0.0.1:0"};
        args.insert(args.end(), extra.begin(), extra.end());
        return test::run_gpupool(args);
    };
    for (const std::string listen : {"0.0.0.0:9464", "10.1.2.3:9464", "[::]:9464", "example.org:9464"}) {
        const auto r = run({"--metrics-listen", listen});
        INFO(listen << ": " << r.err);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::Contains("--metrics-listen") && Catch::Contains("loopback"));
    }
    const auto short_token = run({"--metrics-token-file", dir.write("short.token", "hunter2\n").string()});
    CHECK(short_token.exit_code == 2);
    CHECK_THAT(short_token.err, Catch::Contains("--metrics-token-file") && Catch::Contains("32 characters"));
    const auto two_words = run({"--metrics-token-file", dir.write("two.token", std::string(20, 'a') + " " +
                                                                                     std::string(20, 'b')).string()});
    CHECK(two_words.exit_code == 2);
    const auto missing = run({"--metrics-token-file", (dir.path() / "nope.token").string()});
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.err, Catch::Contains("cannot read"));
    CHECK_FALSE(fs::exists(db)); // refused before the store was opened
}

} // namespace test_metrics_prometheus
} // namespace
