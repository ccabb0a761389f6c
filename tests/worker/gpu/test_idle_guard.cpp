// The idle guard's rules (worker/gpu/idle_guard.hpp) on made-up samples, the parsers for the driver's
// utilisation answers, and GpuWatch's idle looks on a StaticGpuProbe with a ManualClock: no driver,
// no waiting.
#include "core/util/clock.hpp"
#include "worker/agent/gpu_watch.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/gpu/idle_guard.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_idle_guard {

using namespace gpupool;
using namespace gpupool::worker;
using namespace std::chrono_literals;

namespace {
constexpr std::int64_t k_min = 60'000;

std::map<std::int64_t, bool> verdicts(std::initializer_list<std::pair<const std::int64_t, bool>> v) { return v; }
} // namespace

TEST_CASE("idle guard: a job idle for its timeout is warned once, then stopped", "[idle]") {
    IdleGuard guard; // warns at most 5 min before
    const std::vector<IdleWatched> watched{{7, 0, 30 * k_min}};
    std::int64_t now = 1'000'000;
    auto step = guard.look(now, watched, verdicts({{7, false}}));
    CHECK(step.warn.empty());
    CHECK(step.stop.empty());
    step = guard.look(now + 24 * k_min, watched, verdicts({{7, false}}));
    CHECK(step.warn.empty()); // 24 min idle: not yet within 5 min of 30
    step = guard.look(now + 25 * k_min, watched, verdicts({{7, false}}));
    REQUIRE(step.warn.size() == 1);
    CHECK(step.warn[0] == IdleWarning{7, 25 * k_min, 5 * k_min});
    step = guard.look(now + 27 * k_min, watched, verdicts({{7, false}}));
    CHECK(step.warn.empty()); // once
    CHECK(step.stop.empty());
    step = guard.look(now + 30 * k_min, watched, verdicts({{7, false}}));
    REQUIRE(step.stop.size() == 1);
    CHECK(step.stop[0] == IdleStop{7, 30 * k_min});
    CHECK(idle_reason(step.stop[0].idle_ms) == "idle on its GPU for 30 min");
}

TEST_CASE("idle guard: any use starts the idle time again, and a failed look counts as use", "[idle]") {
    IdleGuard guard;
    const std::vector<IdleWatched> watched{{7, 0, 10 * k_min}};
    guard.look(0, watched, verdicts({{7, false}}));
    guard.look(9 * k_min, watched, verdicts({{7, true}})); // it computed: the stretch ends
    auto step = guard.look(10 * k_min, watched, verdicts({{7, false}}));
    CHECK(step.stop.empty());
    step = guard.look(19 * k_min, watched, std::nullopt); // the driver did not answer
    CHECK(step.stop.empty());
    step = guard.look(20 * k_min, watched, verdicts({{7, false}}));
    CHECK(step.stop.empty()); // the idle time started again at 20 min
    step = guard.look(30 * k_min, watched, verdicts({{7, false}}));
    CHECK(step.stop.size() == 1);
}

TEST_CASE("idle guard: a short timeout warns halfway, and forgotten attempts start afresh", "[idle]") {
    IdleGuard guard;
    std::vector<IdleWatched> watched{{1, 0, 2 * k_min}, {2, 1, 0}};
    guard.look(0, watched, verdicts({{1, false}, {2, false}}));
    auto step = guard.look(k_min, watched, verdicts({{1, false}, {2, false}}));
    REQUIRE(step.warn.size() == 1); // at 1 of 2 min; attempt 2 has no limit
    CHECK(step.warn[0].attempt == 1);
    guard.look(k_min + 1, {}, verdicts({})); // no longer watched
    step = guard.look(2 * k_min + 1, watched, verdicts({{1, false}}));
    CHECK(step.stop.empty()); // a new stretch
}

TEST_CASE("idle guard: which attempts are busy, process by process and GPU by GPU", "[idle]") {
    const std::vector<IdleWatched> watched{{1, 0, k_min}, {2, 0, k_min}, {3, 1, k_min}, {4, 2, k_min}};
    SECTION("per process: each attempt by the processes that name it; the only one on a GPU takes the rest") {
        std::vector<AttributedActivity> procs{{{100, 0, 35, 4}, 1},  // attempt 1 computes
                                              {{101, 0, 0, 0}, 2},   // attempt 2 holds memory, does nothing
                                              {{102, 1, 12, 0}, std::nullopt}}; // GPU 1's only attempt
        auto busy = busy_attempts(watched, procs, {});
        CHECK(busy.at(1));
        CHECK_FALSE(busy.at(2));
        CHECK(busy.at(3));
        CHECK_FALSE(busy.at(4)); // no process on GPU 2 at all: idle
    }
    SECTION("a busy process nobody can be charged with on a shared GPU makes all there busy") {
        std::vector<AttributedActivity> procs{{{200, 0, 50, 10}, std::nullopt}}; // an MPS server, say
        auto busy = busy_attempts(watched, procs, {});
        CHECK(busy.at(1));
        CHECK(busy.at(2));
        CHECK_FALSE(busy.at(3));
    }
    SECTION("a process naming an attempt that is not on its GPU counts as nobody's") {
        std::vector<AttributedActivity> procs{{{300, 1, 50, 0}, 1}};
        auto busy = busy_attempts(watched, procs, {});
        CHECK(busy.at(3)); // GPU 1 is in use by someone: its attempt is not judged idle
        CHECK_FALSE(busy.at(1));
    }
    SECTION("without per-process figures, the whole GPU decides") {
        auto busy = busy_attempts(watched, std::nullopt, {{0, true}, {1, false}});
        CHECK(busy.at(1));
        CHECK(busy.at(2));
        CHECK_FALSE(busy.at(3));
        CHECK(busy.at(4)); // a GPU the driver did not report: not judged idle
    }
}

