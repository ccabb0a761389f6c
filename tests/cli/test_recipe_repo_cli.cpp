// `gpupool recipe list|show|get|new|update` and recipes named by `submit`/`run`, driven through the
// real binary against real git repositories made on the fly; the clones go to a temporary
// XDG_CACHE_HOME and the repositories come from a config file or --repo.
#include "tests/core/catalog/git_fixture.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_repo_cli {

namespace fs = std::filesystem;
using gpupool::test::GitRepo;
using gpupool::test::run_gpupool;
using gpupool::test::tiny_recipe;

namespace {

// A community repository with two recipes, a config naming it, and a private cache directory.
struct Pool {
    gpupool::test::TempDir tmp;
    GitRepo repo{tmp.path() / "community"};
    fs::path config;
    std::string url;

    Pool() {
        repo.recipe("toy-eval",
                    tiny_recipe("name = \"toy-eval-{seed}\"\ntags = [\"eval\"]\n[inputs]\npaths = [\"data.jsonl\"]\n"
                                "[sweep]\nseed = [1, 2]\n"),
                    "A tiny evaluation over a shipped dataset.");
        repo.write("toy-eval/data.jsonl", "{\"input\": \"2+2\", \"target\": \"4\"}\n");
        repo.recipe("probe", tiny_recipe("tags = [\"interp\"]\n"), "Linear probes on the residual stream.");
        repo.commit("first");
        url = "file://" + repo.dir().string();
        config = tmp.write("config.toml", "recipes = [\"" + url + "\"]\n");
        ::setenv("XDG_CACHE_HOME", (tmp.path() / "cache").c_str(), 1);
    }
    gpupool::test::CliResult gp(std::vector<std::string> args, const fs::path& cwd = {}) const {
        args.insert(args.begin(), {"--config", config.string()});
        return run_gpupool(args, cwd);
    }
};

} // namespace

TEST_CASE("cli: recipe list shows the configured repository's recipes, and --tag filters them") {
    Pool p;
    auto r = p.gp({"recipe", "list"});
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("NAME") && Catch::Contains("toy-eval") && Catch::Contains("probe") &&
                          Catch::Contains("A tiny evaluation over a shipped dataset.") && Catch::Contains(p.url));
    auto tagged = p.gp({"--json", "recipe", "list", "--tag", "interp"});
    REQUIRE(tagged.exit_code == 0);
    auto j = nlohmann::json::parse(tagged.out);
    REQUIRE(j.size() == 1);
    CHECK(j[0]["name"] == "probe");
    CHECK(j[0]["tags"] == nlohmann::json::array({"interp"}));
    CHECK(j[0]["revision"] == p.repo.head());
}

TEST_CASE("cli: recipe show prints where a recipe comes from and its text, and built-ins still show") {
    Pool p;
    auto r = p.gp({"recipe", "show", "toy-eval"});
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("# toy-eval: from " + p.url + " at " + p.repo.head().substr(0, 12)) &&
                          Catch::Contains("README.md, data.jsonl, recipe.toml") &&
                          Catch::Contains("name = \"toy-eval-{seed}\""));
    CHECK_THAT(p.gp({"recipe", "show", "python"}).out, Catch::Contains("image = \"docker.io/library/python"));
    auto missing = p.gp({"recipe", "show", "toy-evl"});
    CHECK(missing.exit_code == 1);
    CHECK_THAT(missing.err, Catch::Contains("did you mean `toy-eval`?"));
}

TEST_CASE("cli: recipe get copies the folder, and the copy validates on its own") {
    Pool p;
    auto r = p.gp({"recipe", "get", "toy-eval"}, p.tmp.path());
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("Copied toy-eval from " + p.url));
    CHECK(gpupool::test::slurp(p.tmp.path() / "toy-eval" / "data.jsonl").find("2+2") != std::string::npos);
    auto v = p.gp({"recipe", "validate", (p.tmp.path() / "toy-eval" / "recipe.toml").string()});
    CHECK(v.exit_code == 0);
    CHECK_THAT(v.out, Catch::Contains("2 jobs"));
    auto again = p.gp({"recipe", "get", "toy-eval"}, p.tmp.path());
    CHECK(again.exit_code == 1);
    CHECK_THAT(again.err, Catch::Contains("already exists"));
}

TEST_CASE("cli: submit NAME runs a repository recipe as it is, and the jobs record its origin") {
    Pool p;
    auto r = p.gp({"--json", "submit", "--dry-run", "--offline", "toy-eval"});
    if (r.exit_code != 0) {
        // `--offline` is price's; submit --dry-run without a coordinator still expands the jobs.
        r = p.gp({"--json", "recipe", "validate", "toy-eval"});
    }
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["jobs"].size() == 2);
    const auto& origin = j["jobs"][0]["origins"][0];
    CHECK(origin["recipe"] == "toy-eval");
    CHECK(origin["repo"] == p.url);
    CHECK(origin["revision"] == p.repo.head());
    // A name no repository has, close to one that exists.
    auto typo = p.gp({"recipe", "validate", "toy-evall"});
    CHECK(typo.exit_code == 1);
    CHECK_THAT(typo.err, Catch::Contains("did you mean `toy-eval`?"));
}

