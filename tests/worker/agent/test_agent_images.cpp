// The job's image is made present in the waiting room before the job starts (ImagePrefetch,
// ContainerRuntime::ensure_image): an image that cannot be had ends the job as its own error after
// one attempt, never started and never charged; a slow pull is not billed. A real coordinator
// (HTTP on loopback, SQLite) with a FakeRuntime whose pulls a test shapes.
#include "tests/worker/agent/agent_fixture.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_images {

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;

using namespace gpupool::test::agent;

TEST_CASE("agent: an image the registry does not know fails the job after one attempt, unstarted",
          "[agent][image]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    const std::string missing = "localhost/gpupool/no-such-image:1";
    rt.missing_image(missing);
    RunningAgent ra(options(pool, work.path()), rt, probe);
    auto s = job_spec("no image");
    s.image = missing; // retry.max_attempts 3: none of them is used again
    const auto id = pool.submit(s);
    REQUIRE(eventually([&] { return state_of(pool, id) == "failed"; }));
    const json j = pool.job(id);
    const json history = j["attempt_history"];
    REQUIRE(history.size() == 1);
    CHECK(history[0]["state"] == "failed");
    CHECK(history[0]["started_at"].is_null()); // never started, so never billed
    CHECK(history[0]["cost_micro"] == 0);
    CHECK_THAT(history[0]["reason"].get<std::string>(),
               Catch::StartsWith("image unavailable: ") && Catch::Contains("manifest unknown"));
    CHECK_THAT(j["reason"].get<std::string>(), Catch::Contains("manifest unknown"));
    CHECK_THAT(pool.logs(id), Catch::Contains("gpupool-worker: image unavailable: ") &&
                                  Catch::Contains("manifest unknown"));
    CHECK(rt.started().empty());
    CHECK(rt.pulls() == std::vector<std::string>{missing});

    // The worker goes on: the next job, with an image that is there, runs.
    const auto next = pool.submit(job_spec("fine"));
    const auto name = container_of(rt, 0);
    REQUIRE(eventually([&] { return state_of(pool, next) == "running"; }));
    rt.exit(name, 0);
    REQUIRE(eventually([&] { return state_of(pool, next) == "succeeded"; }));
}

TEST_CASE("agent: a slow pull happens before the start, so the billed runtime excludes it", "[agent][image]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    rt.pull_ms(1500);
    RunningAgent ra(options(pool, work.path()), rt, probe);
    const auto id = pool.submit(job_spec("big image"));
    // Assigned and waiting for its image: not started, not running at the coordinator.
    REQUIRE(eventually([&] { return !rt.pulls().empty(); }));
    CHECK(rt.started().empty());
    CHECK(state_of(pool, id) != "running");
    const auto name = container_of(rt, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    std::this_thread::sleep_for(200ms);
    rt.exit(name, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "succeeded"; }));
    const json a = pool.job(id)["attempt_history"][0];
    const auto assigned = a["assigned_at"].get<std::int64_t>();
    const auto started = a["started_at"].get<std::int64_t>();
    const auto ended = a["ended_at"].get<std::int64_t>();
    INFO("assigned " << assigned << " started " << started << " ended " << ended);
    CHECK(started - assigned >= 1400); // the pull came first
    CHECK(ended - started < 1400);     // the billed runtime is the container's: about 200 ms
    // A second job on the same image does not wait for it again.
    const auto again = pool.submit(job_spec("same image"));
    const auto second = container_of(rt, 1);
    rt.exit(second, 0);
    REQUIRE(eventually([&] { return state_of(pool, again) == "succeeded"; }));
    CHECK(rt.pulls().size() == 1);
}

} // namespace test_agent_images
} // namespace
