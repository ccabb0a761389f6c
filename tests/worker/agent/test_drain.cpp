// The drain's clock: running jobs get the grace, then are stopped; run() returns once everything is
// delivered, or a while after nothing runs any more; drain_now cuts the grace and the wait short.
#include "worker/agent/drain.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_drain {

using namespace gpupool;
using namespace std::chrono_literals;

TEST_CASE("drain: running jobs get the grace, then are stopped, and it ends once all is delivered", "[agent][drain]") {
    worker::Drain drain(300s, 60s);
    auto s = drain.step(1'000, false, 2, false);
    CHECK(s.started);
    CHECK_FALSE(s.stop_running);
    CHECK_FALSE(s.done);
    s = drain.step(2'000, false, 2, false);
    CHECK_FALSE(s.started); // once
    CHECK_FALSE(s.stop_running);
    s = drain.step(301'000, false, 2, false);
    CHECK(s.stop_running); // the grace is over
    CHECK_FALSE(s.done);
    s = drain.step(302'000, false, 0, true);
    CHECK(s.done);
    CHECK_FALSE(s.gave_up);
}

TEST_CASE("drain: with the coordinator away it gives up give_up_after once nothing runs", "[agent][drain]") {
    worker::Drain drain(300s, 60s);
    CHECK_FALSE(drain.step(0, false, 1, false).done);
    CHECK_FALSE(drain.step(10'000, false, 0, false).done); // nothing runs: the wait starts now
    CHECK_FALSE(drain.step(69'999, false, 0, false).done);
    const auto s = drain.step(70'000, false, 0, false);
    CHECK(s.done);
    CHECK(s.gave_up);
}

TEST_CASE("drain: drain_now stops the jobs at once and waits at most a few seconds", "[agent][drain]") {
    worker::Drain drain(300s, 60s);
    CHECK(drain.step(0, false, 1, false).started);
    auto s = drain.step(1'000, true, 1, false); // drain_now() after drain()
    CHECK(s.hurried);
    CHECK(s.stop_running);
    CHECK_FALSE(drain.step(2'000, true, 1, false).hurried); // once
    CHECK_FALSE(drain.step(3'000, true, 0, false).done);
    CHECK_FALSE(drain.step(3'000 + worker::Drain::k_hurried_give_up.count() - 1, true, 0, false).done);
    s = drain.step(3'000 + worker::Drain::k_hurried_give_up.count(), true, 0, false);
    CHECK(s.done);
    CHECK(s.gave_up);

    // drain_now() first: the jobs stop at once; no grace was ever announced.
    worker::Drain hurried(300s, 60s);
    s = hurried.step(0, true, 1, false);
    CHECK(s.hurried);
    CHECK_FALSE(s.started);
    CHECK(s.stop_running);
}

} // namespace test_drain
} // namespace
