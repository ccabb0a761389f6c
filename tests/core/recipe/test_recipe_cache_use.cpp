// `[cache]` dtype, max_tokens and batch: read into the JobSpec's model_use, merged through `extends`
// like the other keys, carried in the job's JSON (absent there: the defaults, so jobs stored before
// these keys still read). Their mistakes are rows of test_recipe_invalid.cpp.
#include "core/recipe/parser.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_cache_use {

using namespace gpupool;

const char* const k_head = "image = \"busybox\"\ncommand = [\"true\"]\n";

TEST_CASE("cache use: dtype, max_tokens and batch are read beside models", "[recipe][cache]") {
    auto r = recipe::parse_recipe_text(std::string(k_head) + "[cache]\nmodels = [\"meta-llama/Llama-2-7b-hf\"]\n"
                                                             "dtype = \"int8\"\nmax_tokens = 4096\nbatch = 8\n",
                                       "use.toml");
    REQUIRE(r.has_value());
    const resources::ModelUse& use = r->base.model_use;
    CHECK(use.dtype == "int8");
    CHECK(use.max_tokens == 4096);
    CHECK(use.batch == 8);
    auto jobs = recipe::expand(*r);
    REQUIRE(jobs.has_value());
    CHECK(jobs->front().model_use == use);
}

TEST_CASE("cache use: without the keys, the config's dtype, no KV cache and a batch of 1", "[recipe][cache]") {
    auto r = recipe::parse_recipe_text(std::string(k_head) + "[cache]\nmodels = [\"gpt2\"]\n", "plain.toml");
    REQUIRE(r.has_value());
    CHECK(r->base.model_use.dtype.empty());
    CHECK(r->base.model_use.max_tokens == 0);
    CHECK(r->base.model_use.batch == 1);
}

TEST_CASE("cache use: a recipe that extends another keeps the keys it does not set", "[recipe][cache]") {
    test::TempDir dir;
    dir.write("base.toml",
              std::string(k_head) + "[cache]\nmodels = [\"gpt2\"]\ndtype = \"float32\"\nmax_tokens = 1024\n");
    auto child = dir.write("child.toml", "extends = \"base.toml\"\n[cache]\ndtype = \"float16\"\nbatch = 4\n");
    auto r = recipe::parse_recipe_file(child);
    REQUIRE(r.has_value());
    CHECK(r->base.cache_models == std::vector<std::string>{"gpt2"});
    CHECK(r->base.model_use.dtype == "float16"); // the child's
    CHECK(r->base.model_use.max_tokens == 1024); // the base's
    CHECK(r->base.model_use.batch == 4);
}

TEST_CASE("cache use: the JSON carries it, and a job without it reads as the defaults", "[recipe][cache][json]") {
    auto r = recipe::parse_recipe_text(std::string(k_head) + "[cache]\nmodels = [\"gpt2\"]\nmax_tokens = 2048\n",
                                       "json.toml");
    REQUIRE(r.has_value());
    auto jobs = recipe::expand(*r);
    REQUIRE(jobs.has_value());
    const nlohmann::json wire = recipe::to_wire_json(jobs->front());
    CHECK(wire.at("model_use") == nlohmann::json{{"dtype", ""}, {"max_tokens", 2048}, {"batch", 1}});
    auto back = recipe::job_from_json(wire);
    REQUIRE(back.has_value());
    CHECK(back->model_use == jobs->front().model_use);

    nlohmann::json old = wire;
    old.erase("model_use"); // a job stored before the keys existed
    auto old_job = recipe::job_from_json(old);
    REQUIRE(old_job.has_value());
    CHECK(old_job->model_use == resources::ModelUse{});
    CHECK_FALSE(recipe::to_wire_json(*old_job).contains("model_use"));

    nlohmann::json bad = wire;
    bad["model_use"]["dtype"] = "float8";
    auto refused = recipe::job_from_json(bad);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "model_use.dtype");
    bad = wire;
    bad["model_use"]["batch"] = 0;
    refused = recipe::job_from_json(bad);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "model_use.batch");
}

} // namespace test_recipe_cache_use
} // namespace
