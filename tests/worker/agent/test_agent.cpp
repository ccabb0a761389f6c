// The worker agent against a real coordinator (HTTP on loopback, SQLite file) with a FakeRuntime
// standing in for podman: logs, outputs, exit codes, stop orders, max_runtime, a coordinator that
// goes away and comes back, restarts that re-attach, and drains.
#include "core/archive/archive.hpp"
#include "tests/worker/agent/agent_fixture.hpp"
#include "worker/agent/spool.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent {

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;

using namespace gpupool::test::agent;

TEST_CASE("agent: a job's environment, logs, outputs and exit code reach the coordinator", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    RunningAgent ra(options(pool, work.path()), rt, probe);
    const auto id = pool.submit(job_spec("hello"));
    const auto name = container_of(rt);
    auto c = rt.get(name);
    REQUIRE(c);
    const auto& env = c->spec.env;
    CHECK(env.at("GPUPOOL_JOB_ID") == std::to_string(id));
    CHECK(env.at("GPUPOOL_ATTEMPT") == "1");
    CHECK(env.at("GPUPOOL_GPU_FRACTION") == "0.500");
    CHECK(env.at("GPUPOOL_GPU_MEMORY_MB") == "12288"); // half of 24576 MiB
    CHECK(env.at("GPUPOOL_OUTPUT_DIR") == "/outputs");
    CHECK(env.at("GPUPOOL_PARAM_LR") == "0.1");
    CHECK(env.at("MODE") == "test");
    CHECK(env.at("HF_HOME") == "/team-cache/huggingface"); // the job names no models
    CHECK(env.at("GPUPOOL_MODEL_CACHE") == "/cache");
    CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0");
    CHECK(env.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == 0); // no --mps
    REQUIRE(c->spec.gpu_index == std::optional<std::int64_t>(0));
    CHECK(c->spec.labels.at("gpupool.job") == std::to_string(id));
    CHECK(c->spec.memory_mib == 64);
    CHECK(c->spec.cpu_milli == 100);
    REQUIRE(c->spec.mounts.size() == 4);
    CHECK(c->spec.mounts[0].container == "/work");
    CHECK(c->spec.mounts[0].read_only);
    CHECK(c->spec.mounts[1].container == "/outputs");
    CHECK_FALSE(c->spec.mounts[1].read_only);
    CHECK(c->spec.mounts[2].container == "/team-cache");
    CHECK(c->spec.mounts[3].container == "/cache"); // the worker's model cache
    CHECK(c->spec.mounts[3].read_only);
    // The team's own cache, not one shared by every team's jobs.
    CHECK(c->spec.mounts[2].host.parent_path().filename() == "teams");
    CHECK(c->spec.mounts[2].host.filename() != "0");

    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    // Logs stream while the job runs, within about a second.
    rt.write(name, "line 1\n");
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(eventually([&] { return pool.logs(id) == "line 1\n"; }, 3s));
    CHECK(std::chrono::steady_clock::now() - t0 < 1500ms);
    rt.write(name, "line 2\n");
    std::ofstream(c->spec.mounts[1].host / "result.txt") << "42\n";
    rt.exit(name, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "succeeded"; }));
    CHECK(pool.logs(id) == "line 1\nline 2\n");
    auto cl = pool.client(pool.member);
    auto tar = cl.get("/v1/jobs/" + std::to_string(id) + "/outputs");
    REQUIRE(tar);
    REQUIRE(tar->status == 200);
    test::TempDir out;
    auto files = archive::unpack_archive(tar->body, out.path());
    REQUIRE(files);
    CHECK(files->written == std::vector<std::string>{"result.txt"});
    std::ifstream in(out.path() / "result.txt");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    CHECK(text == "42\n");
    // Delivered: the container removed and the spool gone (two steps of the agent's drop, in that
    // order: waiting for the first alone raced the second).
    REQUIRE(eventually([&] { return rt.get(name)->removed; }));
    CHECK(eventually([&] { return std::filesystem::is_empty(work.path() / "attempts"); }));
}

