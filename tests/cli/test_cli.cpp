// Drives the real gpupool binary: subcommands, exit codes, table and JSON output.
#include "tests/support.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_cli {

using gpupool::test::run_gpupool;
using gpupool::test::source_dir;

namespace {
const std::vector<std::string> k_subcommands{"coordinator", "worker", "submit",  "run",      "status",       "jobs",
                                             "logs",        "cancel", "retry",   "fetch",    "manifest",     "diff",
                                             "repro",       "wait",   "credits", "price",    "model-memory", "recipe",
                                             "admin",       "sim",    "login",   "template", "version"};
} // namespace

TEST_CASE("cli: --help lists every subcommand") {
    auto r = run_gpupool({"--help"});
    CHECK(r.exit_code == 0);
    for (const auto& sub : k_subcommands) {
        INFO(sub);
        CHECK_THAT(r.out, Catch::Contains("  " + sub + " "));
    }
    CHECK_THAT(r.out, Catch::Contains("--json"));
    CHECK_THAT(r.out, Catch::Contains("--log-level"));
}

TEST_CASE("cli: no subcommand and unknown subcommands are usage errors") {
    CHECK(run_gpupool({}).exit_code == 2);
    auto r = run_gpupool({"frobnicate"});
    CHECK(r.exit_code == 2);
}

TEST_CASE("cli: every subcommand is real: it has --help and never claims to be unfinished") {
    auto help = run_gpupool({"--help"});
    for (const auto& sub : k_subcommands) {
        INFO(sub);
        CHECK_THAT(help.out, Catch::Contains("  " + sub + " "));
        auto r = run_gpupool({sub, "--help"});
        CHECK(r.exit_code == 0);
        CHECK_THAT(r.out + r.err, !Catch::Contains("not implemented"));
        // Examples, the global options that apply, and where to read more.
        CHECK_THAT(r.out, Catch::Contains("Examples:\n  gpupool " + sub) && Catch::Contains("Global options") &&
                              Catch::Contains("Docs: "));
    }
    // Commands that talk to a coordinator say how it is found; the rest do not list those options.
    CHECK_THAT(run_gpupool({"jobs", "--help"}).out, Catch::Contains("--url URL, --token-file FILE"));
    CHECK_THAT(run_gpupool({"recipe", "--help"}).out, !Catch::Contains("--token-file"));
    CHECK_THAT(run_gpupool({"worker", "--help"}).out, Catch::Contains("docs/worker.md"));
}

TEST_CASE("cli: recipe validate prints the expanded sweep") {
    auto r = run_gpupool({"recipe", "validate", (source_dir() / "recipes/hello-sweep/recipe.toml").string()});
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("hello-bonjour-2"));
    CHECK_THAT(r.out, Catch::Contains("greeting=hola,n=1"));
    CHECK_THAT(r.out, Catch::Contains("6 jobs from"));
}

TEST_CASE("cli: --json recipe validate is machine-readable") {
    auto r = run_gpupool({"recipe", "validate", "--json", (source_dir() / "recipes/inspect-gpqa/recipe.toml").string()});
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["job_count"] == 6);
    CHECK(j["max_parallel"] == 4);
    CHECK(j["extends"][0] == "builtin:inspect");
    CHECK(j["jobs"][5]["name"] == "gpqa-meta-llama/Llama-3.2-1B-Instruct-seed3");
    CHECK(j["jobs"][0]["resources"]["gpu_milli"] == 250);
    CHECK(j["jobs"][0]["resources"]["max_runtime_s"] == 5400);
}

TEST_CASE("cli: an invalid recipe exits 1 naming file, line and field") {
    gpupool::test::TempDir dir;
    auto file = dir.write("bad.toml", "image = \"b\"\ncommand = [\"true\"]\n[resources]\ngpu_mem = \"8GiB\"\ngpus = 3\n");
    auto r = run_gpupool({"recipe", "validate", file.string()});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(file.string() + ":4:1: resources.gpu_mem: unknown key `gpu_mem` in [resources]; "
                                                      "did you mean `gpu_memory`?"));
    CHECK_THAT(r.err, Catch::Contains(file.string() + ":5:8: resources.gpus:"));

    auto j = run_gpupool({"--json", "recipe", "validate", file.string()});
    CHECK(j.exit_code == 1);
    auto out = nlohmann::json::parse(j.out);
    CHECK(out["error"]["line"] == 4);
    CHECK(out["error"]["field"] == "resources.gpu_mem");
    CHECK(out["errors"].size() == 2);
}

TEST_CASE("cli: a missing recipe file is a clear error") {
    auto r = run_gpupool({"recipe", "validate", "/nonexistent/x.toml"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("/nonexistent/x.toml") && Catch::Contains("does not exist"));
}

TEST_CASE("cli: submit --dry-run needs no coordinator, --set applies") {
    auto r = run_gpupool({"submit", "--dry-run", "--json", "--set", "resources.gpu=0.5",
                          (source_dir() / "recipes/hello-sweep/recipe.toml").string()});
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["job_count"] == 6);
    CHECK(j["jobs"][0]["resources"]["gpu_milli"] == 500);
    // The estimate comes with the jobs: no coordinator here, so only the catalog's part and the reason.
    REQUIRE(j.contains("estimate"));
    CHECK(j["estimate"]["jobs"] == 6);
    CHECK(j["estimate"]["pool"].is_null());
    CHECK_FALSE(j["estimate"]["pool_note"].get<std::string>().empty());
    REQUIRE_FALSE(j["estimate"]["models"].empty());
    CHECK(j["estimate"]["models"][0]["max_micro"].get<std::int64_t>() > 0);

    auto cap = run_gpupool({"submit", "--dry-run", "--max-jobs", "5", (source_dir() / "recipes/hello-sweep/recipe.toml").string()});
    CHECK(cap.exit_code == 1);
    CHECK_THAT(cap.err, Catch::Contains("more than the cap of 5"));

    auto bad = run_gpupool({"submit", "--dry-run", "--set", "novalue", (source_dir() / "recipes/hello-sweep/recipe.toml").string()});
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.err, Catch::Contains("expected KEY=VALUE"));
}

TEST_CASE("cli: recipe builtins and show") {
    auto r = run_gpupool({"recipe", "builtins"});
    REQUIRE(r.exit_code == 0);
    for (const char* name : {"inspect", "transformerlens", "tensorboard", "python"}) {
        CHECK_THAT(r.out, Catch::Contains(name));
    }
    auto show = run_gpupool({"recipe", "show", "inspect"});
    CHECK(show.exit_code == 0);
    CHECK_THAT(show.out, Catch::Contains("gpu_memory"));
    CHECK(run_gpupool({"recipe", "show", "nope"}).exit_code == 1);
}

TEST_CASE("cli: version, plain and JSON") {
    auto r = run_gpupool({"version"});
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::StartsWith("gpupool "));
    auto j = nlohmann::json::parse(run_gpupool({"--json", "version"}).out);
    CHECK(j["recipe_format"] == 1);
}

} // namespace test_cli
} // namespace
