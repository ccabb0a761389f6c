// The rules that turn a job's models into its GPU memory (core/client/model_sizing.hpp): the
// estimate for a whole GPU, the refusal below the weights for gpu_memory and for a share of a known
// GPU, the checks skipped (a share of any GPU, a config not had), and CPU-only jobs left alone.
#include "core/client/model_sizing.hpp"
#include "core/credits/catalog.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_model_sizing {

using namespace gpupool;
using client::SizingOutcome;

resources::ModelShape fixture_shape(const std::string& name) {
    std::ifstream in(test::source_dir() / "tests/core/resources/model_configs" / (name + ".json"));
    REQUIRE(in);
    std::ostringstream text;
    text << in.rdbuf();
    auto shape = resources::model_shape_from_config(text.str());
    REQUIRE(shape);
    return *shape;
}

client::ModelShapes llama_and_gpt2() {
    return {{{"meta-llama/Llama-2-7b-hf", fixture_shape("llama-2-7b")}, {"gpt2", fixture_shape("gpt2")}}, {}};
}

recipe::JobSpec gpu_job() {
    recipe::JobSpec job;
    job.cache_models = {"meta-llama/Llama-2-7b-hf", "gpt2"};
    job.model_use = {"bfloat16", 4096, 1};
    job.resources.gpus = 1;
    job.resources.gpu_milli = 1000; // `gpus = 1`
    return job;
}

const credits::RateCatalog& catalog() {
    return credits::default_rate_catalog();
}

TEST_CASE("model sizing: a whole GPU asks the estimate of all its models instead", "[client][model_sizing]") {
    recipe::JobSpec job = gpu_job();
    const auto s = client::size_gpu_memory(job, llama_and_gpt2(), catalog());
    REQUIRE(s.outcome == SizingOutcome::estimated);
    REQUIRE(s.memory);
    // weights: 2 bytes x (6,738,415,616 + 124,439,808); KV: 2 x layers x width x 4096 x 2 bytes each;
    // one overhead of 1 GiB + 10 %.
    const std::int64_t weights = 2 * (std::int64_t{6'738'415'616} + 124'439'808);
    const std::int64_t kv = std::int64_t{2} * 32 * 4096 * 4096 * 2 + std::int64_t{2} * 12 * 768 * 4096 * 2;
    const std::int64_t total = weights + kv + (std::int64_t{1} << 30) + (weights + kv) / 10;
    CHECK(s.memory->weight_bytes == weights);
    CHECK(s.memory->kv_cache_bytes == kv);
    CHECK(s.memory->total_bytes() == total);
    CHECK(s.estimate_mib == (total + (1 << 20) - 1) >> 20);
    client::apply_gpu_sizing(job, s);
    CHECK(job.resources.gpu_memory_mib == s.estimate_mib);
    CHECK(job.resources.gpu_milli == 0);
}

TEST_CASE("model sizing: gpu_memory below the weights is refused, above them checked", "[client][model_sizing]") {
    recipe::JobSpec job = gpu_job();
    job.resources.gpu_milli = 0;
    job.resources.gpu_memory_mib = 8 * 1024;
    auto s = client::size_gpu_memory(job, llama_and_gpt2(), catalog());
    REQUIRE(s.outcome == SizingOutcome::refused);
    CHECK(s.message == "meta-llama/Llama-2-7b-hf + gpt2 in bfloat16: 12.8 GiB of weights; the recipe asks 8.0 GiB "
                       "(resources.gpu_memory)");
    client::apply_gpu_sizing(job, s);
    CHECK(job.resources.gpu_memory_mib == 8 * 1024); // a refusal changes nothing

    job.resources.gpu_memory_mib = 14 * 1024; // above the weights, below the whole estimate
    s = client::size_gpu_memory(job, llama_and_gpt2(), catalog());
    CHECK(s.outcome == SizingOutcome::checked);
    CHECK_THAT(s.message, Catch::Contains("less than the"));
    job.resources.gpu_memory_mib = 40 * 1024;
    s = client::size_gpu_memory(job, llama_and_gpt2(), catalog());
    CHECK(s.outcome == SizingOutcome::checked);
    CHECK(s.message.empty());
    client::apply_gpu_sizing(job, s);
    CHECK(job.resources.gpu_memory_mib == 40 * 1024); // the recipe's own stays
}

TEST_CASE("model sizing: a share is checked against the largest GPU it accepts, or not at all",
          "[client][model_sizing]") {
    recipe::JobSpec job = gpu_job();
    job.resources.gpu_milli = 500;
    job.resources.gpu_models = {"L4", "A100-40GB"}; // half of 40 GiB: 20 GiB, more than 12.8 GiB of weights
    auto s = client::size_gpu_memory(job, llama_and_gpt2(), catalog());
    CHECK(s.outcome == SizingOutcome::checked);
    CHECK(s.asked_mib == 20 * 1024);
    job.resources.gpu_models = {"L4"}; // half of 24 GiB
    s = client::size_gpu_memory(job, llama_and_gpt2(), catalog());
    REQUIRE(s.outcome == SizingOutcome::refused);
    CHECK_THAT(s.message, Catch::EndsWith("the recipe asks 12.0 GiB (resources.gpu = 0.5 of L4's 24.0 GiB)"));
    job.resources.gpu_models.clear(); // any GPU: the share's memory is not known
    s = client::size_gpu_memory(job, llama_and_gpt2(), catalog());
    CHECK(s.outcome == SizingOutcome::skipped);
    CHECK_THAT(s.message, Catch::Contains("depends on the GPU it lands on"));
}

TEST_CASE("model sizing: a config not had skips the estimate and the check, and CPU jobs are left alone",
          "[client][model_sizing]") {
    recipe::JobSpec job = gpu_job();
    client::ModelShapes partial = llama_and_gpt2();
    partial.shapes.pop_back();
    partial.unavailable = {"gpt2: cannot download http://hub/gpt2/resolve/main/config.json: no answer"};
    auto s = client::size_gpu_memory(job, partial, catalog());
    REQUIRE(s.outcome == SizingOutcome::skipped);
    CHECK_FALSE(s.memory);
    CHECK_THAT(s.message, Catch::StartsWith("gpt2: cannot download") &&
                              Catch::EndsWith("set [resources] gpu_memory in the recipe"));
    client::apply_gpu_sizing(job, s);
    CHECK(job.resources.gpu_milli == 1000); // still the whole GPU it asked

    job.resources.gpu_milli = 0;
    job.resources.gpu_memory_mib = 1024; // below the weights, but they cannot be known: not refused
    s = client::size_gpu_memory(job, partial, catalog());
    CHECK(s.outcome == SizingOutcome::skipped);
    CHECK_THAT(s.message, Catch::EndsWith("not checked against its models"));

    recipe::JobSpec cpu = gpu_job();
    cpu.resources.gpus = 0;
    cpu.resources.gpu_milli = 0;
    CHECK(client::size_gpu_memory(cpu, llama_and_gpt2(), catalog()).outcome == SizingOutcome::none);
}

} // namespace test_model_sizing
} // namespace
