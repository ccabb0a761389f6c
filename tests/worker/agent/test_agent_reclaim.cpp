// Reclaim end to end: a real coordinator, the agent with a FakeRuntime, a StaticGpuProbe whose
// process list the test sets, and a fake /proc that says whose each process is. The owner starts a
// training on the shared GPU: the job there is asked to stop, stopped after its grace and handed back
// unpaid, the heartbeat names the GPU, nothing is placed there, and after the quiet period the GPU is
// shared again and the job runs again.
#include "tests/worker/agent/agent_fixture.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <mutex>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_reclaim {

using namespace gpupool;
using namespace gpupool::test::agent;

namespace {

void fake_process(const std::filesystem::path& root, std::int64_t pid, const std::string& cgroup) {
    const auto dir = root / std::to_string(pid);
    std::filesystem::create_directories(dir);
    test::write_file(dir / "cgroup", cgroup);
    test::write_file(dir / "stat", std::to_string(pid) + " (python3) S 1 " + std::to_string(pid) + " " +
                                       std::to_string(pid) + " 0 -1 4194560 5312 0 0 0 41 7 0 0 20 0 12 0 8841234 0\n");
}

bool got(test::FakeRuntime& engine, const std::string& name, int signo) {
    const auto c = engine.get(name);
    return c && std::find(c->signals.begin(), c->signals.end(), signo) != c->signals.end();
}

} // namespace

TEST_CASE("agent reclaim: the owner's process stops the job on its GPU unpaid and the GPU is shared again after "
          "the quiet period",
          "[agent][reclaim]") {
    Pool pool;
    test::TempDir work;
    test::TempDir proc;
    test::FakeRuntime engine;
    auto probe = one_gpu();
    JumpClock clock;
    std::mutex mu;
    std::vector<std::string> events;
    auto o = options(pool, work.path());
    o.gpu_watch = 50ms;
    o.reclaim_grace = 30s;
    o.reclaim_quiet = 10min;
    o.proc_root = proc.path();
    o.on_event = [&](const std::string& line) {
        std::lock_guard lock(mu);
        events.push_back(line);
    };
    auto said = [&](const std::string& part) {
        std::lock_guard lock(mu);
        return std::count_if(events.begin(), events.end(),
                             [&](const std::string& e) { return e.find(part) != std::string::npos; });
    };
    LinkCounts counts;
    RunningAgent ra(o, engine, probe, {&clock, counting_links(pool.url(), counts)});
    engine.ignore_term_next(true); // the job checkpoints slowly: it outlives its SIGTERM
    const auto job = pool.submit(job_spec("train"));
    const std::string first = container_of(engine);
    REQUIRE(eventually([&] { return state_of(pool, job) == "running"; }));

    // The job's own process on the GPU counts for nothing.
    fake_process(proc.path(), 4242,
                 "0::/machine.slice/libpod-" + test::FakeRuntime::container_id(first) + ".scope/container\n");
    probe.set_processes({{4242, "GPU-test-0", 10000}});
    const auto looks = probe.process_queries();
    REQUIRE(eventually([&] { return probe.process_queries() >= looks + 5; }));
    CHECK(engine.get(first)->signals.empty());
    CHECK(said("GPU 0 reclaimed: ") == 0);
    // The heartbeats say what the GPU holds (the pool's metrics show it).
    REQUIRE(eventually([&] { return counts.gpu_memory_used_mib == 10000; }));

    // The owner starts a training of their own on GPU 0.
    fake_process(proc.path(), 1234, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/train.scope\n");
    probe.set_processes({{4242, "GPU-test-0", 10000}, {1234, "GPU-test-0", 20000}});
    REQUIRE(eventually([&] { return said("GPU 0 reclaimed: a process you started (pid 1234) uses it") == 1; }));
    CHECK(said("the job there gets 30s to stop, then goes back to the queue (not charged)") == 1);
    REQUIRE(eventually([&] { return got(engine, first, SIGTERM); }));
    REQUIRE(eventually([&] { return counts.reclaimed_heartbeats > 0; }));
    CHECK_FALSE(got(engine, first, SIGKILL)); // its grace has not passed
    CHECK(state_of(pool, job) == "running");

    // The grace passes: stopped and handed back to the queue as the owner's preemption.
    clock.jump_ms(30'000);
    REQUIRE(eventually([&] { return got(engine, first, SIGKILL); }));
    REQUIRE(eventually([&] { return state_of(pool, job) == "queued"; }));
    const json history = pool.job(job)["attempt_history"];
    REQUIRE(history.size() == 1);
    CHECK(history[0]["state"] == "preempted");
    CHECK_THAT(history[0]["reason"].get<std::string>(),
               Catch::Contains("preempted by the GPU's owner: GPU 0 reclaimed by its owner"));

    // While the owner uses it, nothing is placed there (the heartbeats keep naming it).
    const auto beats = counts.reclaimed_heartbeats.load();
    REQUIRE(eventually([&] { return counts.reclaimed_heartbeats >= beats + 3; }));
    CHECK(engine.started().size() == 1);
    CHECK(state_of(pool, job) == "queued");
    CHECK(said("GPU 0 reclaimed: ") == 1); // told once

    // The owner's training ends; ten quiet minutes later the GPU is shared again and the job runs.
    probe.set_processes({});
    clock.jump_ms(600'000);
    REQUIRE(eventually([&] { return said("GPU 0 is shared again: none of your processes used it for 10m") == 1; }));
    const std::string second = container_of(engine, 1);
    CHECK(second != first);
    engine.exit(second, 0);
    REQUIRE(eventually([&] { return state_of(pool, job) == "succeeded"; }));
    ra.halt();
}

} // namespace test_agent_reclaim
} // namespace
