#include "tests/worker/runtime/runtimes_under_test.hpp"

#include "worker/runtime/oci_runtime.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <boost/process.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <cstdlib>
#include <thread>

namespace gpupool::test {

namespace bp = boost::process;
using namespace std::chrono_literals;

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : fallback;
}

namespace {

// Runs a tool quietly; true when it exits 0 within 20 s.
bool tool_answers(const std::vector<std::string>& argv, std::string& why) {
    auto exe = bp::search_path(argv.front());
    if (exe.empty()) {
        why = argv.front() + " is not on PATH";
        return false;
    }
    try {
        bp::child c(exe, bp::args = std::vector<std::string>(argv.begin() + 1, argv.end()), bp::std_out > bp::null,
                    bp::std_err > bp::null, bp::std_in < bp::null);
        auto deadline = std::chrono::steady_clock::now() + 20s;
        while (c.running() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(10ms);
        }
        if (c.running()) {
            c.terminate();
            why = "`" + argv.front() + " " + argv[1] + "` did not answer within 20 s";
            return false;
        }
        if (c.exit_code() != 0) {
            why = "`" + argv.front() + " " + argv[1] + " ...` exited " + std::to_string(c.exit_code());
            return false;
        }
        return true;
    } catch (const std::exception& e) {
        why = e.what();
        return false;
    }
}

Result<std::unique_ptr<worker::ContainerRuntime>> make_oci(worker::OciTool tool, std::vector<std::string> global_args) {
    worker::OciConfig config;
    config.tool = tool;
    config.global_args = std::move(global_args);
    config.run_args = {"--network", "none"}; // faster starts, and the test dockerd has no bridge
    auto rt = std::make_unique<worker::OciRuntime>(std::move(config));
    if (auto missing = rt->missing_tool()) {
        return *missing;
    }
    return std::unique_ptr<worker::ContainerRuntime>(std::move(rt));
}

} // namespace

const std::vector<RuntimeUnderTest>& runtimes_under_test() {
    static const std::vector<RuntimeUnderTest> all = [] {
        std::vector<RuntimeUnderTest> out;
        out.push_back({"process", [] { return worker::make_runtime("process"); }, "", false});

        RuntimeUnderTest podman{"podman", [] { return make_oci(worker::OciTool::podman, {}); }, "", true};
        std::string why;
        if (!tool_answers({"podman", "image", "exists", k_test_image}, why)) {
            podman.unavailable = "podman unavailable: " + why + "; run .ci/setup-containers";
        }
        out.push_back(podman);

        std::string host = env_or("GPUPOOL_TEST_DOCKER_HOST");
        RuntimeUnderTest docker{"docker", [host] { return make_oci(worker::OciTool::docker, {"-H", host}); }, "", true};
        if (host.empty()) {
            docker.unavailable = "docker unavailable: GPUPOOL_TEST_DOCKER_HOST is not set; run .ci/setup-containers "
                                 "and export GPUPOOL_TEST_DOCKER_HOST=unix:///run/gpupool-ci/docker.sock";
        } else if (!tool_answers({"docker", "-H", host, "info"}, why) ||
                   !tool_answers({"docker", "-H", host, "image", "inspect", k_test_image}, why)) {
            docker.unavailable = "docker unavailable at " + host + ": " + why + "; run .ci/setup-containers";
        }
        out.push_back(docker);
        // GPUPOOL_TEST_RUNTIMES=process,podman keeps only those (a run as a user with no docker:
        // tests/security/rootless_service.sh runs the link tests as the worker service's user).
        if (const std::string only = env_or("GPUPOOL_TEST_RUNTIMES"); !only.empty()) {
            std::erase_if(out, [&](const RuntimeUnderTest& r) {
                return ("," + only + ",").find("," + r.kind + ",") == std::string::npos;
            });
        }
        return out;
    }();
    return all;
}

std::unique_ptr<worker::ContainerRuntime> runtime_or_skip(const RuntimeUnderTest& c) {
    std::string why = c.unavailable;
    std::unique_ptr<worker::ContainerRuntime> rt;
    if (why.empty()) {
        auto made = c.make();
        if (made) {
            rt = std::move(*made);
        } else {
            why = c.kind + " unavailable: " + made.error().describe();
        }
    }
    if (!why.empty()) {
        if (env_or("GPUPOOL_REQUIRE_CONTAINERS") == "1") {
            FAIL(why << " (GPUPOOL_REQUIRE_CONTAINERS=1)");
        }
        WARN(why);
    }
    return rt;
}

} // namespace gpupool::test
