// Sweep values (and [env] numbers) keep the spelling the recipe gives them: `1.0` stays `1.0` in
// job names, commands and parameters, wherever the number was written (the file, a recipe it
// extends, a --set override).
#include "core/recipe/parser.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_spelling {

using namespace gpupool;
using namespace gpupool::recipe;

namespace {

std::vector<JobSpec> jobs_of(const std::string& text, const ParseOptions& options = {}) {
    auto r = parse_recipe_text(text, "spelt.toml", options);
    if (!r) {
        FAIL("unexpected error: " << r.error().describe());
    }
    auto jobs = expand(*r, options);
    REQUIRE(jobs);
    return *jobs;
}

std::vector<std::string> names(const std::vector<JobSpec>& jobs) {
    std::vector<std::string> out;
    for (const auto& j : jobs) {
        out.push_back(j.name);
    }
    return out;
}

} // namespace

TEST_CASE("sweep floats keep their TOML spelling in names, commands, env and params") {
    auto jobs = jobs_of("name = \"train-lr{lr}\"\nimage = \"b\"\n"
                        "command = [\"train\", \"--lr\", \"{lr}\"]\n"
                        "[env]\nLR = \"{lr}\"\n"
                        "[sweep]\nlr = [1.0, 0.10, 1e-3]\n");
    CHECK(names(jobs) == std::vector<std::string>{"train-lr1.0", "train-lr0.10", "train-lr1e-3"});
    REQUIRE(jobs.size() == 3);
    CHECK(jobs[0].command == std::vector<std::string>{"train", "--lr", "1.0"});
    CHECK(jobs[1].command == std::vector<std::string>{"train", "--lr", "0.10"});
    CHECK(jobs[2].command == std::vector<std::string>{"train", "--lr", "1e-3"});
    CHECK(jobs[1].params == EnvList{{"lr", "0.10"}});
    CHECK(jobs[2].env == EnvList{{"LR", "1e-3"}});
}

TEST_CASE("sweep integers and special floats keep their spelling too") {
    auto jobs = jobs_of("name = \"n{n}\"\nimage = \"b\"\ncommand = \"x\"\n"
                        "[sweep]\nn = [ 1_000,+5, 0x10 ,-0.0, 6.02E23, inf, nan ]\n");
    CHECK(names(jobs) == std::vector<std::string>{"n1_000", "n+5", "n0x10", "n-0.0", "n6.02E23", "ninf", "nnan"});
}

TEST_CASE("a number's spelling is found past multi-byte characters and in CRLF files") {
    auto jobs = jobs_of("name = \"{v}\"\r\nimage = \"b\"\r\ncommand = \"x\"\r\n"
                        "[sweep]\r\nv = [\"\xc3\xbc\xe2\x82\xac\", 1.50, \"\xf0\x9f\x98\x80\", 2.0]\r\n");
    CHECK(names(jobs) == std::vector<std::string>{"\xc3\xbc\xe2\x82\xac", "1.50", "\xf0\x9f\x98\x80", "2.0"});
}

TEST_CASE("sweep values written over several lines keep their spelling") {
    auto jobs = jobs_of("name = \"{lr}-{wd}\"\nimage = \"b\"\ncommand = \"x\"\n"
                        "[sweep]\nlr = [\n  1.0, # the baseline\n  3.00,\n]\nwd = [0.0]\n");
    CHECK(names(jobs) == std::vector<std::string>{"1.0-0.0", "3.00-0.0"});
}

TEST_CASE("a plain [env] number keeps its spelling") {
    auto jobs = jobs_of("image = \"b\"\ncommand = \"x\"\n[env]\nLR = 1.0\nSTEPS = 1_000\nON = true\n");
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].env == EnvList{{"LR", "1.0"}, {"ON", "true"}, {"STEPS", "1_000"}});
}

TEST_CASE("sweep values from a recipe that is extended keep the parent file's spelling") {
    gpupool::test::TempDir dir;
    dir.write("base.toml", "# the parent\nname = \"p-{lr}\"\nimage = \"b\"\ncommand = \"x {lr}\"\n"
                           "[sweep]\nlr = [5.0, 2.50]\n");
    auto child = dir.write("child.toml", "extends = \"base.toml\"\n[env]\nLR = 1.0\n");
    auto r = parse_recipe_file(child);
    REQUIRE(r);
    auto jobs = expand(*r);
    REQUIRE(jobs);
    CHECK(names(*jobs) == std::vector<std::string>{"p-5.0", "p-2.50"});
    CHECK((*jobs)[1].command[0] == "x 2.50");
    CHECK((*jobs)[0].env == EnvList{{"LR", "1.0"}});
}

TEST_CASE("sweep values set with --set keep the spelling typed on the command line") {
    ParseOptions options;
    options.overrides = {{"sweep.lr", "[1.0,2.50]"}, {"env.WD", "0.10"}};
    auto jobs = jobs_of("name = \"r-{lr}\"\nimage = \"b\"\ncommand = \"x\"\n[sweep]\nlr = [9.0]\n", options);
    CHECK(names(jobs) == std::vector<std::string>{"r-1.0", "r-2.50"});
    REQUIRE(jobs.size() == 2);
    CHECK(jobs[0].env == EnvList{{"WD", "0.10"}});
}

TEST_CASE("two spellings of one number are duplicate sweep values") {
    auto r = parse_recipe_text("image = \"b\"\ncommand = \"x {lr}\"\n[sweep]\nlr = [1.0, 2.0, 1.00]\n", "dup.toml");
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "sweep.lr[2]");
    CHECK_THAT(r.error().message, Catch::Contains("duplicate sweep value `1.00` (the same as `1.0`)"));
    REQUIRE(r.error().where);
    CHECK(r.error().where->line == 4);
}

} // namespace test_recipe_spelling
} // namespace
