// PostgresStore beyond the contract every engine meets (contract/test_store_contract.cpp): several
// stores on one database and the lease between them (a stale coordinator is fenced by the database,
// and nothing of its writes is kept), migrations raced by two openers, a server that crashes and comes
// back, blobs in pieces, passwords, and the read-only snapshot that backup() reads through.
#ifdef GPUPOOL_HAVE_POSTGRES

#include "core/store/open_store.hpp"
#include "core/store/postgres_store.hpp"
#include "tests/pg/pg_test_server.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <libpq-fe.h>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_postgres_store {

using namespace gpupool;
using namespace gpupool::store;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<PostgresStore> open_pg(const std::string& url, const PostgresOptions& o = {}) {
    auto s = PostgresStore::open(url, o);
    INFO((s ? std::string() : s.error().describe()));
    REQUIRE(s);
    return std::move(*s);
}

// A team, a worker, a sweep with a job, and the job's attempt (logs and outputs need one).
Records pool() {
    Records c;
    c.teams.push_back({TeamId(1), "owners", 1, 100, std::nullopt, std::nullopt});
    c.workers.push_back({WorkerId(1), TeamId(1), "box", "{}", WorkerState::active, 101, 101, std::nullopt});
    c.sweeps.push_back({SweepId(1), TeamId(1), TokenId(1), "job.toml", 1, 0, 102, ""});
    JobRecord j;
    j.id = JobId(1);
    j.sweep_id = SweepId(1);
    j.team = TeamId(1);
    j.spec.name = "job";
    j.spec.image = "busybox";
    j.spec.command = {"true"};
    j.created_at = j.updated_at = 102;
    c.jobs.push_back(j);
    AttemptRecord a;
    a.id = AttemptId(1);
    a.job = JobId(1);
    a.worker = WorkerId(1);
    a.assigned_at = 103;
    c.attempts.push_back(a);
    return c;
}

Records team(std::int64_t id) {
    Records c;
    c.teams.push_back({TeamId(id), "team-" + std::to_string(id), 1, 200, std::nullopt, std::nullopt});
    return c;
}

void check_fenced(const Status& st, const std::string& epoch, const std::string& address) {
    REQUIRE_FALSE(st);
    INFO(st.error().describe());
    CHECK(is_fenced(st.error()));
    CHECK_THAT(st.error().message, Catch::Contains("another coordinator (epoch " + epoch + ", at " + address + ")"));
}

template <class T>
Status status_of(const Result<T>& r) {
    if (r) {
        return {};
    }
    return r.error();
}

} // namespace

