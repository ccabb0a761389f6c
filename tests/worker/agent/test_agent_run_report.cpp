// The run report a running agent sends with each attempt's completion (issue 43): the image as the
// runtime resolved it, the GPU and the driver of a fixed inventory, how the GPU share was held, the
// models' commits and the worker's wall clock — against a FakeCoordinator and a FakeRuntime.
#include "tests/support.hpp"
#include "tests/worker/agent/fake_link.hpp"
#include "tests/worker/fake_runtime.hpp"
#include "worker/agent/agent.hpp"
#include "worker/cache/hub_cache.hpp"

#include <catch2/catch.hpp>

#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_run_report {

using namespace gpupool;
using namespace std::chrono_literals;
using test::eventually;

namespace {

constexpr std::int64_t k_wall_start = 1'765'000'000'000; // the worker's wall clock when it starts

api::Assignment assignment(std::int64_t id, std::int64_t gpu, std::int64_t gpu_milli) {
    api::Assignment a;
    a.attempt = AttemptId(id);
    a.job = JobId(id * 10);
    a.spec.name = "job" + std::to_string(id);
    a.spec.image = "localhost/gpupool/busybox:latest";
    a.spec.command = {"sh", "-c", "true"};
    a.spec.resources.gpus = gpu >= 0 ? 1 : 0;
    a.spec.resources.gpu_milli = gpu_milli;
    a.spec.resources.cpu_milli = 100;
    a.spec.resources.memory_mib = 64;
    a.spec.resources.max_runtime_s = 600;
    a.gpu_index = gpu;
    a.gpu_milli = gpu_milli;
    a.team = TeamId(1);
    a.team_name = "fellows";
    return a;
}

struct ReportBench {
    test::TempDir work;
    test::FakeCoordinator coordinator;
    test::FakeRuntime engine;
    worker::StaticGpuProbe probe{
        {{0, "GPU-aaaa", "NVIDIA L4", "L4", 24576}, {1, "GPU-bbbb", "NVIDIA H100 80GB HBM3", "H100-80GB-HBM3", 81920}},
        {"550.54.15", "12.4"}};
    util::ManualClock wall{k_wall_start};
    std::unique_ptr<worker::Agent> agent;
    std::thread thread;
    Status result;

    worker::AgentOptions options() {
        worker::AgentOptions o;
        o.coordinator_url = "http://fake";
        o.token = "enroll";
        o.name = "report-box";
        o.work_dir = work.path() / "w";
        o.cache_dir = work.path() / "cache";
        o.heartbeat = 100ms;
        o.poll_wait = 50ms;
        o.tick = 20ms;
        o.give_up_after_drain = 2s;
        return o;
    }
    void start() {
        agent = std::make_unique<worker::Agent>(options(), engine, probe,
                                                worker::AgentDeps{nullptr, coordinator.links(), &wall});
        thread = std::thread([this] { result = agent->run(); });
        REQUIRE(eventually([&] { return !coordinator.beats().empty(); }));
    }
    ~ReportBench() {
        if (agent) {
            agent->stop();
            thread.join();
        }
    }
    // Runs `a` to its exit (status 0) `ran_ms` of wall time after its start; its completion's report.
    api::RunReport run(api::Assignment a, std::int64_t ran_ms = 2'000) {
        const auto n = engine.started().size();
        const AttemptId id = a.attempt;
        coordinator.assign(std::move(a));
        REQUIRE(eventually([&] { return engine.started().size() == n + 1; }));
        REQUIRE(eventually([&] { return coordinator.started(id); }));
        wall.advance_ms(ran_ms);
        engine.exit(engine.started().back(), 0);
        REQUIRE(eventually([&] { return coordinator.completion(id).has_value(); }));
        const auto c = coordinator.completion(id);
        REQUIRE(c->report);
        return *c->report;
    }
};

} // namespace

TEST_CASE("agent run report: a fractional GPU job's completion says what ran, where, how held and when",
          "[agent][report]") {
    ReportBench b;
    b.start();
    const auto r = b.run(assignment(1, 1, 500), 2'500);
    CHECK(r.runtime == "fake");
    CHECK(r.image_digest == test::FakeRuntime::k_digest);
    CHECK(r.image_id == test::FakeRuntime::k_image_id);
    CHECK(r.image_digest_unknown.empty());
    CHECK(b.engine.identity_asks() == std::vector<std::string>{"localhost/gpupool/busybox:latest"}); // once
    CHECK(r.gpu_model == "H100-80GB-HBM3"); // GPU 1 of the inventory
    CHECK(r.gpu_uuid == "GPU-bbbb");
    CHECK(r.driver_version == "550.54.15");
    CHECK(r.cuda_version == "12.4");
    CHECK(r.enforcement == "watchdog"); // half a GPU, no MPS: the watchdog watched it
    CHECK(r.models.empty());
    CHECK(r.started_at_ms == k_wall_start);
    CHECK(r.ended_at_ms == k_wall_start + 2'500);
    CHECK(r.worker_version == GPUPOOL_VERSION);
    CHECK(api::run_report_from_json(api::to_json(r))); // what the coordinator checks, it takes
}

TEST_CASE("agent run report: a whole GPU is held by nothing, a CPU-only job says no GPU", "[agent][report]") {
    ReportBench b;
    b.start();
    auto r = b.run(assignment(1, 0, 1000));
    CHECK(r.gpu_uuid == "GPU-aaaa");
    CHECK(r.enforcement == "none");
    b.engine.set_image_identity(worker::ImageIdentity{"", "", "built here without a digest"});
    r = b.run(assignment(2, -1, 0));
    CHECK(r.gpu_model.empty());
    CHECK(r.gpu_uuid.empty());
    CHECK(r.driver_version.empty());
    CHECK(r.cuda_version.empty());
    CHECK(r.enforcement.empty());
    CHECK(r.image_digest.empty());
    CHECK(r.image_id.empty());
    CHECK(r.image_digest_unknown == "built here without a digest");
}

TEST_CASE("agent run report: the models a job read from the cache come with their commits", "[agent][report]") {
    ReportBench b;
    const std::string commit(40, 'c');
    {
        worker::HubCache cache(b.work.path() / "cache" / "models", 0);
        std::filesystem::create_directories(cache.model_dir("org/llm") / "snapshots" / commit);
        REQUIRE(cache.record({"org/llm", "main", commit, 0, 0}));
    }
    b.start();
    auto a = assignment(1, 0, 500);
    a.spec.cache_models = {"org/llm"};
    const auto r = b.run(a);
    CHECK(r.models == std::vector<api::MountedModel>{{"org/llm", commit}});
}

} // namespace test_agent_run_report
} // namespace