TEST_CASE("agent: a failing job's exit code and a cancel order that stops a job within 2 s", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    RunningAgent ra(options(pool, work.path()), rt, probe);

    auto failing = job_spec("fails");
    failing.retry.max_attempts = 1;
    const auto id = pool.submit(failing);
    const auto name = container_of(rt, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    rt.exit(name, 3);
    REQUIRE(eventually([&] { return state_of(pool, id) == "failed"; }));
    CHECK(pool.job(id)["exit_code"] == 3);

    const auto id2 = pool.submit(job_spec("cancelled"));
    const auto name2 = container_of(rt, 1);
    REQUIRE(eventually([&] { return state_of(pool, id2) == "running"; }));
    auto cl = pool.client(pool.member);
    Pool::call(cl, "POST", "/v1/jobs/" + std::to_string(id2) + "/cancel", json::object());
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(eventually([&] { return !rt.get(name2)->signals.empty(); }, 3s));
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    CHECK(rt.get(name2)->signals.front() == SIGTERM);
    CHECK(state_of(pool, id2) == "cancelled");
    REQUIRE(eventually([&] { return rt.get(name2)->removed; }));
}

TEST_CASE("agent: max_runtime is enforced on the worker with SIGTERM, then SIGKILL", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    RunningAgent ra(options(pool, work.path()), rt, probe);
    auto s = job_spec("slow");
    s.resources.max_runtime_s = 1;
    s.retry.max_attempts = 1;
    rt.ignore_term_next(true);
    const auto id = pool.submit(s);
    const auto name = container_of(rt);
    REQUIRE(eventually([&] { return state_of(pool, id) == "failed"; }, 10s));
    auto c = rt.get(name);
    REQUIRE(c->signals.size() >= 2);
    CHECK(c->signals[0] == SIGTERM);
    CHECK(c->signals[1] == SIGKILL);
    auto j = pool.job(id);
    CHECK(j["exit_code"] == 137);
    CHECK_THAT(j["reason"].get<std::string>(), Catch::Contains("exceeded max_runtime 1s"));
}

TEST_CASE("agent: outputs over outputs.max_size fail the job with the sizes in the reason and the log", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    RunningAgent ra(options(pool, work.path()), rt, probe);
    auto s = job_spec("big");
    s.outputs.max_size_mib = 1;
    s.retry.max_attempts = 1;
    const auto id = pool.submit(s);
    const auto name = container_of(rt);
    auto c = rt.get(name);
    std::ofstream(c->spec.mounts[1].host / "big.bin") << std::string(2 * 1024 * 1024, 'x');
    rt.exit(name, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "failed"; }));
    auto j = pool.job(id);
    CHECK_THAT(j["reason"].get<std::string>(), Catch::Contains("over outputs.max_size 1.0 MiB"));
    CHECK_THAT(j["reason"].get<std::string>(), Catch::Contains("big.bin (2.0 MiB)"));
    CHECK_THAT(pool.logs(id), Catch::Contains("outputs not uploaded"));
}