TEST_CASE("cli: --repo replaces the config's repositories, and a pinned revision is honoured") {
    Pool p;
    const std::string first = p.repo.head();
    p.repo.tag("v1");
    p.repo.recipe("late", tiny_recipe());
    p.repo.commit("second");
    auto pinned = run_gpupool({"--json", "recipe", "list", "--repo", p.url + "@v1"});
    REQUIRE(pinned.exit_code == 0);
    auto j = nlohmann::json::parse(pinned.out);
    CHECK(j.size() == 2);
    CHECK(j[0]["revision"] == first);
    auto head = run_gpupool({"--json", "recipe", "list", "--repo", p.url});
    CHECK(nlohmann::json::parse(head.out).size() == 3);
}

TEST_CASE("cli: recipe update pulls a new commit into the clone") {
    Pool p;
    REQUIRE(p.gp({"recipe", "list"}).exit_code == 0); // clones
    const std::string before = p.repo.head();
    p.repo.recipe("fresh", tiny_recipe(), "Added later.");
    const std::string after = p.repo.commit("add fresh");
    CHECK_THAT(p.gp({"recipe", "list"}).out, !Catch::Contains("fresh"));
    auto u = p.gp({"recipe", "update"});
    REQUIRE(u.exit_code == 0);
    CHECK_THAT(u.out, Catch::Contains(before.substr(0, 12) + " -> " + after.substr(0, 12)));
    CHECK_THAT(p.gp({"recipe", "list"}).out, Catch::Contains("Added later."));
    CHECK_THAT(p.gp({"recipe", "update"}).out, Catch::Contains("up to date at " + after.substr(0, 12)));
}

TEST_CASE("cli: a bad repository in the config is an error naming the file, line and field") {
    gpupool::test::TempDir tmp;
    auto config = tmp.write("config.toml",
                            "url = \"http://127.0.0.1:1\"\nrecipes = [\n  \"ok/repo\",\n  \"--upload-pack=x\",\n]\n");
    auto r = run_gpupool({"--config", config.string(), "recipe", "list"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(config.string() + ":4") && Catch::Contains("recipes[1]") &&
                          Catch::Contains("does not start with `-`"));
}

TEST_CASE("cli: recipe new writes a starter that validates, and the python one runs as written") {
    gpupool::test::TempDir tmp;
    auto r = run_gpupool({"recipe", "new", "--template", "python", "pi-probe"}, tmp.path());
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("README.md, main.py, recipe.toml"));
    const auto recipe = (tmp.path() / "pi-probe" / "recipe.toml").string();
    auto v = run_gpupool({"recipe", "validate", recipe});
    REQUIRE(v.exit_code == 0);
    CHECK_THAT(v.out, Catch::Contains("pi-probe-1") && Catch::Contains("pi-probe-2"));
    CHECK(run_gpupool({"recipe", "new", "--template", "cobol", "x"}, tmp.path()).exit_code == 2);
    if (boost::process::search_path("python3").empty()) {
        WARN("python3 is not on PATH: the python starter's run is skipped");
        return;
    }
    auto run = run_gpupool({"run", recipe, "--runtime", "process", "--data-dir", (tmp.path() / "state").string(),
                            "--out", (tmp.path() / "out").string()},
                           tmp.path());
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    auto result = nlohmann::json::parse(gpupool::test::slurp(tmp.path() / "out" / "pi-probe-2" / "result.json"));
    CHECK(result["seed"] == 2);
    CHECK(result["pi_estimate"].get<double>() > 3.0);
    CHECK(result["pi_estimate"].get<double>() < 3.3);
}

