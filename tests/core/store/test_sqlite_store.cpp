// SqliteStore against real SQLite files.
#include "core/store/sqlite_store.hpp"
#include "tests/support.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_sqlite_store {

using namespace gpupool;
using namespace gpupool::store;

namespace {

recipe::JobSpec spec(const std::string& name) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"true"};
    s.resources.gpus = 1;
    s.resources.gpu_milli = 250;
    s.params = {{"seed", "1"}};
    return s;
}

Changes sample() {
    Changes c;
    c.teams.push_back({TeamId(1), "owners", 2, 100, std::nullopt, std::nullopt});
    c.teams.push_back({TeamId(2), "fellows", 1, 101, std::nullopt, std::nullopt});
    c.workers.push_back({WorkerId(1), TeamId(1), "box", R"({"gpus":[]})", WorkerState::active, 102, 103, TokenId(7)});
    c.tokens.push_back(
        {TokenId(1), "aa", Role::admin, std::nullopt, std::nullopt, "admin", 100, std::nullopt, std::nullopt});
    c.tokens.push_back({TokenId(2), "bb", Role::worker, TeamId(1), WorkerId(1), "w", 102, std::nullopt, 3});
    c.sweeps.push_back({SweepId(1), TeamId(2), TokenId(1), "eval.toml", 2, 1, 104, "key-1"});
    for (int i = 1; i <= 2; ++i) {
        JobRecord j;
        j.id = JobId(i);
        j.sweep_id = SweepId(1);
        j.team = TeamId(2);
        j.spec = spec("job-" + std::to_string(i));
        j.created_at = j.updated_at = 104;
        j.reason = "waiting";
        c.jobs.push_back(j);
    }
    AttemptRecord a;
    a.id = AttemptId(1);
    a.job = JobId(1);
    a.worker = WorkerId(1);
    a.gpu_index = 0;
    a.gpu_milli = 250;
    a.state = AttemptState::running;
    a.lease_expires_at = 200;
    a.assigned_at = 105;
    a.started_at = 106;
    c.attempts.push_back(a);
    c.jobs[0].state = JobState::running;
    c.jobs[0].attempts = 1;
    return c;
}

} // namespace

TEST_CASE("store: a new file gets the current schema, WAL and foreign keys", "[store]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE(s);
    CHECK((*s)->schema_version() == k_schema_version);
    SQLite::Database db((dir.path() / "pool.db").string());
    CHECK(db.execAndGet("PRAGMA journal_mode").getString() == "wal");
}

TEST_CASE("store: records round-trip through a reopened file", "[store]") {
    test::TempDir dir;
    Changes c = sample();
    {
        auto s = SqliteStore::open(dir.path() / "pool.db");
        REQUIRE(s);
        REQUIRE((*s)->apply(c));
    }
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE(s);
    auto snap = (*s)->load();
    REQUIRE(snap);
    CHECK(snap->teams == c.teams);
    CHECK(snap->workers == c.workers);
    CHECK(snap->tokens == c.tokens);
    CHECK(snap->sweeps == c.sweeps);
    CHECK(snap->jobs == c.jobs);
    CHECK(snap->attempts == c.attempts);
}

TEST_CASE("store: upserts update in place", "[store]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE(s);
    Changes c = sample();
    REQUIRE((*s)->apply(c));
    Changes update;
    JobRecord j = c.jobs[0];
    j.state = JobState::succeeded;
    j.exit_code = 0;
    j.finished_at = 300;
    update.jobs.push_back(j);
    AttemptRecord a = c.attempts[0];
    a.state = AttemptState::succeeded;
    a.ended_at = 300;
    a.exit_code = 0;
    a.voided_at = 400; // an admin voided it: durable like the rest
    update.attempts.push_back(a);
    REQUIRE((*s)->apply(update));
    auto snap = (*s)->load();
    REQUIRE(snap);
    REQUIRE(snap->jobs.size() == 2);
    CHECK(snap->jobs[0] == j);
    CHECK(snap->attempts[0] == a);
}