TEST_CASE("agent: with the coordinator away the job keeps running, logs and result arrive complete afterwards",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    LinkCounts counts;
    RunningAgent ra(options(pool, work.path()), rt, probe, {nullptr, counting_links(pool.url(), counts)});
    const auto id = pool.submit(job_spec("resilient"));
    const auto name = container_of(rt);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    rt.write(name, "before\n");
    REQUIRE(eventually([&] { return pool.logs(id) == "before\n"; }));

    pool.stop();
    std::string expected = "before\n";
    for (int i = 0; i < 50; ++i) {
        const std::string line = "while away " + std::to_string(i) + "\n";
        rt.write(name, line);
        expected += line;
    }
    const auto failed_before = counts.unavailable.load();
    REQUIRE(eventually([&] { return counts.unavailable >= failed_before + 4; })); // failed deliveries, backoffs
    CHECK_FALSE(rt.get(name)->exit); // the job was left alone
    std::ofstream(rt.get(name)->spec.mounts[1].host / "out.txt") << "done\n";
    rt.exit(name, 0);
    // The agent saw the exit while the coordinator was away: the spool says it ended.
    REQUIRE(eventually([&] {
        const auto spooled = worker::Spool(work.path()).load(0);
        return spooled.size() == 1 && !spooled[0].running();
    }));

    pool.start();
    REQUIRE(eventually([&] { return state_of(pool, id) == "succeeded"; }, 15s));
    CHECK(pool.logs(id) == expected); // complete, in order, nothing twice
    auto j = pool.job(id);
    CHECK(j["attempts"] == 1);
}

TEST_CASE("agent: a restarted worker re-attaches to its running container and delivers it", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    std::int64_t id = 0;
    std::string name;
    std::int64_t worker_id = 0;
    {
        RunningAgent ra(options(pool, work.path()), rt, probe);
        id = pool.submit(job_spec("long"));
        name = container_of(rt);
        REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
        rt.write(name, "first life\n");
        REQUIRE(eventually([&] { return pool.logs(id) == "first life\n"; }));
        worker_id = ra.agent.worker_id();
        ra.halt(); // like a crash: nothing handed back
    }
    CHECK_FALSE(rt.get(name)->exit);
    RunningAgent again(options(pool, work.path()), rt, probe);
    REQUIRE(eventually([&] { return rt.get(name)->reattached == 1; }));
    CHECK(again.agent.worker_id() == worker_id); // the same identity, from worker.json
    rt.write(name, "second life\n");
    rt.exit(name, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "succeeded"; }));
    CHECK(pool.logs(id) == "first life\nsecond life\n");
}

TEST_CASE("agent: an attempt whose container vanished during a restart is reported, and the job runs again",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    std::int64_t id = 0;
    std::string name;
    {
        RunningAgent ra(options(pool, work.path()), rt, probe);
        id = pool.submit(job_spec("rebooted"));
        name = container_of(rt);
        REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
        ra.halt();
    }
    rt.vanish(name);
    RunningAgent again(options(pool, work.path()), rt, probe);
    // The second attempt starts on the same worker (the only one) as a new container.
    expect_lost_then_rerun(pool, rt, id, name, "restarted");
}

TEST_CASE("agent: drain lets a short job finish, hands a long one back, and takes no new work", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.drain_grace = 1s;
    LinkCounts counts;
    RunningAgent ra(o, rt, probe, {nullptr, counting_links(pool.url(), counts)});
    const auto quick = pool.submit(job_spec("quick"));
    const auto slow = pool.submit(job_spec("slow"));
    const auto a = container_of(rt, 0);
    const auto b = container_of(rt, 1);
    REQUIRE(eventually([&] { return state_of(pool, quick) == "running" && state_of(pool, slow) == "running"; }));
    const std::string quick_name = rt.get(a)->spec.env.at("GPUPOOL_JOB_ID") == std::to_string(quick) ? a : b;
    const std::string slow_name = quick_name == a ? b : a;
    ra.agent.drain();
    REQUIRE(eventually([&] { return counts.draining_heartbeats > 0; })); // the coordinator knows
    const auto later = pool.submit(job_spec("later"));
    rt.exit(quick_name, 0);
    ra.thread.join(); // returns once both are delivered
    CHECK(state_of(pool, quick) == "succeeded");
    CHECK(rt.get(slow_name)->signals.front() == SIGTERM);
    auto j = pool.job(slow);
    CHECK(j["state"] == "queued"); // handed back, not failed
    CHECK(j["attempt_history"][0]["state"] == "preempted");
    CHECK(state_of(pool, later) == "queued");
    CHECK(rt.started().size() == 2);
}

