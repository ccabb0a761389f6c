// The container engine misbehaves under a running job: its container is removed behind the
// worker's back, or the engine stops answering. The attempt ends as a worker fault (once), its
// slot is freed, the job runs again, and max_runtime holds meanwhile.
#include "tests/worker/agent/agent_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_engine_faults {

using namespace gpupool;
using namespace gpupool::test::agent;

TEST_CASE("agent: a container removed behind the worker's back is a worker fault, and the job runs again",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime engine;
    auto probe = one_gpu();
    RunningAgent ra(options(pool, work.path()), engine, probe);
    const auto id = pool.submit(job_spec("vanishing"));
    const std::string first = container_of(engine);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    engine.vanish(first); // `podman rm -f`
    expect_lost_then_rerun(pool, engine, id, first, "disappeared while it ran");
}

TEST_CASE("agent: a worker whose engine is not usable says so and does not join the pool", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime engine;
    engine.fail_check(true);
    auto probe = one_gpu();
    worker::Agent agent(options(pool, work.path()), engine, probe);
    auto st = agent.run();
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains("not usable"));
    auto admin = pool.client(pool.admin);
    CHECK(Pool::call(admin, "GET", "/v1/workers")["workers"].empty()); // never registered
    CHECK_FALSE(std::filesystem::exists(work.path() / "worker.json"));
}

TEST_CASE("agent: max_runtime holds while the engine does not answer, and a silent engine ends the attempt",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime engine;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.engine_unanswered_max = 2s;
    RunningAgent ra(o, engine, probe);
    auto spec = job_spec("stuck");
    spec.resources.max_runtime_s = 1;
    spec.retry.max_attempts = 1;
    const auto id = pool.submit(spec);
    const std::string name = container_of(engine);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    engine.ignore_term_next(false);
    engine.fail_poll(true);
    // Past max_runtime the job gets its SIGTERM although the engine cannot say how it is.
    REQUIRE(eventually([&] {
        const auto s = engine.get(name)->signals;
        return std::find(s.begin(), s.end(), SIGTERM) != s.end();
    }));
    // The engine stays silent: the attempt ends as a worker fault, with a SIGKILL to be sure.
    REQUIRE(eventually([&] { return state_of(pool, id) != "running"; }, 10s));
    const auto j = pool.job(id);
    CHECK(j["attempt_history"][0]["state"] == "lost");
    CHECK_THAT(j["attempt_history"][0]["reason"].get<std::string>(), Catch::Contains("could not say how the job is"));
    const auto s = engine.get(name)->signals;
    CHECK(std::find(s.begin(), s.end(), SIGKILL) != s.end());
}

} // namespace test_agent_engine_faults
} // namespace