TEST_CASE("store: a failing batch writes nothing", "[store]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE(s);
    Changes c = sample();
    c.jobs[1].sweep_id = SweepId(99); // no such sweep: the foreign key fails the whole transaction
    auto st = (*s)->apply(c);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == ErrorCode::io);
    auto snap = (*s)->load();
    REQUIRE(snap);
    CHECK(snap->teams.empty());
    CHECK(snap->jobs.empty());
}

TEST_CASE("store: log chunks are offset-addressed and idempotent", "[store]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE(s);
    REQUIRE((*s)->apply(sample()));
    Store& st = **s;
    const AttemptId a(1);

    auto first = st.append_log(a, 0, "hello ");
    REQUIRE(first);
    CHECK(first->stored_bytes == 6);
    CHECK(first->length == 6);

    auto repeat = st.append_log(a, 0, "hello "); // a retried chunk
    REQUIRE(repeat);
    CHECK(repeat->stored_bytes == 0);
    CHECK(repeat->length == 6);

    auto overlap = st.append_log(a, 3, "lo world\n"); // half old, half new
    REQUIRE(overlap);
    CHECK(overlap->stored_bytes == 6);
    CHECK(overlap->length == 12);

    auto gap = st.append_log(a, 20, "x");
    REQUIRE_FALSE(gap);
    CHECK(gap.error().code == ErrorCode::conflict);
    CHECK_THAT(gap.error().message, Catch::Contains("expected offset 12"));

    CHECK(st.read_log(a, 0, 1 << 20).value() == "hello world\n");
    CHECK(st.read_log(a, 4, 1 << 20).value() == "o world\n");
    CHECK(st.read_log(a, 4, 3).value() == "o w");
    CHECK(st.read_log(a, 12, 100).value().empty());
    CHECK(st.log_length(a).value() == 12);
}

TEST_CASE("store: outputs are stored whole and replaced on re-upload", "[store]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE(s);
    REQUIRE((*s)->apply(sample()));
    CHECK_FALSE((*s)->get_output(AttemptId(1)).value().has_value());
    std::string blob("\0\1binary\xff", 9);
    const auto file = dir.path() / "out.tar";
    test::write_file(file, blob);
    REQUIRE((*s)->put_output(AttemptId(1), file, "abc"));
    REQUIRE((*s)->put_output(AttemptId(1), file, "abc"));
    CHECK((*s)->get_output(AttemptId(1)).value() == blob);
    // A larger one crosses the 1 MiB pieces the store writes it in.
    std::string big(3 * 1024 * 1024 + 17, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) {
        big[i] = static_cast<char>((i * 131) % 251);
    }
    test::write_file(file, big);
    REQUIRE((*s)->put_output(AttemptId(1), file, "def"));
    CHECK((*s)->get_output(AttemptId(1)).value() == big);
}

TEST_CASE("store: input archives belong to the team that uploaded them", "[store]") {
    test::TempDir dir;
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE(s);
    REQUIRE((*s)->apply(sample()));
    const auto file = dir.path() / "in.tar";
    test::write_file(file, "archive bytes");
    const TeamId team = sample().teams.at(0).id;
    REQUIRE((*s)->put_input_blob(team, "d1", file, 1));
    REQUIRE((*s)->put_input_blob(team, "d1", file, 2)); // a repeated upload is a no-op
    CHECK((*s)->input_blob_size(team, "d1").value() == std::optional<std::int64_t>(13));
    CHECK((*s)->get_input_blob(team, "d1").value() == std::optional<std::string>("archive bytes"));
    // Another team sees nothing under the same digest: not the bytes, not the size.
    const TeamId other(team.value() + 1000);
    CHECK_FALSE((*s)->input_blob_size(other, "d1").value().has_value());
    CHECK_FALSE((*s)->get_input_blob(other, "d1").value().has_value());
}

TEST_CASE("store: a database from a newer gpupool is refused", "[store]") {
    test::TempDir dir;
    {
        SQLite::Database db((dir.path() / "pool.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        db.exec("PRAGMA user_version = 99");
    }
    auto s = SqliteStore::open(dir.path() / "pool.db");
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("newer than this gpupool"));
}

TEST_CASE("store: a path that cannot be opened is a clear error", "[store]") {
    auto s = SqliteStore::open("/nonexistent-dir/x/pool.db");
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("/nonexistent-dir/x/pool.db"));
}

} // namespace test_sqlite_store
} // namespace
