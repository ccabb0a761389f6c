// The catalog against real git repositories made on the fly (tests/core/catalog/git_fixture.hpp).
#include "core/catalog/catalog.hpp"
#include "core/catalog/starters.hpp"
#include "core/recipe/parser.hpp"
#include "tests/core/catalog/git_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_catalog {

namespace fs = std::filesystem;
using namespace gpupool;
using catalog::Catalog;
using catalog::GitCommand;
using catalog::RepoRef;
using test::GitRepo;
using test::tiny_recipe;

namespace {

RepoRef ref_of(const fs::path& p, const std::string& rev = "") {
    return RepoRef{p.string(), rev};
}

// A clone from a file:// URL, so the repository is cloned into the cache rather than read in place.
RepoRef url_of(const GitRepo& r, const std::string& rev = "") {
    return RepoRef{"file://" + r.dir().string(), rev};
}

} // namespace

TEST_CASE("a cloned repository lists its recipes with descriptions, tags and the commit") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "community");
    repo.recipe("toy-eval", tiny_recipe("tags = [\"eval\", \"cpu\"]\n"), "A tiny evaluation.");
    repo.recipe("probe", tiny_recipe(), "Linear probes.");
    repo.write("docs/notes.md", "not a recipe\n");
    repo.write(".hidden/recipe.toml", tiny_recipe());
    repo.recipe("Bad_Name", tiny_recipe());
    const std::string commit = repo.commit("first");

    GitCommand git;
    auto cat = Catalog::open({url_of(repo)}, git, tmp.path() / "cache");
    REQUIRE(cat.repositories().size() == 1);
    CHECK(cat.repositories()[0].cloned);
    CHECK(cat.repositories()[0].commit == commit);
    REQUIRE(cat.names() == std::vector<std::string>{"probe", "toy-eval"});
    const auto* e = cat.find("toy-eval");
    REQUIRE(e != nullptr);
    CHECK(e->description == "A tiny evaluation.");
    CHECK(e->tags == std::vector<std::string>{"eval", "cpu"});
    CHECK(e->origin == recipe::Origin{"toy-eval", url_of(repo).location, commit});
    // The folder with a name that is not a recipe name is reported, by path, not listed.
    REQUIRE(cat.problems().size() == 1);
    CHECK(cat.problems()[0].where->file.ends_with("Bad_Name"));
    CHECK(fs::exists(cat.repositories()[0].root / "toy-eval" / "recipe.toml"));
    CHECK(cat.repositories()[0].root.parent_path() == tmp.path() / "cache");
}

TEST_CASE("a broken recipe in a repository is reported with its path and line, and the rest still list") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "r");
    repo.recipe("good", tiny_recipe());
    repo.recipe("broken", "format = 1\nimage = \"busybox\"\ncommand = \"true\"\n[resources]\nmemroy = \"1GiB\"\n");
    repo.commit("c");
    GitCommand git;
    auto cat = Catalog::open({ref_of(repo.dir())}, git, tmp.path() / "cache");
    CHECK(cat.names() == std::vector<std::string>{"good"});
    REQUIRE(cat.problems().size() == 1);
    const Error& e = cat.problems()[0];
    REQUIRE(e.where);
    CHECK(e.where->file == (repo.dir() / "broken" / "recipe.toml").string());
    CHECK(e.where->line == 5);
    CHECK(e.field == "resources.memroy");
    // A local folder without a pinned revision is read in place: nothing was cloned.
    CHECK_FALSE(cat.repositories()[0].cloned);
    CHECK_FALSE(fs::exists(tmp.path() / "cache"));
}

TEST_CASE("on a name clash the first repository wins and the other is kept as shadowed") {
    test::TempDir tmp;
    GitRepo a(tmp.path() / "a");
    GitRepo b(tmp.path() / "b");
    a.recipe("shared", tiny_recipe(), "From A.");
    b.recipe("shared", tiny_recipe(), "From B.");
    b.recipe("only-b", tiny_recipe());
    a.commit("a");
    b.commit("b");
    GitCommand git;
    auto cat = Catalog::open({ref_of(a.dir()), ref_of(b.dir())}, git, tmp.path() / "cache");
    CHECK(cat.names() == std::vector<std::string>{"shared", "only-b"});
    CHECK(cat.find("shared")->description == "From A.");
    REQUIRE(cat.shadowed().size() == 1);
    CHECK(cat.shadowed()[0].description == "From B.");
    auto swapped = Catalog::open({ref_of(b.dir()), ref_of(a.dir())}, git, tmp.path() / "cache");
    CHECK(swapped.find("shared")->description == "From B.");
}

