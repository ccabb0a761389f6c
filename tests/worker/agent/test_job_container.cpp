// What a job sees, by what the runtime can do: container paths and one GPU as device 0 where the
// runtime isolates, host paths and the GPU's own index for a bare process.
#include "tests/support.hpp"
#include "worker/agent/job_container.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_job_container {

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
    worker::ContainerContext ctx;
    ctx.worker_label = "w1-abc";
    ctx.cache_dir = "/cache-root";
    ctx.runtime = caps;
    ctx.gpus = {{0, "GPU-a", "NVIDIA L4", "L4", 24576}, {1, "GPU-b", "NVIDIA L4", "L4", 16384}};
    return ctx;
}

worker::RuntimeCapabilities bare_process() {
    worker::RuntimeCapabilities caps;
    caps.isolates = caps.reattaches = caps.limits_memory = caps.gpu_as_device_zero = false;
    return caps;
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
    CHECK(c.env.at("GPUPOOL_CACHE_DIR") == "/team-cache");
    CHECK(c.env.at("HF_HOME") == "/team-cache/huggingface");
    CHECK(c.env.count("GPUPOOL_MODEL_CACHE") == 0); // no model cache given
    CHECK(c.env.at("HOME") == "/tmp");
    CHECK(c.env.count("PATH") == 0);
    CHECK(c.workdir == "/work"); // where its inputs are, as under the process runtime (not the image's `/`)
    CHECK(c.env.at("GPUPOOL_ATTEMPT") == "2");
    CHECK(c.env.at("GPUPOOL_PARAM_LEARNING_RATE") == "0.1");
    CHECK(c.env.at("CUDA_VISIBLE_DEVICES") == "0");
    CHECK(c.env.at("NVIDIA_VISIBLE_DEVICES") == "1");
    // A quarter of GPU 1's 16384 MiB.
    CHECK(c.env.at("GPUPOOL_GPU_MEMORY_MB") == "4096");
    CHECK(c.env.at("GPUPOOL_GPU_FRACTION") == "0.250");
    CHECK(c.env.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == 0); // no MPS daemon: the watchdog holds it
    CHECK_FALSE(c.host_ipc);
    CHECK(worker::gpu_limit_mib(c) == 4096);
    REQUIRE(c.mounts.size() == 3);
    CHECK(c.mounts[2].host == std::filesystem::path("/cache-root/teams/3"));
    CHECK(c.mounts[2].container == "/team-cache");
    CHECK_FALSE(c.mounts[2].read_only);
}

