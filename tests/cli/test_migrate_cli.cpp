// `gpupool admin migrate` as a user runs it: a SQLite pool to a real PostgreSQL and back, checked;
// a target that holds a pool, a password in a URL, a missing source and a source a coordinator serves
// are refused with the exit code and message that say so.
#ifdef GPUPOOL_HAVE_POSTGRES

#include "core/store/open_store.hpp"
#include "core/store/sqlite_store.hpp"
#include "tests/core/store/contract/stores_under_test.hpp"
#include "tests/pg/pg_test_server.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_migrate_cli {

using namespace gpupool;
namespace fs = std::filesystem;

TEST_CASE("admin migrate: SQLite to PostgreSQL and back, verified, and what it refuses", "[postgres][cli][migrate]") {
    auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    const std::string pg = test::fresh_database("migrate_cli", *server);
    test::TempDir dir;
    const fs::path source = dir.path() / "pool.db";
    {
        auto s = store::SqliteStore::open(source);
        REQUIRE(s);
        REQUIRE((*s)->apply(test::old_pool_records({8, "8", true})));
        REQUIRE((*s)->append_log(AttemptId(1), 0, "hello\n"));
    }

    auto r = test::run_gpupool({"--json", "admin", "migrate", "--from", "sqlite:" + source.string(), "--to", pg});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto report = nlohmann::json::parse(r.out);
    CHECK(report.at("teams") == 2);
    CHECK(report.at("jobs") == 1);
    CHECK(report.at("attempts") == 1);
    CHECK(report.at("ledger_entries") == 1);
    CHECK(report.at("log_bytes") == 6);
    {
        auto copy = store::open_store(pg);
        REQUIRE(copy);
        CHECK((*copy)->load()->jobs.size() == 1);
        CHECK(*(*copy)->read_log(AttemptId(1), 0, 100) == "hello\n");
    }

    // Again into the same database: it holds a pool now.
    auto again = test::run_gpupool({"admin", "migrate", "--from", source.string(), "--to", pg});
    CHECK(again.exit_code == 1);
    CHECK_THAT(again.err, Catch::Contains("already holds a pool"));

    // Back into a new SQLite file.
    const fs::path back = dir.path() / "back.db";
    auto home = test::run_gpupool({"admin", "migrate", "--from", pg, "--to", back.string()});
    INFO(home.err);
    REQUIRE(home.exit_code == 0);
    CHECK_THAT(home.out, Catch::Contains("1 jobs"));
    CHECK(store::SqliteStore::open(back).value()->load()->jobs.size() == 1);

    // A password in a URL is a usage error, and is not repeated back.
    auto pw = test::run_gpupool({"admin", "migrate", "--from", source.string(), "--to",
                                 "postgresql://gpupool:hunter2@127.0.0.1/x"});
    CHECK(pw.exit_code == 2);
    CHECK_THAT(pw.err, Catch::Contains("password"));
    CHECK(pw.err.find("hunter2") == std::string::npos);

    // A source that does not exist.
    auto missing = test::run_gpupool({"admin", "migrate", "--from", (dir.path() / "nope.db").string(), "--to",
                                      (dir.path() / "x.db").string()});
    CHECK(missing.exit_code == 1);
    CHECK_FALSE(fs::exists(dir.path() / "nope.db"));

    // A source a coordinator serves (it holds the lease): stop it first.
    auto live = store::open_store(pg);
    REQUIRE(live);
    REQUIRE((*live)->acquire_lease({"running", "http://coord-1:7070", 60'000})->holder == "running");
    auto served = test::run_gpupool({"admin", "migrate", "--from", pg, "--to", (dir.path() / "y.db").string()});
    CHECK(served.exit_code == 1);
    CHECK_THAT(served.err, Catch::Contains("http://coord-1:7070") && Catch::Contains("stop every coordinator"));
}

#endif

} // namespace test_migrate_cli
} // namespace
