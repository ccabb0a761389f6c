// open_store: the coordinator's --db as a store. Paths and sqlite:PATH are SQLite files; postgresql://
// URLs are the PostgreSQL store (never with a password in them); other schemes are refused by name;
// one process at a time.
#include "core/store/open_store.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_open_store {

using namespace gpupool;
using namespace gpupool::store;

TEST_CASE("open_store: a path and sqlite:PATH name a SQLite file", "[store]") {
    for (const auto& [spec, location] : std::vector<std::pair<std::string, std::string>>{
             {"pool.db", "pool.db"},
             {"/var/lib/gpupool/pool.db", "/var/lib/gpupool/pool.db"},
             {"sqlite:pool.db", "pool.db"},
             {"sqlite:/tmp/x/pool.db", "/tmp/x/pool.db"},
             {"pool:2.db", "pool:2.db"}, // a colon alone is no scheme
             {"./a://b.db", "./a://b.db"}, // nor is `://` after a path segment
         }) {
        INFO(spec);
        auto s = parse_store_spec(spec);
        REQUIRE(s);
        CHECK(s->engine == Engine::sqlite);
        CHECK(s->location == location);
    }
}

TEST_CASE("open_store: a postgresql URL is the PostgreSQL store, never with a password in it", "[store]") {
    for (const char* spec : {"postgresql://pool@db.example/gpupool", "postgres://db/gpupool?sslmode=verify-full"}) {
        INFO(spec);
        auto s = parse_store_spec(spec);
        if (!postgres_available()) {
            REQUIRE_FALSE(s);
            CHECK(s.error().code == ErrorCode::not_implemented);
            CHECK_THAT(s.error().message, Catch::Contains("built without PostgreSQL"));
            continue;
        }
        REQUIRE(s);
        CHECK(s->engine == Engine::postgresql);
        CHECK(s->location == spec);
        CHECK(printable_spec(spec) == spec);
    }
    for (const char* spec : {"postgresql://pool:hunter2@db.example/gpupool",
                             "postgresql://db.example/gpupool?sslmode=require&password=hunter2",
                             "postgres://db/gpupool?password=hunter2",
                             "postgresql://db.example/gpupool?%70assword=hunter2"}) { // libpq decodes the key
        INFO(spec);
        auto s = parse_store_spec(spec);
        REQUIRE_FALSE(s);
        CHECK(s.error().field == "--db");
        if (postgres_available()) {
            CHECK(s.error().code == ErrorCode::invalid_input);
            CHECK_THAT(s.error().message, Catch::Contains("password"));
        }
        CHECK(printable_spec(spec).find("hunter2") == std::string::npos);
    }
}

TEST_CASE("open_store: an unknown scheme is named", "[store]") {
    auto mysql = open_store("mysql://db/gpupool");
    REQUIRE_FALSE(mysql);
    CHECK(mysql.error().code == ErrorCode::invalid_input);
    CHECK_THAT(mysql.error().message, Catch::Contains("unknown store scheme `mysql`"));
    for (const char* empty : {"", "sqlite:"}) {
        auto s = parse_store_spec(empty);
        REQUIRE_FALSE(s);
        CHECK(s.error().code == ErrorCode::invalid_input);
    }
}

TEST_CASE("open_store: the store is held by one opener at a time, until it is closed", "[store]") {
    test::TempDir dir;
    const std::string db = (dir.path() / "pool.db").string();
    auto first = open_store(db);
    REQUIRE(first);
    auto second = open_store("sqlite:" + db);
    REQUIRE_FALSE(second);
    CHECK(second.error().code == ErrorCode::unavailable);
    CHECK_THAT(second.error().message, Catch::Contains("another gpupool coordinator is using") &&
                                           Catch::Contains("stop it first"));
    first->reset();
    CHECK(open_store(db));
}

TEST_CASE("open_store: without create, a missing store is not_found and no file is made", "[store]") {
    test::TempDir dir;
    const auto db = dir.path() / "nope.db";
    OpenOptions o;
    o.create = false;
    auto s = open_store(db.string(), o);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == ErrorCode::not_found);
    CHECK_THAT(s.error().message, Catch::Contains("no pool database"));
    CHECK_FALSE(std::filesystem::exists(db));
    auto created = open_store(db.string());
    REQUIRE(created);
    CHECK(open_store(db.string(), o).error().code == ErrorCode::unavailable); // exists, but held
    created->reset();
    CHECK(open_store(db.string(), o));
}

} // namespace test_open_store
} // namespace
