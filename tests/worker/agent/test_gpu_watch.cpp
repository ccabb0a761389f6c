// GpuWatch on a StaticGpuProbe and a ManualClock: the watchdog looks once per period and only where
// it is the enforcement, health is asked per period or at once, and only changes are reported.
#include "core/coordinator/clock.hpp"
#include "worker/agent/gpu_watch.hpp"

#include <catch2/catch.hpp>

using namespace gpupool;
using namespace std::chrono_literals;

namespace {

worker::StaticGpuProbe two_gpus() {
    return worker::StaticGpuProbe({{0, "GPU-a", "NVIDIA L4", "L4", 24576}, {1, "GPU-b", "NVIDIA L4", "L4", 24576}});
}

} // namespace

TEST_CASE("gpu watch: discovery, memory by index, and no watchdog without GPUs", "[gpu_watch]") {
    coordinator::ManualClock clock;
    auto probe = two_gpus();
    worker::GpuWatch watch(probe, clock, 2s, 15s);
    REQUIRE(watch.discover());
    CHECK(watch.gpus().size() == 2);
    CHECK(watch.enforcement() == worker::MemoryEnforcement::watchdog);
    CHECK(watch.memory_mib(1) == 24576);
    CHECK(watch.memory_mib(7) == 0);

    worker::StaticGpuProbe none({});
    worker::GpuWatch cpu_only(none, clock, 2s, 15s);
    REQUIRE(cpu_only.discover());
    CHECK(cpu_only.enforcement() == worker::MemoryEnforcement::none);
    CHECK(cpu_only.overuse({{1, 0, 100}}).empty());
    CHECK(none.process_queries() == 0);
    CHECK_FALSE(cpu_only.check_health(true)); // no GPUs: nothing to ask
}

TEST_CASE("gpu watch: the watchdog looks once per period and names the attempt over its share", "[gpu_watch]") {
    coordinator::ManualClock clock;
    auto probe = two_gpus();
    worker::GpuWatch watch(probe, clock, 2s, 15s);
    REQUIRE(watch.discover());
    const std::vector<worker::WatchedAttempt> running{{5, 0, 12288}};
    probe.set_processes({{999999, "GPU-a", 12000}}); // within its share (the GPU's only attempt)
    CHECK(watch.overuse(running).empty());
    CHECK(probe.process_queries() == 1);
    probe.set_processes({{999999, "GPU-a", 20000}});
    clock.advance_ms(1'999);
    CHECK(watch.overuse(running).empty()); // not due yet: the driver is not asked
    CHECK(probe.process_queries() == 1);
    clock.advance_ms(1);
    const auto over = watch.overuse(running);
    REQUIRE(over.size() == 1);
    CHECK(over[0] == worker::Overuse{5, 20000, 12288});
    clock.advance_ms(2'000);
    CHECK(watch.overuse({}).empty()); // nothing watched: the driver is not asked
    CHECK(probe.process_queries() == 2);
}

TEST_CASE("gpu watch: health is asked per period or at once, and a verdict only when it changes", "[gpu_watch]") {
    coordinator::ManualClock clock;
    auto probe = two_gpus();
    worker::GpuWatch watch(probe, clock, 2s, 15s);
    REQUIRE(watch.discover());
    CHECK_FALSE(watch.check_health()); // healthy, as before: nothing to report
    CHECK(probe.status_queries() == 1);
    probe.set_status(std::vector<worker::GpuStatus>{{"GPU-a", 0}, {"GPU-b", 3}}); // ECC errors on GPU 1
    clock.advance_ms(1'000);
    CHECK_FALSE(watch.check_health()); // not due
    CHECK(probe.status_queries() == 1);
    auto verdict = watch.check_health(true); // a GPU job failed: ask now
    REQUIRE(verdict);
    REQUIRE(verdict->size() == 1);
    CHECK((*verdict)[0].index == 1);
    CHECK(watch.unhealthy() == *verdict);
    clock.advance_ms(15'000);
    CHECK_FALSE(watch.check_health()); // still the same verdict
    probe.set_status(std::nullopt);
    clock.advance_ms(15'000);
    verdict = watch.check_health();
    REQUIRE(verdict);
    CHECK(verdict->empty()); // healthy again
    CHECK(watch.unhealthy().empty());
}