TEST_CASE("job container: a runtime that isolates nothing gets host paths, the GPU's index, a PATH and the same cwd",
          "[job_container]") {
    const auto t = gpu_attempt("/spool/12");
    const auto c = worker::container_spec_for(t, context(bare_process()));
    CHECK(c.env.at("GPUPOOL_OUTPUT_DIR") == "/spool/12/outputs");
    CHECK(c.env.at("GPUPOOL_WORK_DIR") == "/spool/12/work");
    CHECK(c.env.at("GPUPOOL_CACHE_DIR") == "/cache-root/teams/3");
    CHECK(c.env.at("HF_HOME") == "/cache-root/teams/3/huggingface");
    CHECK(c.env.at("HOME") == "/tmp"); // the name a container job sees
    CHECK_FALSE(c.env.at("PATH").empty());
    CHECK(c.workdir == "/spool/12/work"); // its inputs folder, as in a container
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

TEST_CASE("job container: the model cache is read-only at /cache, and HF_HOME is there only when every model is",
          "[job_container][model-cache]") {
    auto t = gpu_attempt("/spool/12");
    t.a.spec.cache_models = {"org/tiny"};
    auto ctx = context({});
    ctx.model_cache = "/cache-root/models";
    auto c = worker::container_spec_for(t, ctx);
    REQUIRE(c.mounts.size() == 4);
    CHECK(c.mounts[3].host == std::filesystem::path("/cache-root/models"));
    CHECK(c.mounts[3].container == "/cache");
    CHECK(c.mounts[3].read_only);
    CHECK(c.env.at("GPUPOOL_MODEL_CACHE") == "/cache");
    // Not all there (a download failed): the job's own downloads go to its team's writable cache.
    CHECK(c.env.at("HF_HOME") == "/team-cache/huggingface");
    CHECK(c.env.count("HF_HUB_OFFLINE") == 0);
    ctx.models_ready = true;
    c = worker::container_spec_for(t, ctx);
    CHECK(c.env.at("HF_HOME") == "/cache");
    CHECK(c.env.at("HF_HUB_OFFLINE") == "1");
    // A job's own environment cannot point the read-only mount elsewhere: the worker's values win.
    t.a.spec.env = {{"HF_HOME", "/tmp/mine"}, {"GPUPOOL_MODEL_CACHE", "/x"}};
    c = worker::container_spec_for(t, ctx);
    CHECK(c.env.at("HF_HOME") == "/cache");
    CHECK(c.env.at("GPUPOOL_MODEL_CACHE") == "/cache");
    // A bare process: the host paths.
    auto bare = context(bare_process());
    bare.model_cache = "/cache-root/models";
    bare.models_ready = true;
    c = worker::container_spec_for(t, bare);
    CHECK(c.env.at("HF_HOME") == "/cache-root/models");
    CHECK(c.env.at("GPUPOOL_MODEL_CACHE") == "/cache-root/models");
}

TEST_CASE("job container: with the worker's MPS daemon a fractional job is its client, a whole GPU bypasses it",
          "[job_container][mps]") {
    auto t = gpu_attempt("/spool/12"); // a quarter of GPU 1 (16384 MiB)
    auto ctx = context({});
    ctx.mps_pipe = std::filesystem::path("/spool/mps/pipe");
    auto c = worker::container_spec_for(t, ctx);
    CHECK(c.env.at("CUDA_MPS_PIPE_DIRECTORY") == "/run/gpupool-mps");
    CHECK(c.env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == "0=4096M"); // device 0 as the container sees it
    CHECK(c.env.at("CUDA_VISIBLE_DEVICES") == "GPU-b"); // by UUID, as the daemon was given the GPUs
    CHECK(c.env.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == 0); // throughput, the default
    ctx.mps_compute = worker::MpsCompute::isolate; // the owner's choice: each client capped at its share
    CHECK(worker::container_spec_for(t, ctx).env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "25");
    CHECK(c.host_ipc);
    REQUIRE(c.mounts.size() == 4);
    CHECK(c.mounts[3].host == std::filesystem::path("/spool/mps/pipe"));
    CHECK(c.mounts[3].container == "/run/gpupool-mps");
    // A bare process reaches the daemon by the host path, and names its GPU by UUID too.
    auto bare = context(bare_process());
    bare.mps_pipe = std::filesystem::path("/spool/mps/pipe");
    c = worker::container_spec_for(t, bare);
    CHECK(c.env.at("CUDA_MPS_PIPE_DIRECTORY") == "/spool/mps/pipe");
    CHECK(c.env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == "0=4096M");
    CHECK(c.env.at("CUDA_VISIBLE_DEVICES") == "GPU-b");
    CHECK(c.mounts.size() == 3);
    // A whole GPU is not an MPS client.
    t.a.gpu_milli = 1000;
    c = worker::container_spec_for(t, ctx);
    CHECK(c.env.count("CUDA_MPS_PIPE_DIRECTORY") == 0);
    CHECK(c.env.count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == 0);
    CHECK(c.env.at("CUDA_VISIBLE_DEVICES") == "0");
    CHECK_FALSE(c.host_ipc);
}

TEST_CASE("job container: who the job is on the host, and who owns its writable folders", "[job_container][security]") {
    const auto t = gpu_attempt("/spool/12");
    // A root worker's container job is nobody, which owns its outputs and team cache.
    auto as_root = context({});
    as_root.worker_uid = 0;
    as_root.worker_gid = 0;
    const auto rooted = worker::container_spec_for(t, as_root);
    CHECK(rooted.user == "65534:65534");
    CHECK_FALSE(rooted.keep_user_id);
    CHECK(worker::job_owner(true, 0) == util::Owner{worker::k_job_uid, worker::k_job_uid});
    // A worker that is not root runs its containers as itself (rootless podman: the same uid on the
    // host), so its folders need no other owner and never a mode open to everyone.
    auto unprivileged = context({});
    unprivileged.worker_uid = 998;
    unprivileged.worker_gid = 997;
    const auto own = worker::container_spec_for(t, unprivileged);
    CHECK(own.user == "998:997");
    CHECK(own.keep_user_id);
    CHECK_FALSE(worker::job_owner(true, 998));
    // The process runtime's job is the worker's own user, root or not.
    auto bare = context(bare_process());
    bare.worker_uid = 0;
    CHECK_FALSE(worker::container_spec_for(t, bare).keep_user_id);
    CHECK_FALSE(worker::job_owner(false, 0));
}

TEST_CASE("job container: the run report says the GPU, the driver and what held the share, per case",
          "[job_container][report]") {
    const auto ctx = context({});
    worker::RunFacts facts{"podman", ctx.gpus, {"550.54.15", "12.4"}, worker::MemoryEnforcement::watchdog, false,
                           {},       "0.1.0"};
    auto t = gpu_attempt("/spool/12");
    auto report = [&](const worker::Attempt& a, const worker::ContainerContext& c) {
        return worker::run_report_for(a, worker::container_spec_for(a, c), facts);
    };
    // A quarter of GPU 1, the watchdog looks.
    auto r = report(t, ctx);
    CHECK(r.runtime == "podman");
    CHECK(r.worker_version == "0.1.0");
    CHECK(r.gpu_model == "L4");
    CHECK(r.gpu_uuid == "GPU-b"); // GPU 1's, not the first one's
    CHECK(r.driver_version == "550.54.15");
    CHECK(r.cuda_version == "12.4");
    CHECK(r.enforcement == "watchdog");
    CHECK(r.image_digest.empty()); // the engine's to say, at the start (JobControl)
    CHECK(r.started_at_ms == 0);
    // A client of the worker's MPS daemon.
    auto mps_ctx = ctx;
    mps_ctx.mps_pipe = "/run/mps";
    facts.mps = true;
    CHECK(report(t, mps_ctx).enforcement == "mps");
    // A whole GPU bypasses MPS and is not watched.
    auto whole = t;
    whole.a.gpu_milli = 1000;
    CHECK(report(whole, mps_ctx).enforcement == "none");
    // A driver that cannot say who holds what: nothing held the share.
    facts.mps = false;
    facts.enforcement = worker::MemoryEnforcement::none;
    CHECK(report(t, ctx).enforcement == "none");
    // The job's own MPS variables do not make it an MPS client.
    auto posing = t;
    posing.a.spec.env = {{"CUDA_MPS_PIPE_DIRECTORY", "/tmp/mine"}};
    facts.enforcement = worker::MemoryEnforcement::watchdog;
    CHECK(report(posing, ctx).enforcement == "watchdog");
    // CPU only: no GPU, no driver, no enforcement.
    auto cpu = t;
    cpu.a.gpu_index = -1;
    cpu.a.gpu_milli = 0;
    r = report(cpu, ctx);
    CHECK(r.gpu_model.empty());
    CHECK(r.gpu_uuid.empty());
    CHECK(r.driver_version.empty());
    CHECK(r.cuda_version.empty());
    CHECK(r.enforcement.empty());
}

TEST_CASE("job container: the run report lists the job's models, with the commits it was given",
          "[job_container][report]") {
    auto t = gpu_attempt("/spool/12");
    t.a.spec.cache_models = {"org/llm", "org/tok@v2"};
    worker::RunFacts facts;
    facts.model_commits = {{"org/llm", std::string(40, 'a')}, {"org/tok@v2", std::string(40, 'b')}};
    const auto spec = worker::container_spec_for(t, context({}));
    auto r = worker::run_report_for(t, spec, facts);
    CHECK(r.models ==
          std::vector<api::MountedModel>{{"org/llm", std::string(40, 'a')}, {"org/tok@v2", std::string(40, 'b')}});
    facts.model_commits.clear(); // the job did not read the cache: not known
    r = worker::run_report_for(t, spec, facts);
    CHECK(r.models == std::vector<api::MountedModel>{{"org/llm", ""}, {"org/tok@v2", ""}});
}

TEST_CASE("job container: report_text keeps printable ASCII and the report's bound", "[job_container][report]") {
    CHECK(worker::report_text("NVIDIA L4") == "NVIDIA L4");
    CHECK(worker::report_text("a\nb\x1b[0m\xc3\xa9") == "a?b?[0m??");
    CHECK(worker::report_text(std::string(300, 'x')).size() == api::k_max_report_text_bytes);
}

} // namespace test_job_container
} // namespace