TEST_CASE("agent: a job the runtime cannot start is a worker fault, not the job's failure", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    rt.fail_start(true);
    auto s = job_spec("unlucky");
    s.retry.max_attempts = 2;
    RunningAgent ra(options(pool, work.path()), rt, probe);
    const auto id = pool.submit(s);
    REQUIRE(eventually([&] { return state_of(pool, id) == "failed"; }));
    auto j = pool.job(id);
    const json history = j["attempt_history"];
    REQUIRE(history.size() == 2);
    CHECK(history[0]["state"] == "lost");
    CHECK_THAT(history[0]["reason"].get<std::string>(), Catch::Contains("image not found"));
    CHECK_THAT(pool.logs(id), Catch::Contains("could not start on fake: fake: image not found"));
}

TEST_CASE("backoff: delays grow exponentially with jitter and stay under the cap", "[agent]") {
    worker::Backoff b(100ms, 2s, 42);
    std::vector<std::int64_t> d;
    for (int i = 0; i < 8; ++i) {
        d.push_back(b.next_delay().count());
    }
    // n-th failure waits within [c/2, c] for c = 100 * 2^(n-1), capped at 2000.
    const std::int64_t ceilings[] = {100, 200, 400, 800, 1600, 2000, 2000, 2000};
    for (int i = 0; i < 8; ++i) {
        INFO("failure " << i + 1 << " waited " << d[static_cast<std::size_t>(i)]);
        CHECK(d[static_cast<std::size_t>(i)] >= ceilings[i] / 2);
        CHECK(d[static_cast<std::size_t>(i)] <= ceilings[i]);
    }
    worker::Backoff other(100ms, 2s, 43);
    std::vector<std::int64_t> d2;
    for (int i = 0; i < 8; ++i) {
        d2.push_back(other.next_delay().count());
    }
    CHECK(d != d2); // jitter: two workers do not retry in lockstep
    b.reset();
    CHECK(b.next_delay().count() <= 100);
}

TEST_CASE("agent: the GPU memory watchdog stops a fractional job that holds more than its share", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.gpu_watch = 100ms;
    RunningAgent ra(o, rt, probe);
    auto s = job_spec("greedy"); // half of a 24576 MiB GPU: 12288 MiB
    s.retry.max_attempts = 1;
    const auto id = pool.submit(s);
    const auto name = container_of(rt);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    // Within its share (pid 999999 does not exist: attributed as the GPU's only attempt).
    probe.set_processes({{999999, "GPU-test-0", 12000}});
    const auto looks = probe.process_queries();
    REQUIRE(eventually([&] { return probe.process_queries() >= looks + 3; })); // the watchdog looked 3 times
    CHECK(rt.get(name)->signals.empty());
    probe.set_processes({{999999, "GPU-test-0", 20000}});
    REQUIRE(eventually([&] { return state_of(pool, id) == "failed"; }));
    CHECK(rt.get(name)->signals.front() == SIGTERM);
    CHECK_THAT(pool.job(id)["reason"].get<std::string>(),
               Catch::Contains("exceeded its GPU memory share: 20000 MiB in use, limit 12288 MiB"));
}

TEST_CASE("agent: a banned worker stops with an error that says what to do", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    RunningAgent ra(options(pool, work.path()), rt, probe);
    REQUIRE(eventually([&] { return ra.agent.worker_id() != 0; }));
    auto admin = pool.client(pool.admin);
    Pool::call(admin, "POST", "/v1/admin/workers/" + std::to_string(ra.agent.worker_id()) + "/ban", json::object());
    ra.thread.join();
    REQUIRE_FALSE(ra.result);
    CHECK(ra.result.error().code == ErrorCode::forbidden);
    CHECK_THAT(ra.result.error().message, Catch::Contains("worker.json"));
}

