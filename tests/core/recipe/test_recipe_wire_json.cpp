// The plain (wire) JSON of jobs is the ordered one with keys in any order: the API's bodies are
// built directly, and read back by job_from_json into the same JobSpec.
#include "core/recipe/recipe_json.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_wire_json {

using namespace gpupool;

TEST_CASE("recipe json: to_wire_json equals to_json read as plain JSON, and reads back to the same job",
          "[recipe][json]") {
    recipe::JobSpec s;
    s.name = "sweep-3";
    s.image = "ghcr.io/x/y:1";
    s.command = {"python", "eval.py", "--n", "3"};
    s.env = {{"B", "2"}, {"A", "1"}};
    s.params = {{"n", "3"}};
    s.resources.gpus = 1;
    s.resources.gpu_milli = 250;
    s.resources.gpu_models = {"L4", "A100-80GB"};
    s.resources.cpu_milli = 2000;
    s.resources.memory_mib = 4096;
    s.resources.max_runtime_s = 600;
    s.cache_models = {"gpt2", "org/model@" + std::string(40, 'c')}; // a pinned revision too (gpupool repro)
    s.sweep_index = 3;
    s.recipe_sha256 = std::string(64, 'e');
    const nlohmann::json wire = recipe::to_wire_json(s);
    CHECK(wire == nlohmann::json::parse(recipe::to_json(s).dump()));
    CHECK(recipe::to_wire_json(std::vector<recipe::JobSpec>{s, s}) ==
          nlohmann::json::parse(recipe::to_json(std::vector<recipe::JobSpec>{s, s}).dump()));
    auto back = recipe::job_from_json(wire);
    REQUIRE(back.has_value());
    CHECK(recipe::to_wire_json(*back) == wire);
    CHECK(back->recipe_sha256 == s.recipe_sha256);
    CHECK(back->cache_models == s.cache_models);
    // The recipe's digest is 64 lowercase hex digits or absent.
    auto bad = wire;
    bad["recipe_sha256"] = "ABC";
    auto refused = recipe::job_from_json(bad);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().field == "recipe_sha256");
}

} // namespace test_recipe_wire_json
} // namespace
