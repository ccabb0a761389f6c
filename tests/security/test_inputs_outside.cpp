// `[inputs] paths` are uploaded with the job, so a recipe someone else wrote must not be able to
// ship `../../.ssh` or `/etc/...` silently: paths that lead outside the recipe's directory (`..`, an
// absolute path, a symlink inside it that points out) are refused, naming the file, line and field,
// unless --allow-outside is given to submit, run and price.
#include "core/recipe/parser.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_inputs_outside {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

// dir/secret.txt outside, dir/project/ with a recipe whose inputs are `input` (line 9).
struct Layout {
    test::TempDir dir;
    fs::path secret;
    fs::path project;

    Layout() {
        secret = dir.write("secret.txt", "id_rsa\n");
        project = dir.path() / "project";
        fs::create_directories(project);
        dir.write("project/inside.txt", "fine\n");
        fs::create_symlink(secret, project / "link.txt");
    }

    fs::path recipe(const std::string& input) const {
        return dir.write("project/r.toml", "format = 1\nname = \"r\"\nimage = \"x\"\ncommand = \"cat $GPUPOOL_WORK_DIR/*\"\n"
                                           "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n[inputs]\npaths = [\"" +
                                               input + "\"]\n");
    }
};

constexpr std::uint32_t k_paths_line = 9;

} // namespace

TEST_CASE("inputs outside the recipe's directory: refused with file, line and field", "[security][recipe]") {
    Layout l;
    for (const std::string& input : {std::string("../secret.txt"), l.secret.string(), std::string("link.txt")}) {
        INFO(input);
        auto r = recipe::parse_recipe_file(l.recipe(input));
        REQUIRE_FALSE(r);
        CHECK(r.error().field == "inputs.paths[0]");
        REQUIRE(r.error().where);
        CHECK(r.error().where->file == l.recipe(input).string());
        CHECK(r.error().where->line == k_paths_line);
        CHECK_THAT(r.error().message, Catch::Contains("`" + input + "` is outside the recipe's directory") &&
                                          Catch::Contains("--allow-outside"));
    }
    // Inside is fine, and so is the directory itself.
    CHECK(recipe::parse_recipe_file(l.recipe("inside.txt")));
    CHECK(recipe::parse_recipe_file(l.recipe(".")));
}

TEST_CASE("inputs outside the recipe's directory: allowed when asked", "[security][recipe]") {
    Layout l;
    recipe::ParseOptions o;
    o.allow_outside_inputs = true;
    auto r = recipe::parse_recipe_file(l.recipe("link.txt"), o);
    REQUIRE(r);
    auto jobs = recipe::expand(*r, o);
    REQUIRE(jobs);
    REQUIRE(jobs->front().inputs.resolved.size() == 1);
    CHECK(fs::path(jobs->front().inputs.resolved[0]) == fs::canonical(l.secret));
}

TEST_CASE("inputs outside the recipe's directory: submit, price and run refuse them without --allow-outside",
          "[security][cli]") {
    Layout l;
    const std::string file = l.recipe("../secret.txt").string();
    const std::string where = file + ":" + std::to_string(k_paths_line);

    auto dry = test::run_gpupool({"submit", "--dry-run", file});
    CHECK(dry.exit_code == 1);
    CHECK_THAT(dry.err, Catch::Contains(where) && Catch::Contains("inputs.paths[0]") &&
                            Catch::Contains("outside the recipe's directory"));
    auto dry_allowed = test::run_gpupool({"submit", "--dry-run", "--allow-outside", file});
    INFO(dry_allowed.err);
    CHECK(dry_allowed.exit_code == 0);

    auto price = test::run_gpupool({"price", "--offline", file});
    CHECK(price.exit_code == 1);
    CHECK_THAT(price.err, Catch::Contains(where));
    CHECK(test::run_gpupool({"price", "--offline", "--allow-outside", file}).exit_code == 0);

    const std::string state = (l.dir.path() / "state").string();
    auto run = test::run_gpupool({"run", "--runtime", "process", file, "--data-dir", state}, l.dir.path());
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Catch::Contains(where));
    CHECK_FALSE(fs::exists(l.dir.path() / "gpupool-out")); // refused before anything ran

    auto allowed =
        test::run_gpupool({"run", "--runtime", "process", "--allow-outside", file, "--data-dir", state}, l.dir.path());
    INFO(allowed.out << allowed.err);
    CHECK(allowed.exit_code == 0);
    CHECK(test::slurp(l.dir.path() / "gpupool-out" / "r.log") == "id_rsa\n"); // it was shipped, as asked
}

} // namespace test_inputs_outside
} // namespace
