// Finding a command's recipe (core/catalog/resolve.hpp): a name or a file, which repositories are
// read, a recipe that is not there, a repository that cannot be read, and the lazy `extends`
// resolver. Against real git repositories (tests/core/catalog/git_fixture.hpp).
#include "core/catalog/resolve.hpp"
#include "tests/core/catalog/git_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_resolve {

namespace fs = std::filesystem;
using namespace gpupool;
using catalog::GitCommand;
using test::GitRepo;
using test::tiny_recipe;

TEST_CASE("an argument names a recipe only when no such file exists and it reads as a recipe name", "[catalog]") {
    test::TempDir tmp;
    const auto file = tmp.write("eval", tiny_recipe());
    CHECK_FALSE(catalog::names_a_recipe(file.string())); // an existing file is read as one, even without .toml
    CHECK(catalog::names_a_recipe("toy-eval-not-a-file-here"));
    CHECK_FALSE(catalog::names_a_recipe("toy-eval-not-a-file-here.toml")); // a missing file, not a name
    CHECK_FALSE(catalog::names_a_recipe("recipes/toy-eval-not-here"));     // a path
    CHECK_FALSE(catalog::names_a_recipe("Toy_Eval"));                      // not a valid recipe name
    CHECK_FALSE(catalog::names_a_recipe(""));
}

TEST_CASE("the --repo values replace the configured repositories, and a bad one is named by where it came from",
          "[catalog]") {
    auto both = catalog::recipe_repos({"/srv/a", "/srv/b"}, {"/srv/configured"});
    REQUIRE(both.has_value());
    REQUIRE(both->size() == 2);
    CHECK((*both)[0].location == "/srv/a");
    CHECK((*both)[1].location == "/srv/b");

    auto configured = catalog::recipe_repos({}, {"/srv/configured", "https://example.org/r@v1"});
    REQUIRE(configured.has_value());
    REQUIRE(configured->size() == 2);
    CHECK((*configured)[0].location == "/srv/configured");
    CHECK((*configured)[1].revision == "v1");

    auto none = catalog::recipe_repos({}, {});
    REQUIRE(none.has_value());
    CHECK(none->empty());

    auto bad_flag = catalog::recipe_repos({"/srv/a", "--upload-pack=touch /tmp/x"}, {});
    REQUIRE_FALSE(bad_flag.has_value());
    CHECK(bad_flag.error().field == "--repo");
    auto bad_config = catalog::recipe_repos({}, {"/srv/a", "-c"});
    REQUIRE_FALSE(bad_config.has_value());
    CHECK(bad_config.error().field == "recipes[1]");
}

TEST_CASE("a recipe that is in no repository is not_found, with the nearest name or where to look", "[catalog]") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "community");
    repo.recipe("toy-eval", tiny_recipe());
    repo.commit("first");
    GitCommand git;
    auto cat = catalog::open_catalog({repo.dir().string()}, {}, git, tmp.path() / "cache");
    REQUIRE(cat.has_value());

    auto found = catalog::find_recipe(*cat, "toy-eval", "no recipe file `toy-eval`");
    REQUIRE(found.has_value());
    CHECK((*found)->name == "toy-eval");

    auto typo = catalog::find_recipe(*cat, "toy-evl", "no recipe file `toy-evl`");
    REQUIRE_FALSE(typo.has_value());
    CHECK(typo.error().code == ErrorCode::not_found);
    CHECK(typo.error().message == "no recipe file `toy-evl`, and no recipe of that name in the recipe repositories; "
                                  "did you mean `toy-eval`?");

    auto far = catalog::find_recipe(*cat, "zzz", "no recipe `zzz`");
    REQUIRE_FALSE(far.has_value());
    CHECK(far.error().message ==
          "no recipe `zzz`, and no recipe of that name in the recipe repositories; `gpupool recipe list` shows them");
}

TEST_CASE("with no repository configured, a missing recipe says how to add one", "[catalog]") {
    test::TempDir tmp;
    GitCommand git;
    auto cat = catalog::open_catalog({}, {}, git, tmp.path() / "cache");
    REQUIRE(cat.has_value());
    CHECK(cat->repositories().empty());
    auto r = catalog::find_recipe(*cat, "toy-eval", "no recipe file `toy-eval`");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::not_found);
    CHECK(r.error().message == "no recipe file `toy-eval`, and no recipe of that name in any recipe repository (none "
                               "is configured: add `recipes = [\"URL\"]` to the client config, or pass --repo)");
}

TEST_CASE("a repository that cannot be read is a problem of the catalog, not an error, and the others serve",
          "[catalog]") {
    test::TempDir tmp;
    GitRepo ok(tmp.path() / "ok");
    ok.recipe("fine", tiny_recipe());
    ok.commit("c");
    GitCommand git;
    const std::string unknown = "file://" + (tmp.path() / "no-such-repository").string();
    auto cat = catalog::open_catalog({}, {unknown, ok.dir().string()}, git, tmp.path() / "cache");
    REQUIRE(cat.has_value());
    REQUIRE(cat->problems().size() == 1);
    CHECK(cat->problems()[0].message.find("no-such-repository") != std::string::npos);
    CHECK(catalog::find_recipe(*cat, "fine", "no recipe `fine`").has_value());

    // A reference that does not even parse stops before any repository is opened.
    auto refused = catalog::open_catalog({"-c"}, {ok.dir().string()}, git, tmp.path() / "cache");
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "--repo");
}

TEST_CASE("the lazy resolver opens the catalog on its first lookup only, and a failure is told once", "[catalog]") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "base");
    repo.recipe("base-eval", tiny_recipe());
    repo.commit("c");
    GitCommand git;
    int opened = 0;
    auto resolve = catalog::lazy_resolver(
        [&]() -> Result<catalog::Catalog> {
            ++opened;
            return catalog::open_catalog({repo.dir().string()}, {}, git, tmp.path() / "cache");
        },
        [](const Error&) { FAIL("no error expected"); });
    CHECK(opened == 0);
    auto hit = resolve("base-eval");
    REQUIRE(hit.has_value());
    CHECK(fs::equivalent(hit->file, repo.dir() / "base-eval" / "recipe.toml"));
    CHECK_FALSE(resolve("other").has_value());
    CHECK(opened == 1);

    int failures = 0;
    auto broken = catalog::lazy_resolver(
        []() -> Result<catalog::Catalog> { return make_error(ErrorCode::invalid_input, "bad --repo", "--repo"); },
        [&](const Error& e) {
            ++failures;
            CHECK(e.field == "--repo");
        });
    CHECK_FALSE(broken("base-eval").has_value());
    CHECK_FALSE(broken("base-eval").has_value());
    CHECK(failures == 1);
}

} // namespace test_resolve
} // namespace
