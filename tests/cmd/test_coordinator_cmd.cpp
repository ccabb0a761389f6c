// run_coordinator without argv (cmd/coordinator.hpp): what it refuses before it opens anything.
// Serving itself is driven through the real binary in tests/cli/test_coordinator_cli.cpp.
#include "cmd/coordinator.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_coordinator_cmd {

using namespace gpupool;
using namespace gpupool::cmd;

namespace {

CoordinatorCmdOptions options_in(const test::TempDir& dir) {
    CoordinatorCmdOptions o;
    o.listen = "127.0.0.1:0";
    o.db = (dir.path() / "pool.db").string();
    return o;
}

} // namespace

TEST_CASE("coordinator command: a --db it cannot serve is a usage error, before anything is opened",
          "[coordinator-cmd]") {
    test::TempDir dir;
    GlobalOptions global;
    for (const std::string db : {"postgresql://pool:secret@db.example/gpupool", "mysql://db/gpupool", "sqlite:"}) {
        INFO(db);
        CoordinatorCmdOptions o = options_in(dir);
        o.db = db;
        CHECK(run_coordinator(global, o) == k_exit_usage);
        o.new_admin_token = true;
        CHECK(run_coordinator(global, o) == k_exit_usage);
    }
    CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("coordinator command: a bad option is refused without creating the database", "[coordinator-cmd]") {
    test::TempDir dir;
    GlobalOptions global;
    CoordinatorCmdOptions o = options_in(dir);
    o.listen = "nowhere";
    CHECK(run_coordinator(global, o) == k_exit_usage);
    o = options_in(dir);
    o.pool_fee = "150";
    CHECK(run_coordinator(global, o) == k_exit_usage);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "pool.db"));
}

TEST_CASE("coordinator command: recovering an admin token needs an existing database", "[coordinator-cmd]") {
    test::TempDir dir;
    GlobalOptions global;
    CoordinatorCmdOptions o = options_in(dir);
    o.new_admin_token = true;
    CHECK(run_coordinator(global, o) == k_exit_failed);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "pool.db"));
}

} // namespace test_coordinator_cmd
} // namespace
