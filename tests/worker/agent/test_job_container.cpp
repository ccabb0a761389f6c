// What a job sees, by what the runtime can do: container paths and one GPU as device 0 where the
// runtime isolates, host paths and the GPU's own index for a bare process.
#include "tests/support.hpp"
#include "worker/agent/job_container.hpp"

#include <catch2/catch.hpp>

using namespace gpupool;

namespace {

worker::Attempt gpu_attempt(const std::filesystem::path& dir) {
    worker::Attempt t;
    t.a.attempt = AttemptId(12);
    t.a.job = JobId(4);
    t.a.attempt_number = 2;
    t.a.team = TeamId(3);
    t.a.gpu_index = 1;
    t.a.gpu_milli = 250;
    t.a.spec.name = "quarter";
    t.a.spec.command = {"python", "train.py"};
    t.a.spec.resources.memory_mib = 512;
    t.a.spec.params = {{"learning-rate", "0.1"}};
    t.dir = dir;
    return t;
}

worker::ContainerContext context(worker::RuntimeCapabilities caps) {
    return {"w1-abc", "/cache-root", caps, {{0, "GPU-a", "NVIDIA L4", "L4", 24576}, {1, "GPU-b", "NVIDIA L4", "L4", 16384}}};
}

} // namespace

TEST_CASE("job container: an isolating runtime gets container paths, one GPU as device 0 and its share",
          "[job_container]") {
    const auto t = gpu_attempt("/spool/12");
    const auto c = worker::container_spec_for(t, context({}));
    CHECK(c.name == "gpupool-w1-abc-a12");
    CHECK(c.labels.at("gpupool.worker") == "w1-abc");
    CHECK(c.labels.at("gpupool.attempt") == "12");
    CHECK(c.env.at("GPUPOOL_OUTPUT_DIR") == "/outputs");
    CHECK(c.env.at("GPUPOOL_CACHE_DIR") == "/cache");
    CHECK(c.env.at("HOME") == "/tmp");
    CHECK(c.env.count("PATH") == 0);
    CHECK(c.env.at("GPUPOOL_ATTEMPT") == "2");
    CHECK(c.env.at("GPUPOOL_PARAM_LEARNING_RATE") == "0.1");
    CHECK(c.env.at("CUDA_VISIBLE_DEVICES") == "0");
    CHECK(c.env.at("NVIDIA_VISIBLE_DEVICES") == "1");
    // A quarter of GPU 1's 16384 MiB.
    CHECK(c.env.at("GPUPOOL_GPU_MEMORY_MB") == "4096");
    CHECK(c.env.at("GPUPOOL_GPU_FRACTION") == "0.250");
    CHECK(c.env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == "0=4096M");
    CHECK(worker::gpu_limit_mib(c) == 4096);
    REQUIRE(c.mounts.size() == 3);
    CHECK(c.mounts[2].host == std::filesystem::path("/cache-root/teams/3"));
}

TEST_CASE("job container: a runtime that isolates nothing gets host paths, the GPU's index and a PATH",
          "[job_container]") {
    const auto t = gpu_attempt("/spool/12");
    const auto c = worker::container_spec_for(t, context({false, false, false, false}));
    CHECK(c.env.at("GPUPOOL_OUTPUT_DIR") == "/spool/12/outputs");
    CHECK(c.env.at("GPUPOOL_WORK_DIR") == "/spool/12/work");
    CHECK(c.env.at("GPUPOOL_CACHE_DIR") == "/cache-root/teams/3");
    CHECK(c.env.at("HF_HOME") == "/cache-root/teams/3/huggingface");
    CHECK(c.env.count("HOME") == 0);
    CHECK_FALSE(c.env.at("PATH").empty());
    CHECK(c.env.at("CUDA_VISIBLE_DEVICES") == "1");
}

TEST_CASE("job container: a whole GPU or none is not watched, a CPU job sees no GPU", "[job_container]") {
    auto t = gpu_attempt("/spool/12");
    t.a.gpu_milli = 1000;
    auto c = worker::container_spec_for(t, context({}));
    CHECK(c.env.at("GPUPOOL_GPU_FRACTION") == "1.000");
    CHECK(c.env.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == 0);
    CHECK(worker::gpu_limit_mib(c) == 0);
    t.a.gpu_index = -1;
    t.a.gpu_milli = 0;
    c = worker::container_spec_for(t, context({}));
    CHECK_FALSE(c.gpu_index);
    CHECK(c.env.at("CUDA_VISIBLE_DEVICES").empty());
    CHECK(worker::gpu_limit_mib(c) == 0);
}
