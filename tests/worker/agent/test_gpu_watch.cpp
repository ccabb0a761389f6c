// GpuWatch on a StaticGpuProbe and a ManualClock: the watchdog looks once per period and only where
// it is the enforcement, health is asked per period or at once, and only changes are reported.
#include "core/util/clock.hpp"
#include "tests/support.hpp"
#include "worker/agent/gpu_watch.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_gpu_watch {

using namespace gpupool;
using namespace std::chrono_literals;

namespace {

worker::StaticGpuProbe two_gpus() {
    return worker::StaticGpuProbe({{0, "GPU-a", "NVIDIA L4", "L4", 24576}, {1, "GPU-b", "NVIDIA L4", "L4", 24576}});
}

// A process in a fake /proc tree: its cgroup and a stat line in the kernel's shape.
void fake_process(const std::filesystem::path& root, std::int64_t pid, const std::string& cgroup) {
    const auto dir = root / std::to_string(pid);
    std::filesystem::create_directories(dir);
    test::write_file(dir / "cgroup", cgroup);
    test::write_file(dir / "stat", std::to_string(pid) + " (python3) S 1 " + std::to_string(pid) + " " +
                                       std::to_string(pid) + " 0 -1 4194560 5312 0 0 0 41 7 0 0 20 0 12 0 8841234 0\n");
}

} // namespace

TEST_CASE("gpu watch: discovery, memory by index, and no watchdog without GPUs", "[gpu_watch]") {
    util::ManualClock clock;
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
    util::ManualClock clock;
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
    util::ManualClock clock;
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

TEST_CASE("gpu watch: the owner's process reclaims its GPU and one driver query serves both looks", "[gpu_watch][reclaim]") {
    util::ManualClock clock;
    auto probe = two_gpus();
    test::TempDir proc;
    const std::string job_id(64, 'c');
    fake_process(proc.path(), 4242, "0::/machine.slice/libpod-" + job_id + ".scope/container\n");
    fake_process(proc.path(), 1234, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/code.scope\n");
    worker::GpuWatch watch(probe, clock, 2s, 15s, {30'000, 600'000}, proc.path());
    REQUIRE(watch.discover());
    const std::vector<worker::JobMark> jobs{{5, 0, job_id, 0}};
    const std::vector<worker::WatchedAttempt> watched{{5, 0, 12288}};

    // Only the job's own process: nothing happens.
    probe.set_processes({{4242, "GPU-a", 10000}});
    auto step = watch.reclaim(jobs);
    CHECK(step.changes.empty());
    CHECK(step.term.empty());
    CHECK(watch.overuse(watched).empty());
    CHECK(probe.process_queries() == 1); // one query for both looks
    CHECK(watch.reclaimed().empty());

    // The owner starts a 20 GB training on GPU 0 (and a process we cannot see the /proc of on GPU 1).
    probe.set_processes({{4242, "GPU-a", 10000}, {1234, "GPU-a", 20000}, {999999, "GPU-b", 100}});
    clock.advance_ms(1'000);
    CHECK(watch.reclaim(jobs).changes.empty()); // not due yet: the driver is not asked
    CHECK(probe.process_queries() == 1);
    clock.advance_ms(1'000);
    step = watch.reclaim(jobs);
    REQUIRE(step.changes.size() == 1);
    CHECK(step.changes[0] == worker::ReclaimChange{0, true, 1234, 1});
    CHECK(step.term == std::vector<std::int64_t>{5});
    CHECK(watch.reclaimed() == std::vector<std::int64_t>{0});
    CHECK(watch.reclaimed(0));
    CHECK_FALSE(watch.reclaimed(1)); // an unreadable pid reclaims nothing
    // The owner's memory is not the job's: the watchdog does not stop it as over its share (it goes
    // back to the queue unpaid after its grace instead).
    CHECK(watch.overuse(watched).empty());
    CHECK(probe.process_queries() == 2);

    // The grace runs out at a look; ten quiet minutes later the GPU is offered again.
    clock.advance_ms(30'000);
    CHECK(watch.reclaim(jobs).kill == std::vector<std::int64_t>{5});
    probe.set_processes({});
    clock.advance_ms(600'000);
    step = watch.reclaim({});
    REQUIRE(step.changes.size() == 1);
    CHECK_FALSE(step.changes[0].reclaimed);
    CHECK(watch.reclaimed().empty());

    // A machine without GPUs never asks.
    worker::StaticGpuProbe none({});
    worker::GpuWatch cpu_only(none, clock, 2s, 15s, {}, proc.path());
    REQUIRE(cpu_only.discover());
    CHECK(cpu_only.reclaim({}).changes.empty());
    CHECK(none.process_queries() == 0);
}

namespace {

// A driver whose process query fails (nvidia-smi hangs, or answers what cannot be parsed).
class NoProcessList final : public worker::GpuProbe {
public:
    Result<std::vector<worker::GpuInfo>> list() override {
        return std::vector<worker::GpuInfo>{{0, "GPU-a", "NVIDIA L4", "L4", 24576}};
    }
    Result<std::vector<worker::GpuProcess>> processes() override {
        return make_error(ErrorCode::io, "nvidia-smi: line 1: expected 3 fields");
    }
};

} // namespace

TEST_CASE("gpu watch: a process list that cannot be had reclaims nothing and stops nothing", "[gpu_watch][reclaim]") {
    util::ManualClock clock;
    NoProcessList probe;
    worker::GpuWatch watch(probe, clock, 2s, 15s, {30'000, 600'000}, "/nonexistent-proc");
    REQUIRE(watch.discover());
    for (int i = 0; i < 5; ++i) {
        const auto step = watch.reclaim({{5, 0, "", 0}});
        CHECK(step.changes.empty());
        CHECK(step.term.empty());
        CHECK(watch.overuse({{5, 0, 100}}).empty());
        clock.advance_ms(2'000);
    }
    CHECK(watch.reclaimed().empty());
}

TEST_CASE("gpu watch: memory in use per GPU comes from the last process list, in the order asked",
          "[gpu_watch][metrics]") {
    util::ManualClock clock;
    auto probe = two_gpus();
    worker::GpuWatch watch(probe, clock, 2s, 15s);
    REQUIRE(watch.discover());
    CHECK(watch.memory_used_mib({0, 1}).empty()); // nothing asked yet: unknown, not zero
    probe.set_processes({{11, "GPU-a", 1000}, {12, "GPU-b", 300}, {13, "GPU-a", 24}, {14, "GPU-gone", 5000}});
    (void)watch.reclaim({});
    CHECK(watch.memory_used_mib({0, 1}) == std::vector<std::int64_t>{1024, 300});
    CHECK(watch.memory_used_mib({1, 0}) == std::vector<std::int64_t>{300, 1024});
    CHECK(watch.memory_used_mib({1}) == std::vector<std::int64_t>{300});
    // A driver whose process list cannot be had: unknown, never zero.
    NoProcessList failing;
    worker::GpuWatch blind(failing, clock, 2s, 15s, {30'000, 600'000}, "/nonexistent-proc");
    REQUIRE(blind.discover());
    (void)blind.reclaim({});
    CHECK(blind.memory_used_mib({0}).empty());
}

} // namespace test_gpu_watch
} // namespace
