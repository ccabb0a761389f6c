// What a person sees when a recipe or a `--set` override is wrong (the messages themselves are
// specified in tests/core/recipe; here: the order, the source they name, the JSON and exit 1).
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_errors {

using gpupool::test::run_gpupool;
using gpupool::test::TempDir;

TEST_CASE("recipe errors: a misspelt [sweeps] leads, and the placeholders it defines are not blamed") {
    TempDir dir;
    auto file = dir.write("eval.toml", "image = \"busybox\"\n"
                                       "command = [\"echo\", \"{n}\", \"{lr}\"]\n"
                                       "name = \"job-{n}\"\n"
                                       "[sweeps]\n"
                                       "n = [1, 2]\n"
                                       "lr = [0.1]\n");
    auto r = run_gpupool({"recipe", "validate", file.string()});
    CHECK(r.exit_code == 1);
    CHECK(r.err ==
          "error: " + file.string() + ":4:2: sweeps: unknown key `sweeps` at the top level; did you mean `sweep`?\n");
}

TEST_CASE("recipe errors: --set problems name --set KEY, not a line of the recipe") {
    TempDir dir;
    auto file = dir.write("ok.toml", "image = \"busybox\"\ncommand = [\"true\"]\n");
    auto r = run_gpupool({"recipe", "validate", file.string(), "--set", "resources.gpu_memory=abc"});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "error: --set resources.gpu_memory: expected a size like \"16GiB\" or \"512MiB\", got `abc`\n");

    auto typo = run_gpupool({"recipe", "validate", file.string(), "--set", "resources.gpu_mem=16GiB"});
    CHECK(typo.err ==
          "error: --set resources.gpu_mem: unknown key `gpu_mem` in [resources]; did you mean `gpu_memory`?\n");

    auto j = nlohmann::json::parse(
        run_gpupool({"recipe", "validate", file.string(), "--set", "resources.gpus=3", "--json"}).out);
    CHECK(j["error"]["file"] == "--set resources.gpus");
    CHECK(j["error"]["field"] == "resources.gpus");
    CHECK_FALSE(j["error"].contains("line"));
}

TEST_CASE("recipe errors: durations and sizes may have a space before the unit") {
    TempDir dir;
    auto file = dir.write("spaced.toml", "image = \"busybox\"\ncommand = [\"true\"]\n[resources]\n"
                                         "max_runtime = \"5 min\"\nmemory = \"16 GiB\"\n");
    auto r = run_gpupool({"recipe", "validate", "--json", file.string()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["jobs"][0]["resources"]["max_runtime_s"] == 300);
    CHECK(j["jobs"][0]["resources"]["memory_mib"] == 16384);
}

} // namespace test_recipe_errors
} // namespace
