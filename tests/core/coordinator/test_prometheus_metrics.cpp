// PrometheusMetrics (prometheus_metrics.hpp): its text passes the real `promtool check metrics`
// (Debian's prometheus package) with hostile label values, and says what was observed.
#include "core/coordinator/prometheus_metrics.hpp"
#include "tests/support.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>

#include <cstdlib>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_prometheus_metrics {

using namespace gpupool;
using namespace gpupool::coordinator;
namespace bp = boost::process;

namespace {

// `promtool check metrics` on `text`: its exit code and what it said; nullopt without promtool
// (a failure instead under GPUPOOL_REQUIRE_PROMETHEUS=1, as in CI).
std::optional<std::pair<int, std::string>> promtool_check(const std::string& text) {
    const auto promtool = bp::search_path("promtool");
    if (promtool.empty()) {
        const char* required = std::getenv("GPUPOOL_REQUIRE_PROMETHEUS");
        if (required != nullptr && std::string(required) == "1") {
            FAIL("promtool is not installed (Debian package `prometheus`) and GPUPOOL_REQUIRE_PROMETHEUS=1");
        }
        WARN("promtool is not installed (Debian package `prometheus`): the format check is skipped");
        return std::nullopt;
    }
    test::TempDir dir;
    test::write_file(dir.path() / "metrics.txt", text);
    bp::ipstream out;
    bp::child c(promtool, "check", "metrics",
                bp::std_in<(dir.path() / "metrics.txt").string(), (bp::std_out & bp::std_err)> out);
    std::string said;
    std::string line;
    while (std::getline(out, line)) {
        said += line + "\n";
    }
    c.wait();
    return std::pair{c.exit_code(), said};
}

PoolMetrics hostile_state() {
    PoolMetrics s;
    const std::string team = "evil\"team\\\nname{x=\"1\"}";
    s.live_jobs.push_back({"queued", team, "high", 3});
    s.live_jobs.push_back({"running", "fellows", "normal", 2});
    s.ended_jobs.push_back({"succeeded", team, "", 7});
    s.attempts[static_cast<std::size_t>(AttemptOutcome::lost)] = 4;
    s.attempt_gpu_seconds[static_cast<std::size_t>(AttemptOutcome::preempted_scheduler)] = 1800.5;
    s.workers.push_back({"NVIDIA L4", "online", 2});
    s.workers.push_back({"cpu", "offline", 1});
    s.gpus.push_back({"NVIDIA L4", "unhealthy", 1});
    s.memory.push_back({"NVIDIA L4", 24576 * 2, 24576, 9000, 1, 1, 4});
    s.heartbeats.push_back({3, "box \"#1\"\n", 2.5});
    s.credits.push_back({team, {100'000'000, 0, 2'500'000, 0}, 97'500'000, 500'000});
    return s;
}

} // namespace

TEST_CASE("the metrics text passes promtool and escapes what members and owners name", "[metrics][prometheus]") {
    PrometheusMetrics metrics;
    metrics.observe({"GET", "/v1/jobs/{id}", 200, std::chrono::milliseconds(3)});
    metrics.observe({"GET", "/v1/jobs/{id}", 200, std::chrono::milliseconds(7)});
    metrics.observe({"GET", "/v1/jobs/{id}", 404, std::chrono::milliseconds(1)});
    metrics.observe({"POST", "", 404, std::chrono::microseconds(50)});
    metrics.store_committed(std::chrono::microseconds(800), true);
    metrics.store_committed(std::chrono::microseconds(900), false);
    metrics.group_committed(std::chrono::microseconds(700), 5, true);
    metrics.group_committed(std::chrono::microseconds(600), 1, true);
    metrics.scheduling_pass(std::chrono::microseconds(1200), 3, 1);
    metrics.attempt_placed("fellows", 90'000);
    metrics.attempt_ended("fellows", AttemptOutcome::preempted_owner, 3'600'000);
    const std::string text = metrics.render(hostile_state());

    // The counts, under the route's pattern (never the path a client sent).
    CHECK_THAT(text,
               Catch::Contains(R"(gpupool_http_requests_total{code="200",method="GET",route="/v1/jobs/{id}"} 2)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_http_requests_total{code="404",method="POST",route="unmatched"} 1)"));
    CHECK_THAT(text,
               Catch::Contains(R"(gpupool_http_request_duration_seconds_count{method="GET",route="/v1/jobs/{id}"} 3)"));
    CHECK_THAT(text,
               Catch::Contains(
                   R"(gpupool_http_request_duration_seconds_bucket{method="GET",route="/v1/jobs/{id}",le="0.005"} 2)"));
    CHECK_THAT(text, Catch::Contains("gpupool_store_commit_duration_seconds_count 2"));
    CHECK_THAT(text, Catch::Contains("gpupool_store_commit_failures_total 1"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_scheduler_decisions_total{decision="placed"} 3)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_queue_wait_seconds_bucket{team="fellows",le="120"} 1)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_queue_wait_seconds_bucket{team="fellows",le="60"} 0)"));
    CHECK_THAT(text,
               Catch::Contains(R"(gpupool_attempt_run_seconds_sum{outcome="preempted_by_owner",team="fellows"} 3600)"));
    // The state: every outcome is present (0 or not), label values escaped.
    CHECK_THAT(text, Catch::Contains(R"(gpupool_attempts_ended_total{outcome="lost"} 4)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_attempts_ended_total{outcome="preempted_by_scheduler"} 0)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_attempt_gpu_seconds_total{outcome="preempted_by_scheduler"} 1800.5)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_attempt_gpu_seconds_total{outcome="succeeded"} 0)"));
    CHECK_THAT(text, Catch::Contains("gpupool_store_group_commit_duration_seconds_count 2"));
    CHECK_THAT(text, Catch::Contains("gpupool_store_group_tasks_sum 6"));
    CHECK_THAT(text, Catch::Contains("gpupool_store_group_tasks_count 2"));
    CHECK_THAT(text,
               Catch::Contains(R"(gpupool_jobs{priority="high",state="queued",team="evil\"team\\\nname{x=\"1\"}"} 3)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_gpu_memory_offered_bytes{gpu_model="NVIDIA L4"} 51539607552)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_gpu_allocation_ratio{gpu_model="NVIDIA L4"} 0.5)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_gpu_sharing_ratio{gpu_model="NVIDIA L4"} 4)"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_worker_heartbeat_age_seconds{name="box \"#1\"\n",worker="3"} 2.5)"));
    CHECK_THAT(text, Catch::Contains("gpupool_team_spent_credits{team=") && Catch::Contains("} 2.5\n"));
    CHECK_THAT(text, Catch::Contains("gpupool_ledger_imbalance_credits 0"));
    // No line of the exposition is broken by a name: each is a comment or `name{...} value`.
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        INFO(line);
        CHECK((line.rfind("# ", 0) == 0 || line.rfind("gpupool_", 0) == 0));
    }

    auto checked = promtool_check(text);
    if (checked) {
        INFO(checked->second);
        CHECK(checked->first == 0);
        CHECK(checked->second.empty());
    }
}

TEST_CASE("an empty pool's metrics pass promtool too", "[metrics][prometheus]") {
    PrometheusMetrics metrics;
    const std::string text = metrics.render(PoolMetrics{});
    CHECK_THAT(text, Catch::Contains("gpupool_build_info{version=\"" GPUPOOL_VERSION "\"} 1"));
    CHECK_THAT(text, Catch::Contains(R"(gpupool_scheduler_decisions_total{decision="preempted"} 0)"));
    auto checked = promtool_check(text);
    if (checked) {
        INFO(checked->second);
        CHECK(checked->first == 0);
    }
}

} // namespace test_prometheus_metrics
} // namespace
