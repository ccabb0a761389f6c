// cmd::main declares only the command argv names (cmd/cli.cpp): command_in_argv must find it past
// the global options and their values, and give up (so that every command is declared) whenever it
// cannot be sure. Then the real binary: the same answers with one command declared as with all.
#include "cmd/cli_app.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_command_in_argv {

using namespace gpupool;
using gpupool::test::run_gpupool;

namespace {

std::string_view command_of(const CLI::App& app, const std::vector<const char*>& args) {
    std::vector<const char*> argv{"gpupool"};
    argv.insert(argv.end(), args.begin(), args.end());
    return cmd::command_in_argv(app, static_cast<int>(argv.size()), argv.data());
}

} // namespace

TEST_CASE("command_in_argv: the first word that is neither a global option nor its value", "[cli]") {
    CLI::App app;
    bool json = false;
    std::string url;
    std::string level;
    app.add_flag("--json", json);
    app.add_option("--url", url);
    app.add_option("--log-level", level);
    CHECK(command_of(app, {"submit", "x.toml"}) == "submit");
    CHECK(command_of(app, {"--json", "jobs"}) == "jobs");
    // An option's value is skipped, whatever it looks like.
    CHECK(command_of(app, {"--url", "run", "status", "3"}) == "status");
    CHECK(command_of(app, {"--url=run", "--log-level", "info", "wait", "1"}) == "wait");
    CHECK(command_of(app, {"--json=true", "cancel", "4"}) == "cancel");
    // Nothing certain: every command is declared and the full parser decides.
    CHECK(command_of(app, {}).empty());
    CHECK(command_of(app, {"--json"}).empty());
    CHECK(command_of(app, {"--bogus", "submit"}).empty());
    CHECK(command_of(app, {"--help-all"}).empty());
    CHECK(command_of(app, {"--", "submit"}).empty());
    CHECK(command_of(app, {"--url"}).empty()); // a value that never came
}

TEST_CASE("the binary with one command declared answers as with all of them", "[cli]") {
    // The overview lists every command, and --help-all shows each one's options.
    auto help = run_gpupool({"--help"});
    CHECK(help.exit_code == 0);
    for (const char* name :
         {"coordinator", "worker", "submit", "run", "status", "pool", "jobs", "logs", "cancel", "fetch", "wait",
          "credits", "price", "recipe", "admin", "sim", "login", "template", "version"}) {
        INFO(name);
        CHECK_THAT(help.out, Catch::Contains("  " + std::string(name) + " "));
    }
    auto all = run_gpupool({"--help-all"});
    CHECK(all.exit_code == 0);
    CHECK_THAT(all.out, Catch::Contains("--allow-unfunded"));       // submit's
    CHECK_THAT(all.out, Catch::Contains("--sqlite-checkpoint-ms")); // coordinator's
    // A global option's value that is a command's name is still the option's value.
    auto v = run_gpupool({"--url", "run", "version"});
    CHECK(v.exit_code == 0);
    CHECK_THAT(v.out, Catch::StartsWith("gpupool "));
    // Global options after the command, and a command's nested commands, as before.
    auto nested = run_gpupool({"admin", "--json"});
    CHECK(nested.exit_code == 2);
    CHECK_THAT(nested.out, Catch::Contains("needs a command: team, token"));
    // A misspelt command is still matched against all of them.
    auto typo = run_gpupool({"sumbit", "x.toml"});
    CHECK(typo.exit_code == 2);
    CHECK_THAT(typo.err, Catch::Contains("did you mean `submit`?"));
}

} // namespace test_command_in_argv
} // namespace
