// The whole path of an image that cannot be pulled, for real: a registry on loopback (FakeHub
// answering the registry API: /v2/ and a MANIFEST_UNKNOWN for the job's tag), podman and docker
// pulling from it, the agent, and a real coordinator. The job fails after one attempt as its own
// error (image_unavailable) with the engine's words; it never started, nothing is charged, and its
// worker's record is clean (admin report). Today's path was three attempts lost in a second each
// to "the job's podman container disappeared while it ran".
#include "tests/worker/agent/agent_fixture.hpp"
#include "tests/worker/cache/fake_hub.hpp"
#include "tests/worker/runtime/runtimes_under_test.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_engine_images {

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;

using namespace gpupool::test::agent;

TEST_CASE("agent with real engines: an image the registry does not know fails the job once, unstarted, unpaid",
          "[agent-runtime][image]") {
    test::hub::FakeHub registry;
    registry.set("/v2/", test::hub::Reply(200, "{}"));
    registry.set("/v2/gpupool/no-such-image/manifests/1",
                 test::hub::Reply(404, R"({"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]})"));
    const std::string host = registry.url().substr(std::string("http://").size());
    const std::string image = host + "/gpupool/no-such-image:1";
    // podman speaks plain HTTP to it when registries.conf says so; docker does to 127.0.0.0/8 anyway.
    test::TempDir conf;
    std::ofstream(conf.path() / "registries.conf") << "[[registry]]\nlocation = \"" << host << "\"\ninsecure = true\n";
    ::setenv("CONTAINERS_REGISTRIES_CONF", (conf.path() / "registries.conf").c_str(), 1);

    for (const auto& candidate : test::runtimes_under_test()) {
        if (!candidate.isolates) {
            continue; // the process runtime has no images
        }
        DYNAMIC_SECTION(candidate.kind) {
            auto rt = test::runtime_or_skip(candidate);
            if (!rt) {
                continue;
            }
            Pool pool;
            test::TempDir work;
            worker::StaticGpuProbe no_gpus({});
            auto o = options(pool, work.path());
            o.name = "engine-box";
            RunningAgent ra(o, *rt, no_gpus);
            auto s = job_spec("no such image");
            s.image = image;
            s.resources.gpus = 0;
            s.resources.gpu_milli = 0; // retry.max_attempts 3
            const auto id = pool.submit(s);
            REQUIRE(eventually([&] { return state_of(pool, id) == "failed"; }, 60s));
            const json j = pool.job(id);
            INFO(j.dump(2));
            const json history = j["attempt_history"];
            REQUIRE(history.size() == 1);
            CHECK(history[0]["state"] == "failed");
            CHECK(history[0]["started_at"].is_null());
            const std::string reason = history[0]["reason"].get<std::string>();
            CHECK_THAT(reason, Catch::StartsWith("image unavailable: ") && Catch::Contains("manifest unknown"));
            CHECK_THAT(reason, !Catch::Contains("disappeared"));
            CHECK_THAT(pool.logs(id), Catch::Contains("image unavailable: ") && Catch::Contains("manifest unknown"));
            CHECK_FALSE(registry.seen("/v2/gpupool/no-such-image/manifests/").empty());
            auto admin = pool.client(pool.admin);
            const json report = Pool::call(admin, "GET", "/v1/admin/report");
            INFO(report.dump(2));
            for (const auto& w : report["workers"]) {
                CHECK(w["failures"] == 0);
                CHECK(w["owner_preempted"] == 0);
            }
            ra.halt();
        }
    }
    ::unsetenv("CONTAINERS_REGISTRIES_CONF");
}

} // namespace test_agent_engine_images
} // namespace