TEST_CASE("agent: a preempted job is stopped within 2 s and the GPU goes to the higher-priority job", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    RunningAgent ra(options(pool, work.path()), rt, probe);
    auto low = job_spec("low");
    low.resources.gpu_milli = 1000;
    low.priority = recipe::Priority::low;
    const auto lid = pool.submit(low);
    const auto victim = container_of(rt, 0);
    REQUIRE(eventually([&] { return state_of(pool, lid) == "running"; }));
    auto high = job_spec("high");
    high.resources.gpu_milli = 1000;
    high.priority = recipe::Priority::high;
    const auto t0 = std::chrono::steady_clock::now();
    const auto hid = pool.submit(high);
    REQUIRE(eventually([&] { return !rt.get(victim)->signals.empty(); }, 5s));
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    CHECK(rt.get(victim)->signals.front() == SIGTERM);
    const auto winner = container_of(rt, 1);
    CHECK(rt.get(winner)->spec.env.at("GPUPOOL_JOB_ID") == std::to_string(hid));
    auto j = pool.job(lid);
    CHECK(j["attempt_history"][0]["state"] == "preempted");
    CHECK(j["state"] != "failed"); // back in the queue, not the job's failure
}

TEST_CASE("agent: --slots caps the jobs placed on the worker, a restart with a new cap updates the coordinator",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    std::vector<std::int64_t> ids;
    for (const char* n : {"a", "b", "c"}) {
        auto s = job_spec(n);
        s.resources.gpus = 0;
        s.resources.gpu_milli = 0;
        ids.push_back(pool.submit(s));
    }
    auto count = [&](const std::string& state) {
        return std::count_if(ids.begin(), ids.end(), [&](auto id) { return state_of(pool, id) == state; });
    };
    {
        auto o = options(pool, work.path());
        o.slots = 1;
        LinkCounts counts;
        RunningAgent ra(o, rt, probe, {nullptr, counting_links(pool.url(), counts)});
        const auto first = container_of(rt, 0);
        REQUIRE(eventually([&] { return count("running") == 1; }));
        const auto beats = counts.heartbeats.load();
        REQUIRE(eventually([&] { return counts.heartbeats >= beats + 3; })); // several scheduling passes
        CHECK(rt.started().size() == 1);
        CHECK(count("queued") == 2);
        const auto queued = *std::find_if(ids.begin(), ids.end(), [&](auto id) { return state_of(pool, id) == "queued"; });
        CHECK_THAT(pool.job(queued)["waiting_reason"].get<std::string>(), Catch::Contains("--slots"));
        rt.exit(first, 0);
        REQUIRE(eventually([&] { return count("succeeded") == 1 && count("running") == 1; }));
        CHECK(rt.started().size() == 2);
        ra.halt(); // stops without draining: the running job's container stays, as after a crash
    }
    // The owner restarts the worker without a cap: its first heartbeat says so, and the last job runs too.
    RunningAgent ra(options(pool, work.path()), rt, probe);
    REQUIRE(eventually([&] { return rt.started().size() == 3; }));
    for (const auto& name : rt.started()) {
        if (!rt.get(name)->exit) {
            rt.exit(name, 0);
        }
    }
    REQUIRE(eventually([&] { return count("succeeded") == 3; }, 10s));
}