TEST_CASE("extends names a recipe of another repository, and the jobs record both origins") {
    test::TempDir tmp;
    GitRepo base(tmp.path() / "base");
    base.recipe("team-base", tiny_recipe("[env]\nFROM_BASE = \"yes\"\n"));
    const std::string base_commit = base.commit("base");
    GitRepo top(tmp.path() / "top");
    top.recipe("child", "extends = \"team-base\"\nname = \"child-{n}\"\n[sweep]\nn = [1, 2]\n");
    const std::string top_commit = top.commit("top");

    GitCommand git;
    auto cat = Catalog::open({url_of(top), url_of(base)}, git, tmp.path() / "cache");
    REQUIRE(cat.problems().empty());
    const auto* child = cat.find("child");
    REQUIRE(child != nullptr);
    auto parsed = recipe::parse_recipe_file(child->file(), cat.parse_options(*child));
    REQUIRE(parsed);
    auto jobs = recipe::expand(*parsed);
    REQUIRE(jobs);
    REQUIRE(jobs->size() == 2);
    const auto& job = jobs->front();
    CHECK(job.env == recipe::EnvList{{"FROM_BASE", "yes"}});
    REQUIRE(job.origins.size() == 2);
    CHECK(job.origins[0] == recipe::Origin{"child", url_of(top).location, top_commit});
    CHECK(job.origins[1] == recipe::Origin{"team-base", url_of(base).location, base_commit});

    // A local recipe file may extend a repository recipe through the same resolver.
    auto local = tmp.write("mine.toml", "extends = \"team-base\"\n");
    recipe::ParseOptions options;
    options.resolve_name = cat.resolver();
    auto mine = recipe::parse_recipe_file(local, options);
    REQUIRE(mine);
    REQUIRE(mine->base.origins.size() == 1);
    CHECK(mine->base.origins[0].recipe == "team-base");
    // Without the resolver the name is unknown, and the message says where it looked.
    auto plain = recipe::parse_recipe_file(local);
    REQUIRE_FALSE(plain);
    CHECK(plain.error().message.find("unknown built-in recipe `team-base`") != std::string::npos);
}

TEST_CASE("a recipe that extends itself through a repository is a cycle, not a hang") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "r");
    repo.recipe("loop-a", "extends = \"loop-b\"\nimage = \"busybox\"\ncommand = \"true\"\n");
    repo.recipe("loop-b", "extends = \"loop-a\"\n");
    repo.commit("c");
    GitCommand git;
    auto cat = Catalog::open({ref_of(repo.dir())}, git, tmp.path() / "cache");
    CHECK(cat.names().empty());
    REQUIRE(cat.problems().size() == 2);
    CHECK(cat.problems()[0].message.find("cycle") != std::string::npos);
}

TEST_CASE("a pinned revision is checked out and stays put across an update, while an unpinned one moves") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "r");
    repo.recipe("first", tiny_recipe());
    const std::string v1 = repo.commit("v1");
    repo.tag("v1");
    repo.recipe("second", tiny_recipe());
    const std::string v2 = repo.commit("v2");

    GitCommand git;
    const fs::path cache = tmp.path() / "cache";
    const std::vector<RepoRef> refs{url_of(repo, "v1"), url_of(repo)};
    auto pinned = Catalog::open({refs[0]}, git, cache);
    CHECK(pinned.repositories()[0].commit == v1);
    CHECK(pinned.names() == std::vector<std::string>{"first"});
    auto head = Catalog::open({refs[1]}, git, cache);
    CHECK(head.repositories()[0].commit == v2);
    CHECK(head.names() == std::vector<std::string>{"first", "second"});

    // A new commit: the clone does not see it until `update`.
    repo.recipe("third", tiny_recipe());
    const std::string v3 = repo.commit("v3");
    CHECK(Catalog::open({refs[1]}, git, cache).names().size() == 2);
    auto updated = catalog::update_repositories(refs, git, cache);
    REQUIRE(updated.size() == 2);
    CHECK(updated[0].error.has_value());
    CHECK(updated[0].before == v1);
    CHECK(updated[0].after == v1);
    CHECK(updated[1].error.has_value());
    CHECK(updated[1].before == v2);
    CHECK(updated[1].after == v3);
    CHECK(Catalog::open({refs[1]}, git, cache).names() == std::vector<std::string>{"first", "second", "third"});
    CHECK(Catalog::open({refs[0]}, git, cache).names() == std::vector<std::string>{"first"});

    // A revision the repository does not have is an error that names it.
    auto missing = Catalog::open({url_of(repo, "v9")}, git, cache);
    REQUIRE(missing.problems().size() == 1);
    CHECK(missing.problems()[0].message.find("`v9`") != std::string::npos);
}

