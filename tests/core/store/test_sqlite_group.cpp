// SqliteStore's group commit (store/group_commit.hpp) against real SQLite files: the writes of a group
// are one commit, a failed write leaves the others, and nothing of a group that did not end is stored.
#include "core/store/sqlite_store.hpp"
#include "tests/support.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_sqlite_group {

using namespace gpupool;
using namespace gpupool::store;

namespace {

Changes team(std::int64_t id, const std::string& name) {
    Changes c;
    c.teams.push_back({TeamId(id), name, 1, 100 + id, std::nullopt, std::nullopt});
    return c;
}

LedgerEntry grant(std::int64_t id) {
    LedgerEntry e;
    e.id = id;
    e.at_ms = 1000 + id;
    e.debit = credits::Account::issuer();
    e.credit = credits::Account::of_team(1);
    e.amount = 5;
    e.reason = credits::EntryReason::grant;
    e.note = "g" + std::to_string(id);
    return e;
}

std::vector<std::string> team_names(SqliteStore& s) {
    std::vector<std::string> out;
    for (const auto& t : s.load().value().teams) {
        out.push_back(t.name);
    }
    return out;
}

using Names = std::vector<std::string>;

} // namespace

TEST_CASE("store group: its writes are seen at once and stored by one commit", "[store][group]") {
    test::TempDir dir;
    const auto path = dir.path() / "pool.db";
    auto s = SqliteStore::open(path).value();
    REQUIRE(s->begin_group());
    CHECK(s->group_open());
    REQUIRE(s->apply(team(1, "a")));
    REQUIRE(s->apply(team(2, "b")));
    const auto first = s->reserve_ids(IdKind::job, 4).value();
    const auto archive = dir.path() / "in.tar";
    test::write_file(archive, "archive bytes");
    REQUIRE(s->put_input_blob(TeamId(1), "d1", archive, 1));
    CHECK(team_names(*s) == Names{"a", "b"}); // the group's own reads see its writes
    {
        // Another connection (a backup, another process) sees nothing before the commit.
        SQLite::Database other(path.string());
        CHECK(other.execAndGet("SELECT COUNT(*) FROM teams").getInt64() == 0);
    }
    REQUIRE(s->end_group());
    CHECK_FALSE(s->group_open());
    s.reset();
    auto again = SqliteStore::open(path).value();
    CHECK(team_names(*again) == Names{"a", "b"});
    CHECK(again->get_input_blob(TeamId(1), "d1").value() == std::optional<std::string>("archive bytes"));
    CHECK(again->reserve_ids(IdKind::job, 1).value() == first + 4); // the reservation was stored too
}

TEST_CASE("store group: a failed write takes back only itself", "[store][group]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db").value();
    REQUIRE(s->begin_group());
    Changes paid = team(1, "a");
    paid.ledger.push_back(grant(1));
    REQUIRE(s->apply(paid));
    Changes dup = team(2, "b"); // its entry id exists: the whole apply fails, its team with it
    dup.ledger.push_back(grant(1));
    CHECK_FALSE(s->apply(dup));
    REQUIRE(s->apply(team(3, "c")));
    // A log chunk past the end is refused alone as well.
    CHECK_FALSE(s->append_log(AttemptId(1), 10, "gap"));
    REQUIRE(s->end_group());
    s.reset();
    auto again = SqliteStore::open(dir.path() / "pool.db").value();
    CHECK(team_names(*again) == Names{"a", "c"});
    CHECK(again->load().value().ledger.size() == 1);
    CHECK(again->log_length(AttemptId(1)).value() == 0);
}

TEST_CASE("store group: nothing of a group that did not end is stored", "[store][group]") {
    test::TempDir dir;
    const auto path = dir.path() / "pool.db";
    {
        auto s = SqliteStore::open(path).value();
        REQUIRE(s->apply(team(1, "before"))); // outside a group: committed on its own
        REQUIRE(s->begin_group());
        REQUIRE(s->apply(team(2, "in-group")));
        // The process ends here (closing rolls back, as a crash would)
    }
    auto s = SqliteStore::open(path).value();
    CHECK(team_names(*s) == Names{"before"});
    // abandon_group() rolls back the same way and leaves the store usable.
    REQUIRE(s->begin_group());
    REQUIRE(s->apply(team(3, "abandoned")));
    s->abandon_group();
    CHECK_FALSE(s->group_open());
    REQUIRE(s->apply(team(4, "after")));
    CHECK(team_names(*s) == Names{"before", "after"});
}

TEST_CASE("store group: a commit that fails stores none of the group, and the store goes on", "[store][group]") {
    test::TempDir dir;
    const auto path = dir.path() / "pool.db";
    auto s = SqliteStore::open(path).value();
    {
        // A deferred foreign key is checked at COMMIT only: a team named "poison" makes the commit fail.
        SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
        db.exec("CREATE TABLE poison (team_id INTEGER REFERENCES teams(id) DEFERRABLE INITIALLY DEFERRED);"
                "CREATE TRIGGER poison_commit AFTER INSERT ON teams WHEN NEW.name = 'poison' "
                "BEGIN INSERT INTO poison (team_id) VALUES (-1); END;");
    }
    REQUIRE(s->begin_group());
    REQUIRE(s->apply(team(1, "a")));
    REQUIRE(s->apply(team(2, "poison"))); // its own savepoint is fine: the check waits for the commit
    auto ended = s->end_group();
    REQUIRE_FALSE(ended);
    CHECK(ended.error().code == ErrorCode::io);
    CHECK_THAT(ended.error().message, Catch::Contains("none of them is stored"));
    CHECK_FALSE(s->group_open());
    CHECK(team_names(*s).empty());
    // The next group and lone writes work.
    REQUIRE(s->begin_group());
    REQUIRE(s->apply(team(3, "b")));
    REQUIRE(s->end_group());
    REQUIRE(s->apply(team(4, "c")));
    CHECK(team_names(*s) == Names{"b", "c"});
}

TEST_CASE("store group: one at a time, and ended only once", "[store][group]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db").value();
    auto lone = s->end_group();
    REQUIRE_FALSE(lone);
    CHECK(lone.error().code == ErrorCode::conflict);
    REQUIRE(s->begin_group());
    auto twice = s->begin_group();
    REQUIRE_FALSE(twice);
    CHECK(twice.error().code == ErrorCode::conflict);
    REQUIRE(s->end_group());
    CHECK_FALSE(s->end_group());
}

} // namespace test_sqlite_group
} // namespace
