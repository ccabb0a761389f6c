// Two pools' workers on one machine (or a shared worker and `gpupool run`) share one container
// engine, and each pool counts workers and attempts from 1. Each worker names and labels its
// containers with an identity unique on the machine, and never touches another's.
#include "tests/worker/agent/agent_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_identity {

using namespace gpupool;
using namespace gpupool::test::agent;

TEST_CASE("agent identity: a second pool's worker on the same engine leaves the first one's job alone",
          "[agent][security]") {
    Pool shared;
    Pool local; // another coordinator: its worker is worker 1 too, its job attempt 1 too
    test::TempDir shared_work;
    test::TempDir local_work;
    test::FakeRuntime engine; // one engine on the machine
    auto probe = one_gpu();

    RunningAgent owner(options(shared, shared_work.path()), engine, probe);
    const auto shared_job = shared.submit(job_spec("shared"));
    const std::string shared_container = container_of(engine);
    REQUIRE(eventually([&] { return state_of(shared, shared_job) == "running"; }));
    engine.write(shared_container, "shared job output\n");

    // The second worker starts (its recovery lists the engine's containers) and runs its own job.
    RunningAgent other(options(local, local_work.path()), engine, probe);
    const auto local_job = local.submit(job_spec("local"));
    const std::string local_container = container_of(engine, 1);
    CHECK(other.agent.worker_id() == owner.agent.worker_id());
    CHECK(local_container != shared_container);
    REQUIRE(eventually([&] { return state_of(local, local_job) == "running"; }));
    CHECK_FALSE(engine.get(shared_container)->removed); // not "left by an earlier run"
    CHECK(engine.get(shared_container)->signals.empty());
    CHECK(engine.get(shared_container)->spec.labels.at("gpupool.worker") !=
          engine.get(local_container)->spec.labels.at("gpupool.worker"));

    // Each result reaches its own pool.
    engine.write(local_container, "local job output\n");
    engine.exit(local_container, 3);
    REQUIRE(eventually([&] { return state_of(local, local_job) == "failed"; }));
    CHECK(state_of(shared, shared_job) == "running");
    engine.exit(shared_container, 0);
    REQUIRE(eventually([&] { return state_of(shared, shared_job) == "succeeded"; }));
    CHECK(shared.logs(shared_job) == "shared job output\n");
    CHECK(local.logs(local_job) == "local job output\n");
    CHECK(local.job(local_job)["exit_code"] == 3);
}

TEST_CASE("agent identity: a restart keeps the worker's instance id, so it finds its own containers again",
          "[agent]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime engine;
    auto probe = one_gpu();
    std::string first;
    {
        RunningAgent ra(options(pool, work.path()), engine, probe);
        pool.submit(job_spec("long"));
        first = container_of(engine);
        ra.halt();
    }
    std::ifstream in(work.path() / "worker.json");
    const auto identity = json::parse(in);
    const std::string instance = identity.at("instance");
    CHECK(instance.size() == 16);
    CHECK(engine.get(first)->spec.labels.at("gpupool.worker") == "w1-" + instance);
    CHECK(first == "gpupool-w1-" + instance + "-a1");
    RunningAgent again(options(pool, work.path()), engine, probe);
    REQUIRE(eventually([&] { return engine.get(first)->reattached == 1; }));
}

TEST_CASE("agent identity: a standby coordinator's URL added to or dropped from the list keeps the identity",
          "[agent][identity]") {
    using worker::same_pool;
    CHECK(same_pool("https://c1:7070", "https://c1:7070"));
    CHECK(same_pool("https://c1:7070", "https://c1:7070,https://c2:7070"));
    CHECK(same_pool("https://c1:7070,https://c2:7070", "https://c2:7070/"));
    CHECK_FALSE(same_pool("https://c1:7070", "https://c3:7070,https://c4:7070"));
    CHECK_FALSE(same_pool("local-pool-key", "https://c1:7070")); // a key that is not a URL list matches only itself
    CHECK(same_pool("local-pool-key", "local-pool-key"));
}

} // namespace test_agent_identity
} // namespace