namespace {

// Real git, except that fetching fails: a server that cannot be reached during an update.
class OfflineGit final : public catalog::Git {
public:
    Status clone(const std::string& location, const fs::path& dir) override { return m_real.clone(location, dir); }
    Status fetch(const fs::path&) override { return make_error(ErrorCode::io, "could not resolve host (fake)"); }
    Status checkout(const fs::path& dir, const std::string& rev) override { return m_real.checkout(dir, rev); }
    Result<std::string> head(const fs::path& dir) override { return m_real.head(dir); }

private:
    GitCommand m_real;
};

} // namespace

TEST_CASE("an update that cannot fetch keeps the checkout it had and says why") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "r");
    repo.recipe("first", tiny_recipe());
    const std::string v1 = repo.commit("v1");
    OfflineGit git;
    const fs::path cache = tmp.path() / "cache";
    REQUIRE(Catalog::open({url_of(repo)}, git, cache).names().size() == 1);
    repo.recipe("second", tiny_recipe());
    repo.commit("v2");
    auto updated = catalog::update_repositories({url_of(repo)}, git, cache);
    REQUIRE(updated.size() == 1);
    REQUIRE_FALSE(updated[0].error.has_value());
    CHECK(updated[0].error.error().message.find("could not resolve host") != std::string::npos);
    CHECK(updated[0].after == v1);
    CHECK(Catalog::open({url_of(repo)}, git, cache).names() == std::vector<std::string>{"first"});
}

TEST_CASE("a repository that cannot be cloned is a problem that names it, and the others still open") {
    test::TempDir tmp;
    GitRepo ok(tmp.path() / "ok");
    ok.recipe("fine", tiny_recipe());
    ok.commit("c");
    GitCommand git;
    auto cat =
        Catalog::open({RepoRef{"file://" + (tmp.path() / "nope").string(), ""}, url_of(ok)}, git, tmp.path() / "cache");
    CHECK(cat.names() == std::vector<std::string>{"fine"});
    REQUIRE(cat.problems().size() == 1);
    CHECK(cat.problems()[0].message.find("nope") != std::string::npos);
    // Nothing half-cloned is left behind to be read later.
    for (const auto& entry : fs::directory_iterator(tmp.path() / "cache")) {
        CHECK(entry.path().filename().string().find("partial") == std::string::npos);
    }
}

TEST_CASE("get copies a recipe's folder, refusing symlinks that lead out and an existing destination") {
    test::TempDir tmp;
    GitRepo repo(tmp.path() / "r");
    repo.recipe("kit", tiny_recipe("[inputs]\npaths = [\"data\"]\n"), "A kit.");
    repo.write("kit/data/a.txt", "a\n");
    fs::create_symlink("data/a.txt", repo.dir() / "kit" / "link-inside");
    repo.recipe("leaky", tiny_recipe());
    fs::create_symlink("/etc/passwd", repo.dir() / "leaky" / "passwd");
    repo.commit("c");
    GitCommand git;
    auto cat = Catalog::open({ref_of(repo.dir())}, git, tmp.path() / "cache");

    const fs::path dest = tmp.path() / "out" / "kit";
    REQUIRE(catalog::copy_recipe(*cat.find("kit"), dest));
    CHECK(test::slurp(dest / "recipe.toml") == tiny_recipe("[inputs]\npaths = [\"data\"]\n"));
    CHECK(test::slurp(dest / "data" / "a.txt") == "a\n");
    CHECK(fs::is_symlink(dest / "link-inside"));
    CHECK(recipe::load_jobs(dest / "recipe.toml"));

    auto again = catalog::copy_recipe(*cat.find("kit"), dest);
    REQUIRE_FALSE(again);
    CHECK(again.error().code == ErrorCode::conflict);

    const fs::path leak_dest = tmp.path() / "out" / "leaky";
    auto leak = catalog::copy_recipe(*cat.find("leaky"), leak_dest);
    REQUIRE_FALSE(leak);
    CHECK(leak.error().message.find("outside") != std::string::npos);
    CHECK_FALSE(fs::exists(leak_dest));
}

