// The subcommands called as functions, without argv (cmd/<name>.hpp): run_* takes the parsed
// options and returns the exit code; what it prints is captured here.
#include "cmd/price.hpp"
#include "cmd/recipe.hpp"
#include "cmd/version.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <sstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_run_commands {

using namespace gpupool;
using namespace gpupool::cmd;
using gpupool::test::TempDir;

namespace {

// Captures std::cout and std::cerr for its lifetime.
class Captured {
public:
    Captured() : m_out(std::cout.rdbuf(m_out_text.rdbuf())), m_err(std::cerr.rdbuf(m_err_text.rdbuf())) {}
    ~Captured() {
        std::cout.rdbuf(m_out);
        std::cerr.rdbuf(m_err);
    }
    Captured(const Captured&) = delete;
    Captured& operator=(const Captured&) = delete;
    std::string out() const { return m_out_text.str(); }
    std::string err() const { return m_err_text.str(); }

private:
    std::ostringstream m_out_text;
    std::ostringstream m_err_text;
    std::streambuf* m_out;
    std::streambuf* m_err;
};

} // namespace

TEST_CASE("run_price: an offline estimate of a recipe as JSON, without a coordinator", "[cmd]") {
    TempDir dir;
    PriceOptions o;
    o.global.json = true;
    o.offline = true;
    o.recipe.file = dir.write("train.toml", "image = \"busybox\"\ncommand = [\"true\"]\n"
                                            "[resources]\ngpu_memory = \"20GiB\"\nmax_runtime = \"2h\"\n"
                                            "[sweep]\nn = [1, 2, 3]\n")
                        .string();
    Captured c;
    const int code = run_price(o);
    INFO(c.err());
    REQUIRE(code == k_exit_ok);
    const auto e = nlohmann::json::parse(c.out());
    CHECK(e["jobs"] == 3);
    CHECK(e["pool"].is_null());
    CHECK(e["pool_note"].get<std::string>().starts_with("offline"));
    REQUIRE_FALSE(e["models"].empty());
    // Cheapest first, and only models with 20 GiB or more.
    std::int64_t last = 0;
    for (const auto& m : e["models"]) {
        CHECK(m["memory_mib"].get<std::int64_t>() >= 20 * 1024);
        CHECK(m["max_micro"].get<std::int64_t>() >= last);
        last = m["max_micro"].get<std::int64_t>();
    }
}

TEST_CASE("run_price: a recipe that does not parse fails with exit 1 and says why", "[cmd]") {
    TempDir dir;
    PriceOptions o;
    o.offline = true;
    o.recipe.file = dir.write("bad.toml", "image = \"busybox\"\n").string();
    Captured c;
    CHECK(run_price(o) == k_exit_failed);
    CHECK(c.out().empty());
    CHECK(c.err().find("missing required key `command`") != std::string::npos);
}

TEST_CASE("run_recipe: builtins, show and validate", "[cmd]") {
    RecipeOptions o;
    o.global.json = true;
    o.action = RecipeAction::builtins;
    {
        Captured c;
        REQUIRE(run_recipe(o) == k_exit_ok);
        const auto names = nlohmann::json::parse(c.out());
        CHECK(std::find(names.begin(), names.end(), "inspect") != names.end());
    }
    o.global.json = false;
    o.action = RecipeAction::show;
    o.name = "inspect";
    {
        Captured c;
        CHECK(run_recipe(o) == k_exit_ok);
        CHECK(c.out().find("image") != std::string::npos);
    }
    o.name = "no-such-recipe";
    {
        Captured c;
        CHECK(run_recipe(o) == k_exit_failed);
        // Neither built in nor in a recipe repository (which ones depends on the user's config).
        CHECK(c.err().rfind("error: no built-in recipe `no-such-recipe`, and no recipe of that name in ", 0) == 0);
    }
    TempDir dir;
    o.global.json = true;
    o.action = RecipeAction::validate;
    o.recipe.file = dir.write("sweep.toml", "image = \"busybox\"\ncommand = [\"echo\", \"{n}\"]\n[sweep]\nn = [1, 2]\n")
                        .string();
    o.recipe.set = {"resources.gpu=0.5"};
    {
        Captured c;
        REQUIRE(run_recipe(o) == k_exit_ok);
        const auto j = nlohmann::json::parse(c.out());
        REQUIRE(j["jobs"].size() == 2);
        CHECK(j["jobs"][1]["command"][1] == "2");
        CHECK(j["jobs"][0]["resources"]["gpu_milli"] == 500);
    }
}

TEST_CASE("run_version: the version as text or JSON", "[cmd]") {
    Captured c;
    CHECK(run_version(VersionOptions{}) == k_exit_ok);
    CHECK(c.out() == std::string("gpupool ") + GPUPOOL_VERSION + " (recipe format 1)\n");
}

} // namespace test_run_commands
} // namespace