TEST_CASE("postgres store: a standby takes the expired lease at the next epoch and the old holder is fenced",
          "[store][postgres]") {
    const auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    test::TempDir dir;
    const std::string url = test::fresh_database("pg_lease_takeover", *server);
    auto a = open_pg(url);
    auto b = open_pg(url);
    REQUIRE(a->apply(pool()));
    const auto a_claim = a->acquire_lease({"a", "https://a.example:1", 300});
    REQUIRE(a_claim);
    CHECK(a_claim->holder == "a");
    CHECK(a_claim->epoch == 1);
    // B's claim fails while A's lease runs, and names who holds it.
    const auto b_first = b->acquire_lease({"b", "https://b.example:2", 60'000});
    REQUIRE(b_first);
    CHECK(b_first->holder == "a");
    CHECK(b_first->address == "https://a.example:1");
    CHECK(b_first->epoch == 1);
    CHECK(b_first->expires_in_ms > 0);
    REQUIRE(a->append_log(AttemptId(1), 0, "a1"));

    std::this_thread::sleep_for(500ms); // A's ttl passes (A was paused and did not renew)
    const auto b_claim = b->acquire_lease({"b", "https://b.example:2", 60'000});
    REQUIRE(b_claim);
    CHECK(b_claim->holder == "b");
    CHECK(b_claim->epoch == 2);

    // Every write of A is refused by the database, and nothing of it is kept.
    check_fenced(a->apply(team(9)), "2", "https://b.example:2");
    check_fenced(status_of(a->append_log(AttemptId(1), 2, "zz")), "2", "https://b.example:2");
    check_fenced(a->put_output(AttemptId(1), dir.write("out.tar", "tar"), "sha"), "2", "https://b.example:2");
    check_fenced(a->put_input_blob(TeamId(1), "d1", dir.write("in.tar", "in"), 1), "2", "https://b.example:2");
    check_fenced(a->drop_log_range(AttemptId(1), 0, 2), "2", "https://b.example:2");
    check_fenced(status_of(a->prune_samples(1'000)), "2", "https://b.example:2");
    check_fenced(a->renew_lease(60'000), "2", "https://b.example:2");
    const auto after = b->load();
    REQUIRE(after);
    CHECK(after->teams.size() == 1);
    CHECK(b->read_log(AttemptId(1), 0, 100).value() == "a1");
    CHECK_FALSE(b->get_output(AttemptId(1)).value().has_value());
    CHECK_FALSE(b->input_blob_size(TeamId(1), "d1").value().has_value());
    // A's failed claim now reports B, and the new holder writes.
    const auto a_again = a->acquire_lease({"a", "https://a.example:1", 300});
    REQUIRE(a_again);
    CHECK(a_again->holder == "b");
    REQUIRE(b->apply(team(10)));
    REQUIRE(b->renew_lease(60'000));
}

TEST_CASE(
    "postgres store: a store without the lease may not write while someone holds it, and a release frees it at once",
    "[store][postgres]") {
    const auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    const std::string url = test::fresh_database("pg_lease_release", *server);
    auto tool = open_pg(url); // like `gpupool admin migrate` or the admin-token recovery: never takes the lease
    auto a = open_pg(url);
    auto b = open_pg(url);
    REQUIRE(tool->apply(team(1))); // nobody holds the lease: a tool may write
    REQUIRE(a->acquire_lease({"a", "https://a.example", 60'000}));
    check_fenced(tool->apply(team(2)), "1", "https://a.example");
    CHECK(tool->load().value().teams.size() == 1);
    // The holder re-acquiring keeps its epoch; B cannot take it until A releases it.
    CHECK(a->acquire_lease({"a", "https://a.example", 60'000}).value().epoch == 1);
    CHECK(b->acquire_lease({"b", "https://b.example", 60'000}).value().holder == "a");
    REQUIRE(a->release_lease());
    CHECK(a->read_lease().value().expires_in_ms == 0);
    REQUIRE(tool->apply(team(3))); // free again
    const auto b_claim = b->acquire_lease({"b", "https://b.example", 60'000});
    REQUIRE(b_claim);
    CHECK(b_claim->holder == "b");
    CHECK(b_claim->epoch == 2);
    REQUIRE(a->release_lease()); // no longer A's: a no-op that leaves B's lease alone
    CHECK(b->read_lease().value().expires_in_ms > 0);
    check_fenced(tool->apply(team(4)), "2", "https://b.example");
    check_fenced(a->apply(team(5)), "2", "https://b.example");
    CHECK(b->load().value().teams.size() == 2);
}

TEST_CASE("postgres store: taking the lease waits for a write of the old epoch in flight", "[store][postgres]") {
    const auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    const std::string url = test::fresh_database("pg_lease_in_flight", *server);
    auto a = open_pg(url);
    auto b = open_pg(url);
    REQUIRE(a->acquire_lease({"a", "https://a.example", 200}));
    std::this_thread::sleep_for(300ms); // expired, not yet taken
    // A write transaction of epoch 1 that has passed its fence and not yet committed.
    std::unique_ptr<PGconn, void (*)(PGconn*)> writer(PQconnectdb(url.c_str()), PQfinish);
    REQUIRE(PQstatus(writer.get()) == CONNECTION_OK);
    PQclear(PQexec(writer.get(), "BEGIN"));
    PGresult* fenced = PQexec(writer.get(), "SELECT gpupool_fence(1)");
    REQUIRE(PQresultStatus(fenced) == PGRES_TUPLES_OK);
    PQclear(fenced);

    std::atomic<bool> done{false};
    std::int64_t epoch = 0;
    std::thread standby([&] {
        auto claim = b->acquire_lease({"b", "https://b.example", 60'000});
        epoch = claim ? claim->epoch : -1;
        done = true;
    });
    std::this_thread::sleep_for(500ms);
    CHECK_FALSE(done.load()); // held up by the write in flight
    PGresult* committed = PQexec(writer.get(), "COMMIT");
    CHECK(PQresultStatus(committed) == PGRES_COMMAND_OK);
    PQclear(committed);
    standby.join();
    CHECK(epoch == 2);
}

TEST_CASE("postgres store: openers racing on a fresh database migrate it once, and newer schemas are refused",
          "[store][postgres]") {
    const auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    const std::string url = test::fresh_database("pg_migrate_race", *server);
    PostgresOptions existing_only;
    existing_only.create = false;
    auto none = PostgresStore::open(url, existing_only);
    REQUIRE_FALSE(none);
    CHECK(none.error().code == ErrorCode::not_found);

    std::vector<std::thread> openers;
    std::atomic<int> opened{0};
    std::vector<std::string> errors(4);
    for (std::size_t i = 0; i < errors.size(); ++i) {
        openers.emplace_back([&, i] {
            auto s = PostgresStore::open(url);
            if (s) {
                ++opened;
            } else {
                errors[i] = s.error().describe();
            }
        });
    }
    for (auto& t : openers) {
        t.join();
    }
    for (const auto& e : errors) {
        CHECK(e.empty());
    }
    CHECK(opened == 4);
    CHECK(test::pg_query_value(url, "SELECT count(*) || ' ' || max(version) FROM gpupool_schema") ==
          "1 " + std::to_string(k_postgres_schema_version));
    CHECK(open_pg(url, existing_only)->schema_version() == k_postgres_schema_version);

    test::pg_exec(url, "UPDATE gpupool_schema SET version = 99");
    auto newer = PostgresStore::open(url);
    REQUIRE_FALSE(newer);
    CHECK(newer.error().code == ErrorCode::io);
    CHECK_THAT(newer.error().message, Catch::Contains("newer than this gpupool understands"));
}

TEST_CASE("postgres store: after the server crashes, calls fail with io errors, then work again once it is back",
          "[store][postgres]") {
    if (!test::test_pg_url()) {
        return; // the fixture's server is there when PostgreSQL is; this test starts one of its own
    }
    test::TempDir dir;
    test::OwnPgServer server(dir.path() / "server");
    REQUIRE(server.start());
    auto s = open_pg(server.url());
    REQUIRE(s->apply(pool()));
    REQUIRE(s->append_log(AttemptId(1), 0, "before the crash\n"));
    std::string big(2 * 1024 * 1024 + 17, 'x');
    REQUIRE(s->put_output(AttemptId(1), dir.write("out.tar", big), "sha-big"));
    REQUIRE(s->acquire_lease({"a", "https://a.example", 600'000}));

    server.crash(); // pg_ctl stop -m immediate: committed work must survive, the connection does not
    auto down = s->load();
    REQUIRE_FALSE(down);
    CHECK(down.error().code == ErrorCode::io);
    CHECK_THAT(down.error().message, Catch::Contains("database: load failed"));
    auto still_down = s->apply(team(2));
    REQUIRE_FALSE(still_down);
    CHECK(still_down.error().code == ErrorCode::io);

    REQUIRE(server.start()); // same data, same port
    auto back = s->load();   // the same store reconnects
    REQUIRE(back);
    CHECK(back->teams.size() == 1);
    CHECK(s->read_log(AttemptId(1), 0, 100).value() == "before the crash\n");
    CHECK(s->get_output(AttemptId(1)).value() == std::optional<std::string>(big));
    REQUIRE(s->apply(team(2))); // still the lease's holder
    auto reopened = open_pg(server.url());
    CHECK(reopened->load().value().teams.size() == 2);
    CHECK(reopened->read_lease().value().holder == "a");
}

TEST_CASE("postgres store: blobs are stored in pieces of a MiB under the cap", "[store][postgres]") {
    const auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    test::TempDir dir;
    const std::string url = test::fresh_database("pg_blob_pieces", *server);
    PostgresOptions higher;
    higher.max_blob_bytes = std::int64_t{4'000'000'000};
    CHECK(open_pg(url, higher)->max_blob_bytes() == k_postgres_max_blob_bytes); // lowered only
    auto s = open_pg(url);
    REQUIRE(s->apply(pool()));
    const std::string big(3 * 1024 * 1024 + 1, 'b');
    REQUIRE(s->put_output(AttemptId(1), dir.write("big.tar", big), "sha-big"));
    CHECK(test::pg_query_value(url, "SELECT count(*) FROM output_chunks") == "4");
    REQUIRE(s->put_output(AttemptId(1), dir.write("small.tar", "small"), "sha-small")); // replaced whole
    CHECK(test::pg_query_value(url, "SELECT count(*) FROM output_chunks") == "1");
    CHECK(test::pg_query_value(url, "SELECT sha256 FROM outputs") == "sha-small");
    REQUIRE(s->put_input_blob(TeamId(1), "d1", dir.write("in.tar", big), 5));
    CHECK(test::pg_query_value(url, "SELECT count(*) FROM input_blob_chunks") == "4");
    CHECK(s->get_input_blob(TeamId(1), "d1").value() == std::optional<std::string>(big));
}

TEST_CASE("postgres store: a password is used when given and never shown", "[store][postgres]") {
    const auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    // gpupool_pw signs in with a password (pg_server.sh's pg_hba.conf), owning a database of its own.
    test::pg_exec(*server, "DROP DATABASE IF EXISTS pg_password WITH (FORCE)");
    test::pg_exec(*server, "DROP ROLE IF EXISTS gpupool_pw");
    test::pg_exec(*server, "CREATE ROLE gpupool_pw LOGIN PASSWORD 'right-horse-battery'");
    test::pg_exec(*server, "CREATE DATABASE pg_password OWNER gpupool_pw");
    std::string url = test::database_url(*server, "pg_password");
    url.replace(url.find("gpupool@"), 8, "gpupool_pw@");

    PostgresOptions wrong;
    wrong.password = "wrong-staple-1234";
    auto refused = PostgresStore::open(url, wrong);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::io);
    CHECK_THAT(refused.error().message, Catch::Contains("password authentication failed"));
    CHECK(refused.error().describe().find("wrong-staple-1234") == std::string::npos);

    PostgresOptions right;
    right.password = "right-horse-battery";
    auto s = open_pg(url, right);
    REQUIRE(s->apply(team(1)));
    OpenOptions via_open_store;
    via_open_store.password = "right-horse-battery";
    auto opened = open_store(url, via_open_store);
    REQUIRE(opened);
    CHECK((*opened)->load().value().teams.size() == 1);
}

TEST_CASE("postgres store: a snapshot reads one moment and refuses writes", "[store][postgres]") {
    const auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    test::TempDir dir;
    const std::string url = test::fresh_database("pg_snapshot", *server);
    auto s = open_pg(url);
    REQUIRE(s->apply(pool()));
    REQUIRE(s->append_log(AttemptId(1), 0, "one"));
    PostgresOptions snapshot;
    snapshot.snapshot = true;
    snapshot.create = false;
    auto frozen = open_pg(url, snapshot);
    REQUIRE(s->apply(team(2)));
    REQUIRE(s->append_log(AttemptId(1), 3, "two"));
    CHECK(frozen->load().value().teams.size() == 1);
    CHECK(frozen->read_log(AttemptId(1), 0, 100).value() == "one");
    auto write = frozen->apply(team(3));
    REQUIRE_FALSE(write);
    CHECK(write.error().code == ErrorCode::conflict);
    CHECK_FALSE(is_fenced(write.error()));
    CHECK(s->load().value().teams.size() == 2);

    // A backup never overwrites a file that has anything in it.
    const fs::path taken = dir.write("taken.db", "something");
    auto st = s->backup(taken);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == ErrorCode::conflict);
    CHECK(test::slurp(taken) == "something");
}

#endif // GPUPOOL_HAVE_POSTGRES

} // namespace test_postgres_store
} // namespace
