// The container runtimes this machine can test: process always; podman when its store holds the
// test image; docker when GPUPOOL_TEST_DOCKER_HOST names a daemon that answers and holds it
// (`.ci/setup-containers` sets both up). A missing engine is a WARN and a skip, or a failure when
// GPUPOOL_REQUIRE_CONTAINERS=1 (CI). Shared by the runtime tests and the agent's real-runtime tests.
#pragma once

#include "worker/runtime/container_runtime.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpupool::test {

inline constexpr const char* k_test_image = "localhost/gpupool/busybox:latest";

struct RuntimeUnderTest {
    std::string kind;
    std::function<Result<std::unique_ptr<worker::ContainerRuntime>>()> make;
    std::string unavailable; // empty when available
    bool isolates = false;   // containers: mounts, user and limits apply
};

// Probed once per test process.
const std::vector<RuntimeUnderTest>& runtimes_under_test();

// The runtime, or nullptr after WARNing why (FAILing under GPUPOOL_REQUIRE_CONTAINERS=1).
std::unique_ptr<worker::ContainerRuntime> runtime_or_skip(const RuntimeUnderTest& candidate);

std::string env_or(const char* name, const std::string& fallback = {});

} // namespace gpupool::test
