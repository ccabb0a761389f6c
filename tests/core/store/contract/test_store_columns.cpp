// The records' column descriptions (core/store/record_columns.hpp) against every engine's live schema,
// read from the database the engine's migrations made: each described column is in its table with a
// type of its kind and the nullability of its kind, and each column the descriptions leave out is
// one the database fills itself, so that an INSERT built from a description is always complete.
#include "core/store/record_columns.hpp"
#include "tests/core/store/contract/stores_under_test.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <map>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_store_columns {

using namespace gpupool;
using namespace gpupool::store;
using test::StoreUnderTest;

namespace {

bool integer_type(const std::string& type) {
    return type == "integer" || type == "bigint";
}

// What is wrong with `live` as the column `c` describes (empty: nothing).
std::string disagreement(const columns::ColumnInfo& c, const test::LiveColumn& live) {
    const bool number = columns::is_integer(c.kind);
    if (number != integer_type(live.type) || (!number && live.type != "text")) {
        return std::string("holds ") + columns::kind_name(c.kind) + " but the table declares " + live.type;
    }
    if (columns::is_nullable(c.kind) == live.not_null) {
        return columns::is_nullable(c.kind) ? "may be unset but the table refuses NULL"
                                            : "is always set but the table allows NULL";
    }
    if (c.role == columns::OnUpdate::generated && !live.filled) {
        return "is numbered by the database but the table gives it no value";
    }
    return {};
}

} // namespace

TEST_CASE("store contract: each described column is in its engine's table with a compatible type",
          "[store][contract]") {
    for (const StoreUnderTest& kind : test::stores_under_test()) {
        if (test::store_skipped(kind)) {
            continue;
        }
        DYNAMIC_SECTION(kind.kind) {
            test::TempDir dir;
            {
                auto s = kind.open(dir.path(), {});
                REQUIRE(s); // the migrations made the tables
            }
            for (const columns::TableInfo& t : columns::all_tables()) {
                std::map<std::string, test::LiveColumn> live;
                for (auto& c : kind.live_columns(dir.path(), t.name)) {
                    live.emplace(c.name, c);
                }
                INFO(kind.kind << ": table " << t.name);
                REQUIRE_FALSE(live.empty());
                for (const columns::ColumnInfo& c : t.columns) {
                    INFO("column " << c.name);
                    const auto found = live.find(c.name);
                    REQUIRE(found != live.end());
                    CHECK(disagreement(c, found->second) == "");
                    live.erase(found);
                }
                for (const auto& [name, rest] : live) {
                    INFO("column " << name << ", which no description names");
                    CHECK((!rest.not_null || rest.filled));
                }
            }
        }
    }
}

TEST_CASE("store columns: the schema check tells a wrong type, nullability or numbering", "[store]") {
    const columns::ColumnInfo count{"n", columns::Kind::integer, columns::OnUpdate::kept};
    const columns::ColumnInfo unset{"u", columns::Kind::optional_integer, columns::OnUpdate::updated};
    const columns::ColumnInfo name{"s", columns::Kind::enum_text, columns::OnUpdate::kept};
    const columns::ColumnInfo id{"id", columns::Kind::integer, columns::OnUpdate::generated};
    CHECK(disagreement(count, {"n", "bigint", true, false}).empty());
    CHECK(disagreement(count, {"n", "text", true, false}) == "holds integer but the table declares text");
    CHECK(disagreement(name, {"s", "integer", true, false}) == "holds enum text but the table declares integer");
    CHECK(disagreement(name, {"s", "bytea", true, false}) == "holds enum text but the table declares bytea");
    CHECK(disagreement(count, {"n", "integer", false, false}) == "is always set but the table allows NULL");
    CHECK(disagreement(unset, {"u", "integer", true, false}) == "may be unset but the table refuses NULL");
    CHECK(disagreement(unset, {"u", "bigint", false, false}).empty());
    CHECK(disagreement(id, {"id", "bigint", true, false}) ==
          "is numbered by the database but the table gives it no value");
    CHECK(disagreement(id, {"id", "bigint", true, true}).empty());
}

} // namespace test_store_columns
} // namespace