TEST_CASE("nvidia-smi utilisation and pmon answers are parsed, and garbage is an error", "[idle][gpu_probe]") {
    auto u = parse_gpu_utilisation_csv("GPU-a, 37, 5\nGPU-b, [N/A], 0\n");
    REQUIRE(u.has_value());
    REQUIRE(u->size() == 2);
    CHECK((*u)[0] == GpuUtilisation{"GPU-a", 37, 5});
    CHECK((*u)[1] == GpuUtilisation{"GPU-b", 0, 0});
    CHECK_FALSE(parse_gpu_utilisation_csv("GPU-a, 37\n").has_value());
    CHECK_FALSE(parse_gpu_utilisation_csv("GPU-a, 140, 0\n").has_value());

    const std::string pmon = "# gpu         pid  type    sm    mem    enc    dec    jpg    ofa    command \n"
                             "# Idx           #   C/G     %      %      %      %      %      %    name \n"
                             "    0      41235     C    63     12      -      -      -      -    python3        \n"
                             "    0      41236     C     -      -      -      -      -      -    python3        \n"
                             "    1          -     -     -      -      -      -      -      -    -              \n";
    auto p = parse_pmon(pmon);
    REQUIRE(p.has_value());
    REQUIRE(p->size() == 2);
    CHECK((*p)[0] == ProcessActivity{41235, 0, 63, 12});
    CHECK((*p)[1] == ProcessActivity{41236, 0, 0, 0});
    // An older driver's columns (no jpg/ofa).
    auto old = parse_pmon("# gpu pid type sm mem enc dec command\n# Idx # C/G % % % % name\n 0 77 C 5 1 - - x\n");
    REQUIRE(old.has_value());
    CHECK(old->at(0) == ProcessActivity{77, 0, 5, 1});
    CHECK_FALSE(parse_pmon(" 0 77 C 5 1 - - x\n").has_value());          // no header
    CHECK_FALSE(parse_pmon("# gpu pid type sm mem\n 0 abc C 5 1\n").has_value()); // not a pid
}

TEST_CASE("gpu watch: idle looks once per period, an idle job is warned, then stopped with the reason",
          "[idle][gpu_watch]") {
    util::ManualClock clock;
    StaticGpuProbe probe({{0, "GPU-a", "NVIDIA L4", "L4", 24576}});
    GpuWatch watch(probe, clock, 2s, 15s, {}, "/proc", 30s);
    REQUIRE(watch.discover());
    const std::vector<GpuJob> jobs{{9, 0, 0, 2 * k_min}}; // a whole GPU, 2 min idle limit
    // A process of this test's own (not a job) computing on the GPU, named by no attempt: the GPU's
    // only job is charged with it.
    probe.set_activity(GpuActivity{{{"GPU-a", 40, 3}}, std::vector<ProcessActivity>{{::getpid(), 0, 40, 3}}});
    CHECK(watch.judge(jobs).stop.empty());
    clock.advance_ms(3 * k_min);
    CHECK(watch.judge(jobs).stop.empty()); // busy at every look
    probe.set_activity(GpuActivity{{{"GPU-a", 0, 0}}, std::vector<ProcessActivity>{}});
    clock.advance_ms(29'000);
    CHECK(watch.judge(jobs).notes.empty()); // not due yet
    clock.advance_ms(1'000);
    CHECK(watch.judge(jobs).notes.empty()); // the first idle look starts the stretch
    clock.advance_ms(k_min);
    auto j = watch.judge(jobs); // 1 min idle of 2: warned
    REQUIRE(j.notes.size() == 1);
    CHECK(j.notes[0].first == 9);
    CHECK_THAT(j.notes[0].second, Catch::Contains("has not used its GPU for 1 min") &&
                                      Catch::Contains("stopped in 1 min"));
    clock.advance_ms(k_min);
    j = watch.judge(jobs);
    REQUIRE(j.stop.size() == 1);
    CHECK(j.stop[0] == std::pair<std::int64_t, std::string>{9, "idle on its GPU for 2 min"});
    // A job with no idle limit is never stopped for idling.
    clock.advance_ms(10 * k_min);
    CHECK(watch.judge({{10, 0, 0, 0}}).stop.empty());
}

TEST_CASE("gpu watch: with the worker's MPS daemon the enforcement is mps and the watchdog still watches",
          "[gpu_watch][mps]") {
    util::ManualClock clock;
    StaticGpuProbe probe({{0, "GPU-a", "NVIDIA L4", "L4", 24576}});
    GpuWatch watch(probe, clock, 2s, 15s);
    REQUIRE(watch.discover());
    CHECK(watch.enforcement() == MemoryEnforcement::watchdog);
    watch.set_mps(true);
    CHECK(watch.enforcement() == MemoryEnforcement::mps);
    // A client that raised its own limit (it is only an environment variable): the watchdog stops it.
    probe.set_processes({{999999, "GPU-a", 9000}});
    auto j = watch.judge({{4, 0, 6000, 0}});
    REQUIRE(j.stop.size() == 1);
    CHECK(j.stop[0].second == "exceeded its GPU memory share: 9000 MiB in use, limit 6000 MiB");
    watch.set_mps(false);
    CHECK(watch.enforcement() == MemoryEnforcement::watchdog);
}

} // namespace test_idle_guard
} // namespace
