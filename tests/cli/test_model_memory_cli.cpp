// `gpupool model-memory`: the estimate of core/resources/model_memory.hpp through the real binary,
// from a config.json or the folder holding it, and its refusals, which name the file and the field.
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_model_memory_cli {

using gpupool::test::run_gpupool;
using gpupool::test::source_dir;
namespace fs = std::filesystem;

fs::path fixture(const std::string& name) {
    return source_dir() / "tests/core/resources/model_configs" / (name + ".json");
}

TEST_CASE("model-memory: a config's estimate, its basis and the recipe line that asks for it", "[cli][model_memory]") {
    auto r = run_gpupool({"model-memory", fixture("llama-2-7b").string(), "--dtype", "bfloat16", "--max-tokens", "4096"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("(llama)"));
    CHECK_THAT(r.out, Catch::Contains("6.74 B parameters in bfloat16: 12.6 GiB of weights + 2.0 GiB of KV cache "
                                      "(4096 tokens x 1) + 2.5 GiB overhead (1 GiB + 10 %) = 17.0 GiB"));
    // 2 x 6,738,415,616 bytes of weights, 2 GiB of KV cache, 1 GiB + 10 % of both: in MiB, rounded up.
    const std::int64_t weights = 2 * std::int64_t{6'738'415'616};
    const std::int64_t kv = std::int64_t{2} * 32 * 32 * 128 * 4096 * 2;
    const std::int64_t total = weights + kv + (std::int64_t{1} << 30) + (weights + kv) / 10;
    const std::int64_t mib = (total + (1 << 20) - 1) >> 20;
    CHECK_THAT(r.out, Catch::Contains("in the recipe: [resources] gpu_memory = \"" + std::to_string(mib) + "MiB\""));

    auto j = run_gpupool({"--json", "model-memory", fixture("llama-2-7b").string(), "--max-tokens", "4096"});
    REQUIRE(j.exit_code == 0);
    const auto out = nlohmann::json::parse(j.out);
    CHECK(out.at("parameters") == 6'738'415'616);
    CHECK(out.at("total_bytes") == total);
    CHECK(out.at("gpu_memory_mib") == mib);
    CHECK(out.at("model_type") == "llama");
}

TEST_CASE("model-memory: a snapshot folder is read through its config.json, and the dtype and batch count",
          "[cli][model_memory]") {
    gpupool::test::TempDir snapshot;
    fs::copy_file(fixture("mistral-7b"), snapshot.path() / "config.json");
    auto half = run_gpupool({"--json", "model-memory", snapshot.path().string(), "--dtype", "float16"});
    auto quarter = run_gpupool({"--json", "model-memory", snapshot.path().string(), "--dtype", "int4"});
    REQUIRE(half.exit_code == 0);
    REQUIRE(quarter.exit_code == 0);
    const auto h = nlohmann::json::parse(half.out);
    const auto q = nlohmann::json::parse(quarter.out);
    CHECK(h.at("config") == (snapshot.path() / "config.json").string());
    CHECK(h.at("weight_bytes") == 4 * q.at("weight_bytes").get<std::int64_t>()); // 16 bits against 4
    auto one = nlohmann::json::parse(
        run_gpupool({"--json", "model-memory", snapshot.path().string(), "--max-tokens", "1024"}).out);
    auto eight = nlohmann::json::parse(
        run_gpupool({"--json", "model-memory", snapshot.path().string(), "--max-tokens", "1024", "--batch", "8"}).out);
    CHECK(eight.at("kv_cache_bytes") == 8 * one.at("kv_cache_bytes").get<std::int64_t>());
}

TEST_CASE("model-memory: what it cannot size is refused naming the file, the field or the option",
          "[cli][model_memory]") {
    gpupool::test::TempDir dir;
    auto empty = run_gpupool({"model-memory", dir.path().string()});
    CHECK(empty.exit_code == 1);
    CHECK_THAT(empty.err, Catch::Contains(dir.path().string() + ": no config.json in this folder"));

    const auto mamba = dir.write("config.json", R"({"model_type": "mamba", "hidden_size": 768})");
    auto unknown = run_gpupool({"model-memory", mamba.string()});
    CHECK(unknown.exit_code == 1);
    CHECK_THAT(unknown.err, Catch::Contains(mamba.string() + ": model_type: ") && Catch::Contains("mamba") &&
                                Catch::Contains("gpu_memory"));

    auto dtype = run_gpupool({"model-memory", fixture("gpt2").string(), "--dtype", "float8"});
    CHECK(dtype.exit_code == 2);
    CHECK_THAT(dtype.err, Catch::Contains("--dtype: "));
}

} // namespace test_model_memory_cli
} // namespace