TEST_CASE("cli: with a coordinator configured, recipe list shows each recipe's runs, typical runtime and cost") {
    Pool p;
    gpupool::test::svc::Pool pool;
    // One job of toy-eval, as `submit toy-eval` records it, runs to success on the pool's worker.
    auto job = gpupool::test::svc::spec("toy-eval-1");
    job.origins.push_back({"toy-eval", p.url, p.repo.head()});
    pool.submit({job});
    auto w = pool.server.client(pool.worker);
    auto polled = gpupool::test::svc::call(w, "POST", "/v1/workers/poll?wait_ms=5000", nlohmann::json::object());
    REQUIRE(polled["assignments"].size() == 1);
    const std::string attempt = std::to_string(polled["assignments"][0]["attempt"].get<std::int64_t>());
    gpupool::test::svc::call(w, "POST", "/v1/attempts/" + attempt + "/start", nlohmann::json::object());
    gpupool::test::svc::call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", 0}});

    const std::vector<std::string> remote{"--url", pool.server.url, "--token", pool.member};
    auto args = remote;
    args.insert(args.end(), {"--json", "recipe", "list"});
    auto r = p.gp(args);
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j.size() == 2);
    CHECK(j[0]["name"] == "probe");
    CHECK(j[0]["history"]["runs"] == 0);
    CHECK(j[1]["name"] == "toy-eval");
    CHECK(j[1]["history"]["runs"] == 1);
    CHECK(j[1]["history"]["median_runtime_s"].get<std::int64_t>() <= 5);
    CHECK(j[1]["history"]["median_cost_micro"].get<std::int64_t>() >= 0);
    args = remote;
    args.insert(args.end(), {"recipe", "list"});
    auto table = p.gp(args);
    CHECK_THAT(table.out, Catch::Contains("RUNS") && Catch::Contains("TYPICAL") && Catch::Contains("COST"));

    // The route checks what it is asked, naming the field.
    auto m = pool.server.client(pool.member);
    auto bad = gpupool::test::svc::call(m, "POST", "/v1/recipes/history",
                                        {{"recipes", {{{"recipe", "Bad Name"}, {"repo", "x"}}}}}, 400);
    CHECK(bad.dump().find("recipes[0]") != std::string::npos);
    // Without a coordinator the listing still works, with no history columns.
    CHECK_THAT(p.gp({"recipe", "list"}).out, !Catch::Contains("RUNS"));
}

TEST_CASE("cli: each --repo takes one value, so recipe get NAME --repo R DIR copies into DIR") {
    Pool p;
    gpupool::test::TempDir work;
    auto r = run_gpupool({"recipe", "get", "probe", "--repo", p.url, "my-probe"}, work.path());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(fs::exists(work.path() / "my-probe" / "recipe.toml"));
    CHECK_FALSE(fs::exists(work.path() / "probe"));
    CHECK_THAT(r.err, !Catch::Contains("my-probe"));
    // Repeated, each is one repository, in order.
    GitRepo other(p.tmp.path() / "other");
    other.recipe("extra", tiny_recipe());
    other.commit("c");
    auto both = run_gpupool({"--json", "recipe", "list", "--repo", p.url, "--repo", "file://" + other.dir().string()});
    REQUIRE(both.exit_code == 0);
    CHECK(nlohmann::json::parse(both.out).size() == 3);
    // validate NAME --repo R --set K=V: the --set after --repo is not a repository either.
    auto v = run_gpupool({"recipe", "validate", "--repo", p.url, "probe", "--set", "command=\"echo hi\""}, work.path());
    INFO(v.out << v.err);
    CHECK(v.exit_code == 0);
}

TEST_CASE(
    "cli: a project's recipes under recipes/ list by themselves, #FOLDER names another, and an empty list says why") {
    gpupool::test::TempDir tmp;
    ::setenv("XDG_CACHE_HOME", (tmp.path() / "cache").c_str(), 1);
    GitRepo project(tmp.path() / "project");
    project.write("src/train.py", "print('hi')\n");
    project.recipe("recipes/toy-eval", tiny_recipe(), "A tiny evaluation.");
    project.recipe("lab/probe", tiny_recipe(), "Linear probes.");
    project.commit("c");
    const std::string url = "file://" + project.dir().string();
    auto found = run_gpupool({"recipe", "list", "--repo", url});
    INFO(found.out << found.err);
    REQUIRE(found.exit_code == 0);
    CHECK_THAT(found.out, Catch::Contains("toy-eval") && Catch::Contains("A tiny evaluation."));
    auto named = run_gpupool({"--json", "recipe", "list", "--repo", url + "#lab"});
    REQUIRE(named.exit_code == 0);
    auto j = nlohmann::json::parse(named.out);
    REQUIRE(j.size() == 1);
    CHECK(j[0]["name"] == "probe");
    CHECK(j[0]["repo"] == url + "#lab");

    GitRepo code(tmp.path() / "code");
    code.write("src/train.py", "print('hi')\n");
    code.commit("c");
    auto empty = run_gpupool({"recipe", "list", "--repo", "file://" + code.dir().string()});
    CHECK(empty.exit_code == 0);
    CHECK_THAT(empty.err,
               Catch::Contains("has no recipes at its top level or in `recipes/`") && Catch::Contains("#FOLDER"));
    auto bad = run_gpupool({"recipe", "list", "--repo", url + "#../etc"});
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.err, Catch::Contains("--repo") && Catch::Contains("is not a folder of the repository"));
}

TEST_CASE("cli: recipe new without --template starts from the python template") {
    gpupool::test::TempDir tmp;
    auto r = run_gpupool({"recipe", "new", "pi-probe"}, tmp.path());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out,
               Catch::Contains("README.md, main.py, recipe.toml") && Catch::Contains("from the python template"));
    CHECK(run_gpupool({"recipe", "validate", (tmp.path() / "pi-probe" / "recipe.toml").string()}).exit_code == 0);
    auto help = run_gpupool({"recipe", "new", "--help"});
    CHECK_THAT(help.out, Catch::Contains("python"));
}

} // namespace test_recipe_repo_cli
} // namespace
