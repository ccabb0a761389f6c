// The runtime registry: the one list `gpupool worker` and `gpupool run` offer, what each kind can do,
// and make_runtime's refusals. No engine needed.
#include "tests/support.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_runtime_registry {

using namespace gpupool;
using namespace gpupool::worker;

TEST_CASE("runtime registry: podman, docker and process, and which of them isolate jobs", "[runtime_registry]") {
    CHECK(runtime_names() == std::vector<std::string>{"podman", "docker", "process"});
    REQUIRE(find_runtime_kind("podman") != nullptr);
    CHECK(find_runtime_kind("podman")->isolates);
    CHECK(find_runtime_kind("docker")->isolates);
    REQUIRE(find_runtime_kind("process") != nullptr);
    CHECK_FALSE(find_runtime_kind("process")->isolates);
    CHECK(find_runtime_kind("lxc") == nullptr);
    CHECK(find_runtime_kind("") == nullptr);
    for (const auto& k : runtime_kinds()) {
        CHECK_FALSE(k.summary.empty());
    }
}

TEST_CASE("runtime registry: a process runtime says it isolates nothing and re-attaches to nothing",
          "[runtime_registry]") {
    test::TempDir state;
    auto rt = make_runtime("process", {}, {}, state.path());
    REQUIRE(rt);
    CHECK((*rt)->name() == "process");
    const auto caps = (*rt)->capabilities();
    CHECK_FALSE(caps.isolates);
    CHECK_FALSE(caps.reattaches);
    CHECK_FALSE(caps.limits_memory);
    CHECK_FALSE(caps.gpu_as_device_zero);
    // The kind's flag and the made runtime agree.
    CHECK(caps.isolates == find_runtime_kind("process")->isolates);
}

TEST_CASE("runtime registry: unknown names and arguments a kind does not take are usage errors",
          "[runtime_registry]") {
    auto unknown = make_runtime("lxc");
    REQUIRE(unknown.has_error());
    CHECK(unknown.error().code == ErrorCode::invalid_input);
    CHECK(unknown.error().field == "runtime");
    CHECK_THAT(unknown.error().message, Catch::Contains("podman, docker or process"));
    auto with_args = make_runtime("process", {"--root", "/x"});
    REQUIRE(with_args.has_error());
    CHECK(with_args.error().field == "runtime");
}

} // namespace test_runtime_registry
} // namespace
