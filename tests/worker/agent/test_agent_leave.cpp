// A worker that stops cleanly leaves the pool at once (POST /v1/workers/leave): an idle one exits
// within a second of its drain even in the middle of a long poll, the coordinator marks it offline
// at once and places nothing more on it. A real coordinator (HTTP on loopback, SQLite) with a
// FakeRuntime.
#include "tests/worker/agent/agent_fixture.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_leave {

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;

using namespace gpupool::test::agent;

namespace {

std::string presence_of(Pool& pool, const std::string& name) {
    auto admin = pool.client(pool.admin);
    const json listed = Pool::call(admin, "GET", "/v1/workers");
    for (const auto& w : listed["workers"]) {
        if (w["name"] == name) {
            return w["presence"].get<std::string>();
        }
    }
    return "";
}

} // namespace

TEST_CASE("agent: an idle worker drained in the middle of a long poll exits within a second, offline at once",
          "[agent][leave]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.poll_wait = 20s; // the default: the poll is parked at the coordinator when the drain comes
    LinkCounts counts;
    RunningAgent ra(o, rt, probe, {nullptr, counting_links(pool.url(), counts)});
    REQUIRE(eventually([&] { return counts.heartbeats > 0 && presence_of(pool, "test-box") == "online"; }));
    std::this_thread::sleep_for(300ms); // its poll is parked by now
    const auto t0 = std::chrono::steady_clock::now();
    ra.drain_and_join();
    const auto took = std::chrono::steady_clock::now() - t0;
    INFO("drain took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    CHECK(took < 1s);
    CHECK(ra.result);
    CHECK(counts.leaves == 1);
    CHECK(presence_of(pool, "test-box") == "offline"); // not 5 s later: at once

    // A job submitted now waits rather than going to the worker that left.
    const auto id = pool.submit(job_spec("after the leave"));
    std::this_thread::sleep_for(500ms);
    CHECK(state_of(pool, id) == "queued");
    CHECK(pool.job(id)["attempts"] == 0);
}

} // namespace test_agent_leave
} // namespace
