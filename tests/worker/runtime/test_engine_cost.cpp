// The per-job cost of the real OCI runtime, for bench/engine_cost.sh: a hidden test ([.engine_cost],
// never run by default) that drives OciRuntime as the agent does — start(), poll() when on_exit
// wakes it or on a 100 ms tick, remove() — for GPUPOOL_BENCH_RUNS jobs running `true`, and prints the
// median wall time from start() to the exit, and how long the caller's thread spent inside the
// runtime per job. The script measures the CPU around the whole run.
#include "tests/support.hpp"
#include "worker/runtime/oci_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_engine_cost {

using namespace gpupool;
using namespace gpupool::worker;
using Clock = std::chrono::steady_clock;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::int64_t median_us(std::vector<std::int64_t> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

std::int64_t us_since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

} // namespace

TEST_CASE("engine cost: jobs through the OCI runtime as the agent drives it", "[.engine_cost]") {
    const std::string engine = env_or("GPUPOOL_BENCH_ENGINE", "podman");
    const int runs = std::stoi(env_or("GPUPOOL_BENCH_RUNS", "30"));
    OciConfig config;
    config.tool = engine == "docker" ? OciTool::docker : OciTool::podman;
    if (config.tool == OciTool::docker) {
        config.global_args = {"-H", env_or("GPUPOOL_TEST_DOCKER_HOST", "unix:///run/gpupool-ci/docker.sock")};
    }
    config.run_args = {"--network", "none"};
    OciRuntime rt(config);
    REQUIRE_FALSE(rt.missing_tool());

    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
    rt.on_exit([&] {
        {
            std::lock_guard lock(mu);
            woken = true;
        }
        cv.notify_all();
    });
    test::TempDir dir;
    std::vector<std::int64_t> walls;
    std::vector<std::int64_t> inside; // the caller's thread inside start(), poll() and remove()
    for (int i = 0; i < runs; ++i) {
        ContainerSpec spec;
        spec.name = "gpupool-bench-" + std::to_string(::getpid()) + "-" + std::to_string(i);
        spec.image = env_or("GPUPOOL_BENCH_IMAGE", "localhost/gpupool/busybox:latest");
        spec.argv = {"true"};
        spec.labels = {{"gpupool.worker", "bench"}, {"gpupool.job", "1"}, {"gpupool.attempt", std::to_string(i)}};
        spec.log_path = dir.path() / ("job-" + std::to_string(i) + ".log");
        const auto t0 = Clock::now();
        REQUIRE(rt.start(spec));
        std::int64_t busy = us_since(t0);
        while (true) {
            const auto p0 = Clock::now();
            auto st = rt.poll(spec.name);
            busy += us_since(p0);
            REQUIRE(st);
            if (*st) {
                CHECK((*st)->exit_code == 0);
                break;
            }
            std::unique_lock lock(mu);
            cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return woken; });
            woken = false;
        }
        walls.push_back(us_since(t0));
        const auto r0 = Clock::now();
        CHECK(rt.remove(spec.name));
        busy += us_since(r0);
        inside.push_back(busy);
    }
    rt.on_exit(nullptr);
    std::cout << "engine_cost: wall_median_us=" << median_us(walls) << " agent_thread_median_us=" << median_us(inside)
              << std::endl;
}

} // namespace test_engine_cost
} // namespace