TEST_CASE("every starter template validates as written, and each names its recipe") {
    for (const auto& name : catalog::starter_names()) {
        INFO(name);
        test::TempDir tmp;
        const fs::path dest = tmp.path() / "my-project";
        REQUIRE(catalog::write_starter(name, "my-project", dest));
        CHECK(fs::exists(dest / "README.md"));
        auto jobs = recipe::load_jobs(dest / "recipe.toml");
        if (!jobs) {
            FAIL(jobs.error().describe());
        }
        REQUIRE_FALSE(jobs->empty());
        CHECK(jobs->front().name.starts_with("my-project"));
        CHECK(test::slurp(dest / "README.md").find("# my-project") == 0);
        CHECK_FALSE(catalog::write_starter(name, "my-project", dest)); // exists
    }
    CHECK_FALSE(catalog::write_starter("python", "Bad Name", "x"));
    CHECK_FALSE(catalog::write_starter("fortran", "x", "x"));
}

TEST_CASE("a project that keeps its recipes in recipes/ lists them without being told, and #FOLDER names another") {
    test::TempDir tmp;
    GitRepo project(tmp.path() / "project");
    project.write("README.md", "# A project with code and recipes\n");
    project.write("src/main.py", "print('hi')\n");
    project.recipe("recipes/toy-eval", tiny_recipe(), "A tiny evaluation.");
    project.recipe("lab/recipes/probe", tiny_recipe(), "Linear probes.");
    const std::string commit = project.commit("first");
    GitCommand git;
    const fs::path cache = tmp.path() / "cache";

    auto found = Catalog::open({url_of(project)}, git, cache);
    CHECK(found.problems().empty());
    CHECK(found.notes().empty());
    REQUIRE(found.names() == std::vector<std::string>{"toy-eval"});
    CHECK(found.repositories()[0].root.filename() == "recipes");
    CHECK(found.find("toy-eval")->origin == recipe::Origin{"toy-eval", url_of(project).location, commit});

    RepoRef lab = url_of(project);
    lab.subdir = "lab/recipes";
    auto named = Catalog::open({lab}, git, cache);
    REQUIRE(named.names() == std::vector<std::string>{"probe"});
    CHECK(named.find("probe")->origin.repo == url_of(project).location + "#lab/recipes");
    // A local folder read in place takes a folder too.
    RepoRef local = ref_of(project.dir());
    local.subdir = "lab/recipes";
    CHECK(Catalog::open({local}, git, cache).names() == std::vector<std::string>{"probe"});

    RepoRef missing = url_of(project);
    missing.subdir = "nowhere";
    auto none = Catalog::open({missing}, git, cache);
    CHECK(none.names().empty());
    REQUIRE(none.problems().size() == 1);
    CHECK_THAT(none.problems()[0].message, Catch::Contains("no folder `nowhere`") && Catch::Contains("#nowhere"));
}

TEST_CASE("a folder named after `#` that is a symlink out of the repository is refused") {
    test::TempDir tmp;
    GitRepo outside(tmp.path() / "outside");
    outside.recipe("stolen", tiny_recipe());
    outside.commit("c");
    GitRepo project(tmp.path() / "project");
    project.write("README.md", "x\n");
    project.commit("c");
    fs::create_directory_symlink(outside.dir(), project.dir() / "escape");
    RepoRef ref = ref_of(project.dir());
    ref.subdir = "escape";
    GitCommand git;
    auto cat = Catalog::open({ref}, git, tmp.path() / "cache");
    CHECK(cat.names().empty());
    REQUIRE(cat.problems().size() == 1);
    CHECK_THAT(cat.problems()[0].message, Catch::Contains("leads outside the repository"));
}

TEST_CASE("a repository with no recipes gets a note saying where it looked and how to name a folder") {
    test::TempDir tmp;
    GitRepo project(tmp.path() / "project");
    project.write("README.md", "# code only\n");
    project.write("experiments/probe/recipe.toml", tiny_recipe());
    project.commit("c");
    GitCommand git;
    auto cat = Catalog::open({url_of(project)}, git, tmp.path() / "cache");
    CHECK(cat.names().empty());
    CHECK(cat.problems().empty());
    REQUIRE(cat.notes().size() == 1);
    CHECK_THAT(cat.notes()[0], Catch::Contains(url_of(project).location) &&
                                   Catch::Contains("at its top level or in `recipes/`") &&
                                   Catch::Contains(url_of(project).location + "#FOLDER"));
    RepoRef named = url_of(project);
    named.subdir = "experiments";
    CHECK(Catalog::open({named}, git, tmp.path() / "cache").names() == std::vector<std::string>{"probe"});
}

} // namespace test_catalog
} // namespace
