// The owner's pause (<work_dir>/paused, written by `gpupool worker pause`): the running worker takes
// no new jobs, its running job goes on, the pool shows it paused and says why jobs wait; resume
// shares again.
#include "tests/worker/agent/agent_fixture.hpp"

#include <catch2/catch.hpp>

#include <mutex>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_pause {

using namespace gpupool;
using namespace gpupool::test::agent;

namespace {

std::string presence(Pool& pool) {
    auto c = pool.client(pool.admin);
    return Pool::call(c, "GET", "/v1/workers")["workers"][0]["presence"].get<std::string>();
}

} // namespace

TEST_CASE("agent pause: no new jobs while paused, the running one goes on, presence and waiting reason say so",
          "[agent][pause]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime engine;
    auto probe = one_gpu();
    std::mutex mu;
    std::vector<std::string> events;
    auto o = options(pool, work.path());
    o.on_event = [&](const std::string& line) {
        std::lock_guard lock(mu);
        events.push_back(line);
    };
    auto said = [&](const std::string& part) {
        std::lock_guard lock(mu);
        return std::any_of(events.begin(), events.end(),
                           [&](const std::string& e) { return e.find(part) != std::string::npos; });
    };
    LinkCounts counts;
    RunningAgent ra(o, engine, probe, {nullptr, counting_links(pool.url(), counts)});
    const auto first = pool.submit(job_spec("first"));
    const std::string running = container_of(engine);
    REQUIRE(eventually([&] { return state_of(pool, first) == "running"; }));
    REQUIRE(eventually([&] { return presence(pool) == "online"; }));

    REQUIRE(worker::pause_sharing(work.path(), "my own training"));
    CHECK_THAT(*worker::paused_since(work.path()), Catch::Contains("my own training"));
    REQUIRE(eventually([&] { return presence(pool) == "paused"; }));
    CHECK(eventually([&] { return said("paused by the owner: no new jobs (1 running go on)"); }));
    const auto second = pool.submit(job_spec("second"));
    REQUIRE(eventually([&] {
        return pool.job(second)["waiting_reason"].get<std::string>().find("paused by its owner") != std::string::npos;
    }));
    CHECK(state_of(pool, first) == "running"); // not stopped by a pause
    engine.exit(running, 0);
    REQUIRE(eventually([&] { return state_of(pool, first) == "succeeded"; }));
    const auto beats = counts.paused_heartbeats.load();
    REQUIRE(eventually([&] { return counts.paused_heartbeats >= beats + 3; })); // still nothing new
    CHECK(state_of(pool, second) == "queued");

    REQUIRE(worker::resume_sharing(work.path()));
    CHECK_FALSE(worker::paused_since(work.path()));
    REQUIRE(eventually([&] { return state_of(pool, second) != "queued"; }));
    CHECK(eventually([&] { return said("sharing again"); }));
    CHECK(presence(pool) == "online");
    ra.halt();
}

} // namespace test_agent_pause
} // namespace
