// A bad command line is reported like every other failure (cmd/cli.cpp): one `error:` line per
// problem on stderr, or {"error": ..., "errors": [...]} on stdout with --json, and exit code 2.
// Runs the real binary; nothing here needs a coordinator (parsing fails before one is asked).
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_usage_errors {

using gpupool::test::run_gpupool;

TEST_CASE("usage errors: a job id that is not a number names the argument and the value") {
    auto r = run_gpupool({"status", "abc"});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "error: job: expected a job id, got \"abc\"\n");
    CHECK(r.out.empty());
    // In a list, the value that is wrong.
    auto list = run_gpupool({"cancel", "1", "abc"});
    CHECK(list.exit_code == 2);
    CHECK(list.err == "error: jobs: expected a job id, got \"abc\"\n");
}

TEST_CASE("usage errors: --json is honoured wherever it stands, even when parsing stopped before it") {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--json", "status", "abc"}, {"status", "abc", "--json"}, {"status", "--bogus", "--json"}}) {
        INFO(args[0] << " " << args[1] << " " << args[2]);
        auto r = run_gpupool(args);
        CHECK(r.exit_code == 2);
        CHECK(r.err.empty());
        auto j = nlohmann::json::parse(r.out);
        CHECK(j["error"]["code"] == "invalid_input");
        REQUIRE(j["errors"].size() == 1);
        CHECK(j["errors"][0] == j["error"]);
    }
    auto j = nlohmann::json::parse(run_gpupool({"status", "abc", "--json"}).out);
    CHECK(j["error"]["field"] == "job");
    CHECK(j["error"]["message"] == "expected a job id, got \"abc\"");
}

TEST_CASE("usage errors: unknown options say so, with a suggestion and where to look") {
    auto r = run_gpupool({"cancel", "--foo"});
    CHECK(r.exit_code == 2);
    CHECK(r.err == "error: unknown option --foo; run `gpupool cancel --help`\n");
    auto typo = run_gpupool({"jobs", "--limt", "3"});
    CHECK(typo.exit_code == 2);
    CHECK(typo.err == "error: unknown option --limt; did you mean --limit? (run `gpupool jobs --help`)\n");
    // A command's own option given before the command: no "did you mean" the same name.
    auto early = run_gpupool({"--repo", "x", "recipe", "list"});
    CHECK(early.exit_code == 2);
    CHECK(early.err ==
          "error: unknown option --repo; it goes after the command it belongs to; run `gpupool recipe list --help`\n");
}

TEST_CASE("usage errors: missing and extra arguments") {
    auto missing = run_gpupool({"submit"});
    CHECK(missing.exit_code == 2);
    CHECK(missing.err == "error: missing required argument `recipe`; run `gpupool submit --help`\n");
    auto extra = run_gpupool({"version", "extra"});
    CHECK(extra.exit_code == 2);
    CHECK(extra.err == "error: unexpected argument \"extra\"; run `gpupool version --help`\n");
    auto no_value = run_gpupool({"jobs", "--url"});
    CHECK(no_value.exit_code == 2);
    CHECK(no_value.err == "error: --url: needs a value; run `gpupool jobs --help`\n");
}

TEST_CASE("usage errors: commands that do not exist or are left out") {
    auto unknown = run_gpupool({"sumbit"});
    CHECK(unknown.exit_code == 2);
    CHECK(unknown.err == "error: unknown command \"sumbit\"; did you mean `submit`? (run `gpupool --help`)\n");
    auto nested_typo = run_gpupool({"admin", "tema", "list"});
    CHECK(nested_typo.exit_code == 2);
    CHECK(nested_typo.err == "error: unknown command \"tema\"; did you mean `team`? (run `gpupool admin --help`)\n");
    auto nested = run_gpupool({"admin"});
    CHECK(nested.exit_code == 2);
    CHECK_THAT(nested.err, Catch::StartsWith("error: `gpupool admin` needs a command: "));
    CHECK_THAT(nested.err, Catch::EndsWith("; run `gpupool admin --help`\n"));
    auto none = run_gpupool({});
    CHECK(none.exit_code == 2);
    CHECK_THAT(none.err, Catch::StartsWith("error: `gpupool` needs a command: coordinator, worker, submit"));
}

TEST_CASE("usage errors: a value outside a fixed set lists the choices") {
    auto r = run_gpupool({"--log-level", "loud", "version"});
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: --log-level: expected one of trace, debug, info, warn, error, critical, off, got \"loud\"\n");
}

} // namespace test_usage_errors
} // namespace
