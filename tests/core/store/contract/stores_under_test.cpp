#include "tests/core/store/contract/stores_under_test.hpp"

#include "core/recipe/recipe_json.hpp"
#include "core/store/open_store.hpp"
#include "core/store/sqlite_store.hpp"
#ifdef GPUPOOL_HAVE_POSTGRES
#include "core/store/postgres_store.hpp"
#include "tests/pg/pg_test_server.hpp"
#endif

#include <SQLiteCpp/SQLiteCpp.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>

namespace gpupool::test {

using namespace gpupool::store;
namespace fs = std::filesystem;

namespace {

// ---- SQLite ------------------------------------------------------------------------------------

Result<std::unique_ptr<Store>> open_sqlite(const fs::path& dir, const StoreOpenOptions& options) {
    const fs::path file = dir / "pool.db";
    if (options.max_blob_bytes == 0) {
        return open_store("sqlite:" + file.string()); // as the coordinator opens it
    }
    SqliteOptions so;
    so.lock = true;
    so.max_blob_bytes = options.max_blob_bytes;
    auto opened = SqliteStore::open(file, so);
    if (!opened) {
        return opened.error();
    }
    return std::unique_ptr<Store>(std::move(*opened));
}

// The tables as version `v` left them, each written out whole with the columns it had then (not
// replayed from the migrations, so that the upgrade is checked against an independent picture).
std::string sqlite_schema_at(const OldVersion& v) {
    const int n = v.schema_version;
    auto from = [n](int version, const char* columns) { return n >= version ? std::string(columns) : std::string(); };
    std::string sql =
        "CREATE TABLE teams (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, weight INTEGER NOT NULL DEFAULT 1, "
        "created_at INTEGER NOT NULL" + from(2, ", budget_day_micro INTEGER, budget_week_micro INTEGER") + ");\n"
        "CREATE TABLE workers (id INTEGER PRIMARY KEY, team_id INTEGER NOT NULL REFERENCES teams(id), "
        "name TEXT NOT NULL, inventory TEXT NOT NULL, state TEXT NOT NULL, registered_at INTEGER NOT NULL, "
        "last_seen_at INTEGER NOT NULL" + from(4, ", enrolled_by INTEGER") + ");\n"
        "CREATE TABLE tokens (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, role TEXT NOT NULL, "
        "team_id INTEGER REFERENCES teams(id), worker_id INTEGER REFERENCES workers(id), label TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, revoked_at INTEGER" + from(4, ", uses_left INTEGER") + ");\n"
        "CREATE TABLE sweeps (id INTEGER PRIMARY KEY, team_id INTEGER NOT NULL REFERENCES teams(id), "
        "submitter_token_id INTEGER NOT NULL, source TEXT NOT NULL, job_count INTEGER NOT NULL, "
        "max_parallel INTEGER NOT NULL, created_at INTEGER NOT NULL" +
        (n >= 4 && v.idempotency_key ? std::string(", idempotency_key TEXT NOT NULL DEFAULT ''") : std::string()) +
        ");\n"
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, sweep_id INTEGER NOT NULL REFERENCES sweeps(id), "
        "team_id INTEGER NOT NULL REFERENCES teams(id), spec TEXT NOT NULL, state TEXT NOT NULL, "
        "attempts INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, finished_at INTEGER, "
        "exit_code INTEGER, reason TEXT NOT NULL);\n"
        "CREATE INDEX jobs_team_state ON jobs(team_id, state);\n"
        "CREATE TABLE attempts (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id), "
        "worker_id INTEGER NOT NULL REFERENCES workers(id), gpu_index INTEGER NOT NULL, gpu_milli INTEGER NOT NULL, "
        "state TEXT NOT NULL, lease_expires_at INTEGER NOT NULL, assigned_at INTEGER NOT NULL, started_at INTEGER, "
        "ended_at INTEGER, exit_code INTEGER, reason TEXT NOT NULL" +
        from(2, ", price_micro_per_hour INTEGER NOT NULL DEFAULT 0") + from(5, ", voided_at INTEGER") + ");\n"
        "CREATE INDEX attempts_job ON attempts(job_id);\n"
        "CREATE TABLE log_chunks (attempt_id INTEGER NOT NULL REFERENCES attempts(id), byte_offset INTEGER NOT NULL, "
        "data BLOB NOT NULL, PRIMARY KEY (attempt_id, byte_offset));\n"
        "CREATE TABLE outputs (attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id), sha256 TEXT NOT NULL, "
        "data BLOB NOT NULL);\n";
    if (n >= 2) {
        sql += "CREATE TABLE ledger_entries (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, debit TEXT NOT NULL, "
               "credit TEXT NOT NULL, amount INTEGER NOT NULL CHECK (amount > 0), reason TEXT NOT NULL, "
               "attempt_id INTEGER, grant_id INTEGER, payer_team_id INTEGER, note TEXT NOT NULL);\n"
               "CREATE INDEX ledger_entries_attempt ON ledger_entries(attempt_id);\n"
               "CREATE TABLE account_balances (account TEXT PRIMARY KEY, balance INTEGER NOT NULL);\n"
               "CREATE TABLE grants (id INTEGER PRIMARY KEY, team_id INTEGER NOT NULL REFERENCES teams(id), "
               "amount INTEGER NOT NULL, expires_at INTEGER, note TEXT NOT NULL, created_at INTEGER NOT NULL, "
               "expired_at INTEGER);\n";
    }
    if (n == 3) {
        sql += "CREATE TABLE input_blobs (sha256 TEXT PRIMARY KEY, team_id INTEGER REFERENCES teams(id), "
               "size INTEGER NOT NULL, data BLOB NOT NULL, created_at INTEGER NOT NULL);\n";
    }
    if (n >= 4) {
        sql += "CREATE TABLE team_input_blobs (team_id INTEGER NOT NULL REFERENCES teams(id), sha256 TEXT NOT NULL, "
               "size INTEGER NOT NULL, data BLOB NOT NULL, created_at INTEGER NOT NULL, "
               "PRIMARY KEY (team_id, sha256));\n";
    }
    return sql;
}

// One row: column names and values (NULL, integer, text, or bytes for a BLOB column).
struct Bytes {
    std::string data;
};
using Value = std::variant<std::nullptr_t, std::int64_t, std::string, Bytes>;
using Row = std::vector<std::pair<std::string, Value>>;

Value opt(const std::optional<std::int64_t>& v) { return v ? Value(*v) : Value(nullptr); }

void insert(SQLite::Database& db, const std::string& table, const Row& row) {
    std::string columns;
    std::string marks;
    for (const auto& [name, value] : row) {
        columns += (columns.empty() ? "" : ", ") + name;
        marks += marks.empty() ? "?" : ", ?";
    }
    SQLite::Statement q(db, "INSERT INTO " + table + " (" + columns + ") VALUES (" + marks + ")");
    int i = 1;
    for (const auto& [name, value] : row) {
        if (const auto* n = std::get_if<std::int64_t>(&value)) {
            q.bind(i, *n);
        } else if (const auto* s = std::get_if<std::string>(&value)) {
            q.bind(i, *s);
        } else if (const auto* b = std::get_if<Bytes>(&value)) {
            q.bind(i, b->data.data(), static_cast<int>(b->data.size()));
        } else {
            q.bind(i);
        }
        ++i;
    }
    q.exec();
}

void write_old_records(SQLite::Database& db, const OldVersion& v, const Records& old) {
    const int n = v.schema_version;
    for (const auto& t : old.teams) {
        Row row{{"id", t.id.value()}, {"name", t.name}, {"weight", t.weight}, {"created_at", t.created_at}};
        if (n >= 2) {
            row.insert(row.end(), {{"budget_day_micro", opt(t.budget_day_micro)},
                                   {"budget_week_micro", opt(t.budget_week_micro)}});
        }
        insert(db, "teams", row);
    }
    for (const auto& w : old.workers) {
        Row row{{"id", w.id.value()},          {"team_id", w.team.value()}, {"name", w.name},
                {"inventory", w.inventory_json}, {"state", std::string(to_string(w.state))},
                {"registered_at", w.registered_at}, {"last_seen_at", w.last_seen_at}};
        if (n >= 4) {
            row.emplace_back("enrolled_by", w.enrolled_by ? Value(w.enrolled_by->value()) : Value(nullptr));
        }
        insert(db, "workers", row);
    }
    for (const auto& t : old.tokens) {
        Row row{{"id", t.id.value()},
                {"hash", t.hash},
                {"role", std::string(to_string(t.role))},
                {"team_id", t.team ? Value(t.team->value()) : Value(nullptr)},
                {"worker_id", t.worker ? Value(t.worker->value()) : Value(nullptr)},
                {"label", t.label},
                {"created_at", t.created_at},
                {"revoked_at", opt(t.revoked_at)}};
        if (n >= 4) {
            row.emplace_back("uses_left", opt(t.uses_left));
        }
        insert(db, "tokens", row);
    }
    for (const auto& s : old.sweeps) {
        Row row{
            {"id", s.id.value()},        {"team_id", s.team.value()}, {"submitter_token_id", s.submitter_token.value()},
            {"source", s.source},        {"job_count", s.job_count},  {"max_parallel", s.max_parallel},
            {"created_at", s.created_at}};
        if (n >= 4 && v.idempotency_key) {
            row.emplace_back("idempotency_key", s.idempotency_key);
        }
        insert(db, "sweeps", row);
    }
    for (const auto& j : old.jobs) {
        insert(db, "jobs",
               {{"id", j.id.value()},
                {"sweep_id", j.sweep_id.value()},
                {"team_id", j.team.value()},
                {"spec", recipe::to_json(j.spec).dump()},
                {"state", std::string(to_string(j.state))},
                {"attempts", j.attempts},
                {"created_at", j.created_at},
                {"updated_at", j.updated_at},
                {"finished_at", opt(j.finished_at)},
                {"exit_code", opt(j.exit_code)},
                {"reason", j.reason}});
    }
    for (const auto& a : old.attempts) {
        Row row{{"id", a.id.value()},       {"job_id", a.job.value()},           {"worker_id", a.worker.value()},
                {"gpu_index", a.gpu_index}, {"gpu_milli", a.gpu_milli},          {"state", std::string(to_string(a.state))},
                {"lease_expires_at", a.lease_expires_at}, {"assigned_at", a.assigned_at},
                {"started_at", opt(a.started_at)}, {"ended_at", opt(a.ended_at)}, {"exit_code", opt(a.exit_code)},
                {"reason", a.reason}};
        if (n >= 2) {
            row.emplace_back("price_micro_per_hour", a.price_micro_per_hour);
        }
        if (n >= 5) {
            row.emplace_back("voided_at", opt(a.voided_at));
        }
        insert(db, "attempts", row);
    }
    for (const auto& e : old.ledger) {
        insert(db, "ledger_entries",
               {{"id", e.id}, {"at", e.at_ms}, {"debit", credits::to_string(e.debit)},
                {"credit", credits::to_string(e.credit)}, {"amount", e.amount},
                {"reason", std::string(credits::to_string(e.reason))},
                {"attempt_id", e.attempt != 0 ? Value(e.attempt) : Value(nullptr)},
                {"grant_id", e.grant != 0 ? Value(e.grant) : Value(nullptr)},
                {"payer_team_id", e.payer != 0 ? Value(e.payer) : Value(nullptr)}, {"note", e.note}});
    }
    for (const auto& b : old.balances) {
        insert(db, "account_balances", {{"account", credits::to_string(b.account)}, {"balance", b.balance}});
    }
    for (const auto& g : old.grants) {
        insert(db, "grants",
               {{"id", g.id}, {"team_id", g.team.value()}, {"amount", g.amount}, {"expires_at", opt(g.expires_at)},
                {"note", g.note}, {"created_at", g.created_at}, {"expired_at", opt(g.expired_at)}});
    }
}

void write_old_sqlite(const fs::path& dir, const OldVersion& v, const Records& old) {
    SQLite::Database db((dir / "pool.db").string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    SQLite::Transaction tx(db);
    db.exec(sqlite_schema_at(v));
    write_old_records(db, v, old);
    insert(db, "log_chunks", {{"attempt_id", std::int64_t{1}}, {"byte_offset", std::int64_t{0}}, {"data", Bytes{"hello\n"}}});
    insert(db, "outputs", {{"attempt_id", std::int64_t{1}}, {"sha256", std::string("abc")}, {"data", Bytes{"tar bytes"}}});
    const std::int64_t size = 3;
    if (v.schema_version == 3) {
        insert(db, "input_blobs", {{"sha256", std::string("d1")}, {"team_id", std::int64_t{2}}, {"size", size},
                                   {"data", Bytes{"in1"}}, {"created_at", std::int64_t{110}}});
        insert(db, "input_blobs", {{"sha256", std::string("d0")}, {"team_id", nullptr}, {"size", size},
                                   {"data", Bytes{"in0"}}, {"created_at", std::int64_t{111}}});
    } else if (v.schema_version >= 4) {
        insert(db, "team_input_blobs", {{"team_id", std::int64_t{2}}, {"sha256", std::string("d1")}, {"size", size},
                                        {"data", Bytes{"in1"}}, {"created_at", std::int64_t{110}}});
    }
    db.exec("PRAGMA user_version = " + std::to_string(v.schema_version));
    tx.commit();
}

std::vector<LiveColumn> sqlite_columns(const fs::path& dir, const std::string& table) {
    SQLite::Database db((dir / "pool.db").string(), SQLite::OPEN_READONLY);
    SQLite::Statement q(db,
                        "SELECT name, lower(type), \"notnull\", dflt_value IS NOT NULL, pk FROM pragma_table_info(?)");
    q.bind(1, table);
    std::vector<LiveColumn> out;
    std::vector<bool> in_key;
    while (q.executeStep()) {
        LiveColumn c{q.getColumn(0).getString(), q.getColumn(1).getString(), q.getColumn(2).getInt() != 0,
                     q.getColumn(3).getInt() != 0};
        in_key.push_back(q.getColumn(4).getInt() != 0);
        out.push_back(std::move(c));
    }
    const bool one_key = std::count(in_key.begin(), in_key.end(), true) == 1;
    for (std::size_t i = 0; i < out.size(); ++i) {
        // An INTEGER PRIMARY KEY is the rowid: never NULL, numbered when left out. Any other key column is
        // never NULL either (gpupool's keys are all declared so).
        const bool rowid = one_key && in_key[i] && out[i].type == "integer";
        out[i].not_null = out[i].not_null || in_key[i];
        out[i].filled = out[i].filled || rowid;
    }
    return out;
}

const std::vector<OldVersion> k_sqlite_old_versions{
    {1, "1", true}, {2, "2", true}, {3, "3", true}, {4, "4 first shipped without idempotency keys", false},
    {4, "4", true}, {5, "5", true},
};

#ifdef GPUPOOL_HAVE_POSTGRES
// ---- PostgreSQL --------------------------------------------------------------------------------

// A database of the test directory's own on the fixture's server: made on first use, the same one
// after. No earlier schema versions yet.
Result<std::unique_ptr<Store>> open_postgres(const fs::path& dir, const StoreOpenOptions& options) {
    const auto server = test::pg_server_url();
    if (!server) {
        return make_error(ErrorCode::io, "no PostgreSQL test server: " + test::pg_unavailable().value_or("?"));
    }
    const std::string url = test::ensure_database(test::database_name_for(dir), *server);
    if (options.max_blob_bytes == 0) {
        return open_store(url); // as the coordinator opens it
    }
    PostgresOptions po;
    po.max_blob_bytes = options.max_blob_bytes;
    auto opened = PostgresStore::open(url, po);
    if (!opened) {
        return opened.error();
    }
    return std::unique_ptr<Store>(std::move(*opened));
}

std::vector<LiveColumn> postgres_columns(const fs::path& dir, const std::string& table) {
    const auto server = test::pg_server_url();
    REQUIRE(server);
    const std::string url = test::ensure_database(test::database_name_for(dir), *server);
    std::vector<LiveColumn> out;
    for (const auto& row : test::pg_query_rows(
             url, "SELECT column_name, data_type, is_nullable = 'NO', column_default IS NOT NULL OR is_identity = "
                  "'YES' FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '" +
                      table + "' ORDER BY ordinal_position")) {
        out.push_back({row.at(0), row.at(1), row.at(2) == "t", row.at(3) == "t"});
    }
    return out;
}
#endif

} // namespace

const std::vector<StoreUnderTest>& stores_under_test() {
    static const std::vector<StoreUnderTest> stores{
        {"sqlite", open_sqlite, k_sqlite_old_versions, write_old_sqlite, sqlite_columns},
#ifdef GPUPOOL_HAVE_POSTGRES
        {"postgresql", open_postgres, {}, {}, postgres_columns, test::pg_unavailable},
#endif
    };
    return stores;
}

bool store_skipped(const StoreUnderTest& kind) {
    if (!kind.unavailable) {
        return false;
    }
    const auto why = kind.unavailable();
    if (!why) {
        return false;
    }
#ifdef GPUPOOL_HAVE_POSTGRES
    if (kind.kind == "postgresql" && test::postgres_required()) {
        FAIL("cannot test the " << kind.kind << " store and GPUPOOL_REQUIRE_POSTGRES=1: " << *why);
    }
#endif
    WARN("skipped the " << kind.kind << " store: " << *why);
    return true;
}

Records old_pool_records(const OldVersion& v) {
    const int n = v.schema_version;
    Records r;
    r.teams.push_back({TeamId(1), "owners", 2, 100, std::nullopt, std::nullopt});
    r.teams.push_back({TeamId(2), "fellows", 1, 101, n >= 2 ? std::optional<std::int64_t>(5'000'000) : std::nullopt,
                       std::nullopt});
    r.workers.push_back({WorkerId(1), TeamId(1), "box", R"({"gpus":[]})", WorkerState::draining, 102, 103,
                         n >= 4 ? std::optional<TokenId>(TokenId(3)) : std::nullopt});
    r.tokens.push_back(
        {TokenId(1), "h1", Role::admin, std::nullopt, std::nullopt, "admin", 100, std::nullopt, std::nullopt});
    r.tokens.push_back({TokenId(2), "h2", Role::worker, TeamId(1), WorkerId(1), "w", 102, std::nullopt, std::nullopt});
    r.tokens.push_back({TokenId(3), "h3", Role::enroll, TeamId(1), std::nullopt, "enroll", 101, 150,
                        n >= 4 ? std::optional<std::int64_t>(0) : std::nullopt});
    r.sweeps.push_back(
        {SweepId(1), TeamId(2), TokenId(1), "eval.toml", 1, 0, 104, n >= 4 && v.idempotency_key ? "k1" : ""});
    JobRecord j;
    j.id = JobId(1);
    j.sweep_id = SweepId(1);
    j.team = TeamId(2);
    j.spec.name = "eval-0";
    j.spec.image = "busybox";
    j.spec.command = {"true"};
    j.spec.resources.gpus = 1;
    j.spec.resources.gpu_milli = 1000;
    j.spec.params = {{"seed", "1"}};
    j.state = JobState::succeeded;
    j.attempts = 1;
    j.created_at = 104;
    j.updated_at = j.finished_at.emplace(300);
    j.exit_code = 0;
    j.reason = "exited 0";
    r.jobs.push_back(j);
    AttemptRecord a;
    a.id = AttemptId(1);
    a.job = JobId(1);
    a.worker = WorkerId(1);
    a.gpu_index = 0;
    a.gpu_milli = 1000;
    a.state = AttemptState::succeeded;
    a.lease_expires_at = 400;
    a.assigned_at = 105;
    a.started_at = 106;
    a.ended_at = 300;
    a.exit_code = 0;
    a.price_micro_per_hour = n >= 2 ? 2'000'000 : 0;
    a.voided_at = n >= 5 ? std::optional<std::int64_t>(500) : std::nullopt;
    r.attempts.push_back(a);
    if (n >= 2) {
        credits::Entry e;
        e.id = 1;
        e.at_ms = 1001;
        e.debit = credits::Account::issuer();
        e.credit = credits::Account::of_team(2);
        e.amount = 7;
        e.reason = credits::EntryReason::grant;
        e.grant = 1;
        e.note = "n1";
        r.ledger.push_back(e);
        // Balances load in the order of their accounts' names.
        r.balances.push_back({credits::Account::issuer(), -7});
        r.balances.push_back({credits::Account::of_team(2), 7});
        r.grants.push_back({1, TeamId(2), 7, std::nullopt, "n1", 1001, std::nullopt});
    }
    return r;
}

} // namespace gpupool::test