TEST_CASE("agent: a GPU that fails stops its jobs as a worker fault and takes no work until it recovers", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.gpu_health = 100ms;
    LinkCounts counts;
    RunningAgent ra(o, rt, probe, {nullptr, counting_links(pool.url(), counts)});

    const auto id = pool.submit(job_spec("on-the-gpu"));
    const auto first = container_of(rt, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    probe.set_status(std::vector<worker::GpuStatus>{{"GPU-test-0", 2}}); // uncorrectable ECC errors
    REQUIRE(eventually([&] { return !rt.get(first)->signals.empty(); }, 3s));
    REQUIRE(eventually([&] { return state_of(pool, id) == "queued"; }));
    auto j = pool.job(id);
    CHECK_THAT(j["attempt_history"][0]["reason"].get<std::string>(),
               Catch::Contains("GPU 0 failed on the worker") && Catch::Contains("ECC"));
    // The coordinator heard: the job waits rather than landing on the failed GPU again.
    const auto told = counts.unhealthy_heartbeats.load();
    REQUIRE(eventually([&] { return counts.unhealthy_heartbeats >= told + 3; }));
    CHECK(rt.started().size() == 1);
    CHECK(state_of(pool, id) == "queued");
    CHECK_THAT(pool.job(id)["waiting_reason"].get<std::string>(), Catch::Contains("of a GPU free"));

    probe.set_status(std::nullopt); // reset, healthy again
    const auto second = container_of(rt, 1);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    rt.exit(second, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "succeeded"; }));
}

