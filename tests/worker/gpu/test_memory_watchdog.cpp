// The GPU memory watchdog's decisions (attribution and limits) and the driver's process listing.
#include "worker/gpu/gpu_probe.hpp"
#include "worker/gpu/memory_watchdog.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_memory_watchdog {

using namespace gpupool;
using namespace gpupool::worker;

TEST_CASE("nvidia-smi compute-apps: processes and their GPU memory", "[gpu]") {
    auto p = parse_compute_apps_csv("4242, GPU-aaaa, 10240\n777, GPU-bbbb, [N/A]\n\n");
    REQUIRE(p);
    REQUIRE(p->size() == 2);
    CHECK((*p)[0] == GpuProcess{4242, "GPU-aaaa", 10240});
    CHECK((*p)[1] == GpuProcess{777, "GPU-bbbb", 0});
    auto bad = parse_compute_apps_csv("4242, GPU-aaaa\n");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("line 1") && Catch::Contains("expected 3 columns"));
    auto badpid = parse_compute_apps_csv("x, GPU-aaaa, 1\n");
    REQUIRE_FALSE(badpid);
    CHECK_THAT(badpid.error().message, Catch::Contains("pid"));
    CHECK(parse_compute_apps_csv("")->empty());
}

TEST_CASE("watchdog: the only attempt on a GPU owns its processes, over its share by more than 5% is over",
          "[gpu]") {
    // shares: attempt 1 = 12288 MiB on GPU 0; GPU 1 has a whole-GPU attempt (not watched)
    std::vector<WatchedAttempt> a{{1, 0, 12288}, {2, 1, 0}};
    auto ok = check_gpu_memory(a, {{100, 0, 12000, std::nullopt}, {101, 0, 600, std::nullopt}}); // 12600 <= 12902
    CHECK(ok.over.empty());
    auto over = check_gpu_memory(a, {{100, 0, 12000, std::nullopt}, {101, 0, 1000, std::nullopt}}); // 13000 > 12902
    REQUIRE(over.over.size() == 1);
    CHECK(over.over[0] == Overuse{1, 13000, 12288});
    auto whole = check_gpu_memory(a, {{200, 1, 80000, std::nullopt}});
    CHECK(whole.over.empty());
}

TEST_CASE("watchdog: on a shared GPU, processes count for the attempt their environment names", "[gpu]") {
    // shares: attempts 1 and 2 each 8192 MiB on GPU 0
    std::vector<WatchedAttempt> a{{1, 0, 8192}, {2, 0, 8192}};
    auto v = check_gpu_memory(a, {{10, 0, 9000, 2}, {11, 0, 1000, 1}, {12, 0, 5000, std::nullopt}});
    REQUIRE(v.over.size() == 1);
    CHECK(v.over[0].attempt == 2);
    REQUIRE(v.unattributed.size() == 1); // pid 12 names no attempt on a shared GPU
    CHECK(v.unattributed[0].pid == 12);
    // A process of an attempt on another GPU is not ours to judge here.
    auto other = check_gpu_memory(a, {{13, 3, 99999, std::nullopt}});
    CHECK(other.over.empty());
    CHECK(other.unattributed.empty());
}

} // namespace test_memory_watchdog
} // namespace