TEST_CASE("agent: a GPU job that fails as its GPU falls off the bus is a worker fault, not the job's failure",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.gpu_health = std::chrono::hours(1); // only the check at start and the one a failing exit makes
    RunningAgent ra(o, rt, probe);

    auto s = job_spec("unlucky");
    s.retry.max_attempts = 2; // a failure of its own (exit 1 is not in retry.on_exit_codes) would end it
    const auto id = pool.submit(s);
    const auto name = container_of(rt, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    probe.set_status(std::vector<worker::GpuStatus>{}); // the driver no longer lists the GPU
    rt.exit(name, 1);                                   // CUDA error: the job dies with it
    REQUIRE(eventually([&] { return pool.job(id)["attempt_history"][0]["state"] != "running"; }));
    auto j = pool.job(id);
    CHECK(j["state"] == "queued"); // runs again
    CHECK(j["attempt_history"][0]["state"] == "lost"); // a worker fault: not charged, not the job's failure
    CHECK_THAT(j["attempt_history"][0]["reason"].get<std::string>(),
               Catch::Contains("no longer lists it") && Catch::Contains("exited with status 1"));
}

TEST_CASE("agent: a preemptor waits for the victim to leave its GPU before it starts", "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.stop_grace = 1h;   // the victim ignores SIGTERM: it holds the GPU until SIGKILL, an hour later
    o.gpu_wait_max = 2h; // ...and the preemptor waits for it that long
    JumpClock clock;
    RunningAgent ra(o, rt, probe, {&clock, {}});
    auto low = job_spec("low");
    low.resources.gpu_milli = 1000;
    low.priority = recipe::Priority::low;
    rt.ignore_term_next(true);
    const auto lid = pool.submit(low);
    const auto victim = container_of(rt, 0);
    rt.ignore_term_next(false);
    REQUIRE(eventually([&] { return state_of(pool, lid) == "running"; }));
    auto high = job_spec("high");
    high.resources.gpu_milli = 1000;
    high.priority = recipe::Priority::high;
    const auto hid = pool.submit(high);
    REQUIRE(eventually([&] { return !rt.get(victim)->signals.empty(); }, 5s));
    // The coordinator has given the GPU to the high job already; the worker holds it back while
    // the victim still runs on that GPU.
    REQUIRE(eventually([&] { return state_of(pool, hid) == "assigned"; }, 2s));
    const auto polls = rt.polls();
    REQUIRE(eventually([&] { return rt.polls() >= polls + 5; })); // the agent went round its loop
    CHECK(rt.started().size() == 1);
    CHECK_FALSE(rt.get(victim)->exit);
    clock.jump_ms(std::chrono::milliseconds(1h).count()); // the victim's grace is over
    const auto winner = container_of(rt, 1); // after the SIGKILL
    CHECK(rt.get(victim)->exit);
    CHECK(rt.get(victim)->signals.back() == SIGKILL);
    CHECK(rt.get(winner)->spec.env.at("GPUPOOL_JOB_ID") == std::to_string(hid));
    REQUIRE(eventually([&] { return state_of(pool, hid) == "running"; }));
}

TEST_CASE("agent: a preempted job that declares [checkpoint] gets its grace to save, and the preemptor waits for it",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.stop_grace = 1s;      // the worker's own grace for stop orders...
    o.gpu_wait_max = 20s;   // ...and how long a share waits for its GPU, both far below the job's
    JumpClock clock;
    RunningAgent ra(o, rt, probe, {&clock, {}});
    auto low = job_spec("saver");
    low.resources.gpu_milli = 1000;
    low.priority = recipe::Priority::low;
    low.checkpoint = {600, 300}; // saves every 10 minutes, asks 5 minutes to save when stopped
    rt.ignore_term_next(true);   // it takes its time to save
    const auto lid = pool.submit(low);
    const auto victim = container_of(rt, 0);
    rt.ignore_term_next(false);
    REQUIRE(eventually([&] { return state_of(pool, lid) == "running"; }));
    auto high = job_spec("high");
    high.resources.gpu_milli = 1000;
    high.priority = recipe::Priority::high;
    const auto hid = pool.submit(high);
    REQUIRE(eventually([&] { return !rt.get(victim)->signals.empty(); }, 5s));
    CHECK(rt.get(victim)->signals.front() == SIGTERM);
    REQUIRE(eventually([&] { return state_of(pool, hid) == "assigned"; }, 2s));
    // Past the worker's own grace and past gpu_wait_max: the saver is still saving, nothing started.
    clock.jump_ms(60'000);
    const auto polls = rt.polls();
    REQUIRE(eventually([&] { return rt.polls() >= polls + 5; })); // the agent went round its loop
    CHECK(rt.get(victim)->signals.size() == 1); // no SIGKILL yet
    CHECK_FALSE(rt.get(victim)->exit);
    CHECK(rt.started().size() == 1);
    clock.jump_ms(300'000); // its 5 minutes are over
    const auto winner = container_of(rt, 1); // after the SIGKILL
    CHECK(rt.get(victim)->signals.back() == SIGKILL);
    CHECK(rt.get(winner)->spec.env.at("GPUPOOL_JOB_ID") == std::to_string(hid));
    REQUIRE(eventually([&] { return state_of(pool, hid) == "running"; }));
}

TEST_CASE("agent: an attempt its spool cannot hold is not started, it ends as a worker fault and runs again",
          "[agent][spool]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    LinkCounts counts;
    RunningAgent ra(options(pool, work.path()), rt, probe, {nullptr, counting_links(pool.url(), counts)});
    // Once the agent has recovered its spool (it heartbeats only after that, and a start-up load
    // drops what it cannot read): the first attempt's assignment.json cannot be written, a full disk
    // in the soak (issue 46), a folder in its place here. Attempt ids start at 1 on a new pool.
    REQUIRE(eventually([&] { return counts.heartbeats > 0; }));
    std::filesystem::create_directories(work.path() / "attempts" / "1" / "assignment.json");
    const auto id = pool.submit(job_spec("spooled"));
    const auto name = container_of(rt, 0); // the only container: the first attempt never started
    REQUIRE(eventually([&] { return state_of(pool, id) == "running"; }));
    rt.exit(name, 0);
    REQUIRE(eventually([&] { return state_of(pool, id) == "succeeded"; }));
    CHECK(rt.started().size() == 1);
    const auto job = pool.job(id);
    CHECK(job["attempts"] == 2);
    const auto attempts = job["attempt_history"];
    INFO(attempts.dump());
    REQUIRE(attempts.size() == 2);
    CHECK(attempts[0]["id"] == 1);
    CHECK(attempts[0]["state"] == "lost");
    CHECK_THAT(attempts[0]["reason"].get<std::string>(), Catch::Contains("spool cannot hold it"));
    CHECK(attempts[0]["cost_micro"] == 0);
    CHECK(attempts[1]["state"] == "succeeded");
}

} // namespace test_agent
} // namespace
