#include "core/store/sqlite_store.hpp"

#include "core/recipe/recipe_json.hpp"
#include "core/util/files.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <array>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace gpupool::store {

// ---- schema ------------------------------------------------------------------------------------

namespace {

// Migration N takes the schema from version N to N + 1. Portable SQL only (PostgreSQL is next).
const std::array<const char*, k_schema_version> k_migrations{
    R"sql(
CREATE TABLE teams (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    weight INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL
);
CREATE TABLE workers (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL REFERENCES teams(id),
    name TEXT NOT NULL,
    inventory TEXT NOT NULL,
    state TEXT NOT NULL,
    registered_at INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);
CREATE TABLE tokens (
    id INTEGER PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    team_id INTEGER REFERENCES teams(id),
    worker_id INTEGER REFERENCES workers(id),
    label TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE sweeps (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL REFERENCES teams(id),
    submitter_token_id INTEGER NOT NULL,
    source TEXT NOT NULL,
    job_count INTEGER NOT NULL,
    max_parallel INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    team_id INTEGER NOT NULL REFERENCES teams(id),
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    exit_code INTEGER,
    reason TEXT NOT NULL
);
CREATE INDEX jobs_team_state ON jobs(team_id, state);
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    worker_id INTEGER NOT NULL REFERENCES workers(id),
    gpu_index INTEGER NOT NULL,
    gpu_milli INTEGER NOT NULL,
    state TEXT NOT NULL,
    lease_expires_at INTEGER NOT NULL,
    assigned_at INTEGER NOT NULL,
    started_at INTEGER,
    ended_at INTEGER,
    exit_code INTEGER,
    reason TEXT NOT NULL
);
CREATE INDEX attempts_job ON attempts(job_id);
CREATE TABLE log_chunks (
    attempt_id INTEGER NOT NULL REFERENCES attempts(id),
    byte_offset INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (attempt_id, byte_offset)
);
CREATE TABLE outputs (
    attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id),
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL
);
)sql",
    // 2: the credits ledger (issue #6).
    R"sql(
ALTER TABLE teams ADD COLUMN budget_day_micro INTEGER;
ALTER TABLE teams ADD COLUMN budget_week_micro INTEGER;
ALTER TABLE attempts ADD COLUMN price_micro_per_hour INTEGER NOT NULL DEFAULT 0;
CREATE TABLE ledger_entries (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    debit TEXT NOT NULL,
    credit TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount > 0),
    reason TEXT NOT NULL,
    attempt_id INTEGER,
    grant_id INTEGER,
    payer_team_id INTEGER,
    note TEXT NOT NULL
);
CREATE INDEX ledger_entries_attempt ON ledger_entries(attempt_id);
CREATE TABLE account_balances (
    account TEXT PRIMARY KEY,
    balance INTEGER NOT NULL
);
CREATE TABLE grants (
    id INTEGER PRIMARY KEY,
    team_id INTEGER NOT NULL REFERENCES teams(id),
    amount INTEGER NOT NULL,
    expires_at INTEGER,
    note TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expired_at INTEGER
);
)sql",
    // 2 -> 3: input archives, content-addressed, shared by the jobs that name them.
    R"sql(
CREATE TABLE input_blobs (
    sha256 TEXT PRIMARY KEY,
    team_id INTEGER REFERENCES teams(id),
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
)sql",
    // 3 -> 4: input archives belong to the team that uploaded them (security: another team's
    // digest must not be usable, nor its existence learnt). Uploads without a team (admins, before)
    // are dropped: no job can name them any more; jobs that did keep their digest, unused.
    R"sql(
CREATE TABLE team_input_blobs (
    team_id INTEGER NOT NULL REFERENCES teams(id),
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (team_id, sha256)
);
INSERT INTO team_input_blobs (team_id, sha256, size, data, created_at)
    SELECT team_id, sha256, size, data, created_at FROM input_blobs WHERE team_id IS NOT NULL;
DROP TABLE input_blobs;
-- Enrollment tokens are counted (registrations left; NULL: unlimited, tokens made before), and a
-- worker remembers the token it enrolled with, so a ban can revoke it (the owner's identity).
ALTER TABLE tokens ADD COLUMN uses_left INTEGER;
ALTER TABLE workers ADD COLUMN enrolled_by INTEGER;
-- A submission's idempotency key: a retried submit gets its sweep back, not a second one.
ALTER TABLE sweeps ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
)sql",
    // 4 -> 5: an admin can void a banned worker's results (their charges go back to the teams).
    R"sql(
ALTER TABLE attempts ADD COLUMN voided_at INTEGER;
)sql",
    // 5 -> 6: a team member (a member token) can have spend caps of its own.
    R"sql(
ALTER TABLE tokens ADD COLUMN budget_day_micro INTEGER;
ALTER TABLE tokens ADD COLUMN budget_week_micro INTEGER;
)sql",
};

Error db_error(const std::string& what, const std::exception& e) {
    return make_error(ErrorCode::io, "database: " + what + ": " + e.what());
}

template <class T>
void bind_opt(SQLite::Statement& q, int index, const std::optional<T>& v) {
    if (v) {
        q.bind(index, static_cast<std::int64_t>(*v));
    } else {
        q.bind(index);
    }
}

std::int64_t blob_file_size(const std::filesystem::path& file) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (ec) {
        throw std::runtime_error("cannot read " + file.string() + ": " + ec.message());
    }
    return static_cast<std::int64_t>(size);
}

// Fills the zeroblob in `table`.data at `rowid` from `file`, a megabyte at a time (SQLite's
// incremental blob I/O), so an upload never sits whole in memory. Throws on failure; the caller's
// transaction then rolls back.
void write_blob_from_file(SQLite::Database& db, const char* table, std::int64_t rowid,
                          const std::filesystem::path& file, std::int64_t size) {
    sqlite3_blob* blob = nullptr;
    if (sqlite3_blob_open(db.getHandle(), "main", table, "data", rowid, 1, &blob) != SQLITE_OK) {
        sqlite3_blob_close(blob);
        throw std::runtime_error(std::string("cannot open the blob: ") + sqlite3_errmsg(db.getHandle()));
    }
    std::unique_ptr<sqlite3_blob, int (*)(sqlite3_blob*)> guard(blob, sqlite3_blob_close);
    std::ifstream in(file, std::ios::binary);
    std::vector<char> buf(std::size_t{1} << 20);
    std::int64_t offset = 0;
    while (offset < size && in) {
        in.read(buf.data(), static_cast<std::streamsize>(std::min<std::int64_t>(size - offset, static_cast<std::int64_t>(buf.size()))));
        const auto n = static_cast<int>(in.gcount());
        if (n <= 0) {
            break;
        }
        if (sqlite3_blob_write(blob, buf.data(), n, static_cast<int>(offset)) != SQLITE_OK) {
            throw std::runtime_error(std::string("cannot write the blob: ") + sqlite3_errmsg(db.getHandle()));
        }
        offset += n;
    }
    if (offset != size) {
        throw std::runtime_error("could not read all of " + file.string());
    }
}

// The first row's first column as bytes, or nothing when there is no row.
std::optional<std::string> first_blob(SQLite::Statement& q) {
    if (!q.executeStep()) {
        return std::nullopt;
    }
    const auto& col = q.getColumn(0);
    return std::string(static_cast<const char*>(col.getBlob()), static_cast<std::size_t>(col.getBytes()));
}

std::optional<std::int64_t> opt_int(const SQLite::Column& c) {
    if (c.isNull()) {
        return std::nullopt;
    }
    return c.getInt64();
}

} // namespace

SqliteStore::SqliteStore(std::unique_ptr<SQLite::Database> db) : m_db(std::move(db)) {}

SqliteStore::~SqliteStore() = default;

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::filesystem::path& path) {
    // The store holds token hashes, the ledger and the teams' input archives: 0600 before SQLite
    // opens it (which would use the umask's mode), and SQLite gives its -wal and -shm files the
    // database's mode.
    if (auto st = util::create_private_file(path); !st) {
        return st.error();
    }
    try {
        auto db = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        db->setBusyTimeout(5000);
        db->exec("PRAGMA journal_mode=WAL");
        db->exec("PRAGMA synchronous=FULL");
        db->exec("PRAGMA foreign_keys=ON");
        std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(db)));
        if (auto st = store->migrate(); !st) {
            return st.error();
        }
        return store;
    } catch (const std::exception& e) {
        return db_error("cannot open `" + path.string() + "`", e);
    }
}

int SqliteStore::schema_version() const {
    return m_db->execAndGet("PRAGMA user_version").getInt();
}

Status SqliteStore::migrate() {
    try {
        int version = schema_version();
        if (version > k_schema_version) {
            return make_error(ErrorCode::io, "database schema version " + std::to_string(version) +
                                                 " is newer than this gpupool understands (" +
                                                 std::to_string(k_schema_version) + "); upgrade gpupool");
        }
        for (int v = version; v < k_schema_version; ++v) {
            SQLite::Transaction tx(*m_db);
            m_db->exec(k_migrations.at(static_cast<std::size_t>(v)));
            m_db->exec("PRAGMA user_version = " + std::to_string(v + 1));
            tx.commit();
        }
        return {};
    } catch (const std::exception& e) {
        return db_error("migration failed", e);
    }
}

Result<Snapshot> SqliteStore::load() {
    try {
        Snapshot s;
        {
            SQLite::Statement q(*m_db, "SELECT id, name, weight, created_at, budget_day_micro, budget_week_micro "
                                       "FROM teams ORDER BY id");
            while (q.executeStep()) {
                s.teams.push_back({TeamId(q.getColumn(0).getInt64()), q.getColumn(1).getString(),
                                   q.getColumn(2).getInt64(), q.getColumn(3).getInt64(), opt_int(q.getColumn(4)),
                                   opt_int(q.getColumn(5))});
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT id, hash, role, team_id, worker_id, label, created_at, revoked_at, "
                                       "uses_left, budget_day_micro, budget_week_micro FROM tokens ORDER BY id");
            while (q.executeStep()) {
                TokenRecord t;
                t.id = q.getColumn(0).getInt64();
                t.hash = q.getColumn(1).getString();
                t.role = role_from_string(q.getColumn(2).getString()).value_or(Role::member);
                if (auto team = opt_int(q.getColumn(3))) {
                    t.team = TeamId(*team);
                }
                if (auto worker = opt_int(q.getColumn(4))) {
                    t.worker = WorkerId(*worker);
                }
                t.label = q.getColumn(5).getString();
                t.created_at = q.getColumn(6).getInt64();
                t.revoked_at = opt_int(q.getColumn(7));
                t.uses_left = opt_int(q.getColumn(8));
                t.budget_day_micro = opt_int(q.getColumn(9));
                t.budget_week_micro = opt_int(q.getColumn(10));
                s.tokens.push_back(std::move(t));
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT id, team_id, name, inventory, state, registered_at, last_seen_at, "
                                       "enrolled_by FROM workers ORDER BY id");
            while (q.executeStep()) {
                WorkerRecord w;
                w.id = WorkerId(q.getColumn(0).getInt64());
                w.team = TeamId(q.getColumn(1).getInt64());
                w.name = q.getColumn(2).getString();
                w.inventory_json = q.getColumn(3).getString();
                w.state = worker_state_from_string(q.getColumn(4).getString()).value_or(WorkerState::active);
                w.registered_at = q.getColumn(5).getInt64();
                w.last_seen_at = q.getColumn(6).getInt64();
                w.enrolled_by = opt_int(q.getColumn(7));
                s.workers.push_back(std::move(w));
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT id, team_id, submitter_token_id, source, job_count, max_parallel, "
                                       "created_at, idempotency_key FROM sweeps ORDER BY id");
            while (q.executeStep()) {
                s.sweeps.push_back({q.getColumn(0).getInt64(), TeamId(q.getColumn(1).getInt64()),
                                    q.getColumn(2).getInt64(), q.getColumn(3).getString(), q.getColumn(4).getInt64(),
                                    q.getColumn(5).getInt64(), q.getColumn(6).getInt64(), q.getColumn(7).getString()});
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT id, sweep_id, team_id, spec, state, attempts, created_at, updated_at, "
                                       "finished_at, exit_code, reason FROM jobs ORDER BY id");
            while (q.executeStep()) {
                JobRecord j;
                j.id = JobId(q.getColumn(0).getInt64());
                j.sweep_id = q.getColumn(1).getInt64();
                j.team = TeamId(q.getColumn(2).getInt64());
                auto spec = recipe::job_from_json(nlohmann::json::parse(q.getColumn(3).getString()));
                if (!spec) {
                    return make_error(ErrorCode::io, "database: job " + std::to_string(j.id.value()) +
                                                         " has an unreadable spec: " + spec.error().describe());
                }
                j.spec = std::move(*spec);
                j.state = job_state_from_string(q.getColumn(4).getString()).value_or(JobState::queued);
                j.attempts = q.getColumn(5).getInt64();
                j.created_at = q.getColumn(6).getInt64();
                j.updated_at = q.getColumn(7).getInt64();
                j.finished_at = opt_int(q.getColumn(8));
                j.exit_code = opt_int(q.getColumn(9));
                j.reason = q.getColumn(10).getString();
                s.jobs.push_back(std::move(j));
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT id, job_id, worker_id, gpu_index, gpu_milli, state, lease_expires_at, "
                                       "assigned_at, started_at, ended_at, exit_code, reason, price_micro_per_hour, "
                                       "voided_at FROM attempts ORDER BY id");
            while (q.executeStep()) {
                AttemptRecord a;
                a.id = AttemptId(q.getColumn(0).getInt64());
                a.job = JobId(q.getColumn(1).getInt64());
                a.worker = WorkerId(q.getColumn(2).getInt64());
                a.gpu_index = q.getColumn(3).getInt64();
                a.gpu_milli = q.getColumn(4).getInt64();
                a.state = attempt_state_from_string(q.getColumn(5).getString()).value_or(AttemptState::lost);
                a.lease_expires_at = q.getColumn(6).getInt64();
                a.assigned_at = q.getColumn(7).getInt64();
                a.started_at = opt_int(q.getColumn(8));
                a.ended_at = opt_int(q.getColumn(9));
                a.exit_code = opt_int(q.getColumn(10));
                a.reason = q.getColumn(11).getString();
                a.price_micro_per_hour = q.getColumn(12).getInt64();
                a.voided_at = opt_int(q.getColumn(13));
                s.attempts.push_back(std::move(a));
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT id, at, debit, credit, amount, reason, attempt_id, grant_id, "
                                       "payer_team_id, note FROM ledger_entries ORDER BY id");
            while (q.executeStep()) {
                LedgerEntry e;
                e.id = q.getColumn(0).getInt64();
                e.at_ms = q.getColumn(1).getInt64();
                auto debit = credits::account_from_string(q.getColumn(2).getString());
                auto credit = credits::account_from_string(q.getColumn(3).getString());
                auto reason = credits::entry_reason_from_string(q.getColumn(5).getString());
                if (!debit || !credit || !reason) {
                    return make_error(ErrorCode::io, "database: ledger entry " + std::to_string(e.id) +
                                                         " names an unknown account or reason");
                }
                e.debit = *debit;
                e.credit = *credit;
                e.amount = q.getColumn(4).getInt64();
                e.reason = *reason;
                e.attempt = opt_int(q.getColumn(6)).value_or(0);
                e.grant = opt_int(q.getColumn(7)).value_or(0);
                e.payer = opt_int(q.getColumn(8)).value_or(0);
                e.note = q.getColumn(9).getString();
                s.ledger.push_back(std::move(e));
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT account, balance FROM account_balances ORDER BY account");
            while (q.executeStep()) {
                auto account = credits::account_from_string(q.getColumn(0).getString());
                if (!account) {
                    return make_error(ErrorCode::io, "database: unknown account `" + q.getColumn(0).getString() + "`");
                }
                s.balances.push_back({*account, q.getColumn(1).getInt64()});
            }
        }
        {
            SQLite::Statement q(*m_db, "SELECT id, team_id, amount, expires_at, note, created_at, expired_at "
                                       "FROM grants ORDER BY id");
            while (q.executeStep()) {
                s.grants.push_back({q.getColumn(0).getInt64(), TeamId(q.getColumn(1).getInt64()),
                                    q.getColumn(2).getInt64(), opt_int(q.getColumn(3)), q.getColumn(4).getString(),
                                    q.getColumn(5).getInt64(), opt_int(q.getColumn(6))});
            }
        }
        return s;
    } catch (const std::exception& e) {
        return db_error("load failed", e);
    }
}

Status SqliteStore::apply(const Changes& c) {
    if (c.empty()) {
        return {};
    }
    try {
        SQLite::Transaction tx(*m_db);
        if (!c.teams.empty()) {
            SQLite::Statement q(*m_db, "INSERT INTO teams (id, name, weight, created_at, budget_day_micro, "
                                       "budget_week_micro) VALUES (?, ?, ?, ?, ?, ?) "
                                       "ON CONFLICT(id) DO UPDATE SET name = excluded.name, weight = excluded.weight, "
                                       "budget_day_micro = excluded.budget_day_micro, "
                                       "budget_week_micro = excluded.budget_week_micro");
            for (const auto& t : c.teams) {
                q.bind(1, t.id.value());
                q.bind(2, t.name);
                q.bind(3, t.weight);
                q.bind(4, t.created_at);
                bind_opt(q, 5, t.budget_day_micro);
                bind_opt(q, 6, t.budget_week_micro);
                q.exec();
                q.reset();
            }
        }
        // Workers before tokens: worker tokens reference them.
        if (!c.workers.empty()) {
            SQLite::Statement q(*m_db,
                                "INSERT INTO workers (id, team_id, name, inventory, state, registered_at, last_seen_at, "
                                "enrolled_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, "
                                "inventory = excluded.inventory, state = excluded.state, "
                                "last_seen_at = excluded.last_seen_at");
            for (const auto& w : c.workers) {
                q.bind(1, w.id.value());
                q.bind(2, w.team.value());
                q.bind(3, w.name);
                q.bind(4, w.inventory_json);
                q.bind(5, to_string(w.state));
                q.bind(6, w.registered_at);
                q.bind(7, w.last_seen_at);
                bind_opt(q, 8, w.enrolled_by);
                q.exec();
                q.reset();
            }
        }
        if (!c.tokens.empty()) {
            SQLite::Statement q(*m_db, "INSERT INTO tokens (id, hash, role, team_id, worker_id, label, created_at, "
                                       "revoked_at, uses_left, budget_day_micro, budget_week_micro) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                                       "ON CONFLICT(id) DO UPDATE SET "
                                       "worker_id = excluded.worker_id, label = excluded.label, "
                                       "revoked_at = excluded.revoked_at, uses_left = excluded.uses_left, "
                                       "budget_day_micro = excluded.budget_day_micro, "
                                       "budget_week_micro = excluded.budget_week_micro");
            for (const auto& t : c.tokens) {
                q.bind(1, t.id);
                q.bind(2, t.hash);
                q.bind(3, to_string(t.role));
                bind_opt(q, 4, t.team ? std::optional<std::int64_t>(t.team->value()) : std::nullopt);
                bind_opt(q, 5, t.worker ? std::optional<std::int64_t>(t.worker->value()) : std::nullopt);
                q.bind(6, t.label);
                q.bind(7, t.created_at);
                bind_opt(q, 8, t.revoked_at);
                bind_opt(q, 9, t.uses_left);
                bind_opt(q, 10, t.budget_day_micro);
                bind_opt(q, 11, t.budget_week_micro);
                q.exec();
                q.reset();
            }
        }
        if (!c.sweeps.empty()) {
            SQLite::Statement q(*m_db, "INSERT INTO sweeps (id, team_id, submitter_token_id, source, job_count, "
                                       "max_parallel, created_at, idempotency_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                                       "ON CONFLICT(id) DO NOTHING");
            for (const auto& s : c.sweeps) {
                q.bind(1, s.id);
                q.bind(2, s.team.value());
                q.bind(3, s.submitter_token);
                q.bind(4, s.source);
                q.bind(5, s.job_count);
                q.bind(6, s.max_parallel);
                q.bind(7, s.created_at);
                q.bind(8, s.idempotency_key);
                q.exec();
                q.reset();
            }
        }
        if (!c.jobs.empty()) {
            SQLite::Statement q(*m_db, "INSERT INTO jobs (id, sweep_id, team_id, spec, state, attempts, created_at, "
                                       "updated_at, finished_at, exit_code, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                                       "ON CONFLICT(id) DO UPDATE SET state = excluded.state, attempts = excluded.attempts, "
                                       "updated_at = excluded.updated_at, finished_at = excluded.finished_at, "
                                       "exit_code = excluded.exit_code, reason = excluded.reason");
            for (const auto& j : c.jobs) {
                q.bind(1, j.id.value());
                q.bind(2, j.sweep_id);
                q.bind(3, j.team.value());
                q.bind(4, recipe::to_json(j.spec).dump());
                q.bind(5, to_string(j.state));
                q.bind(6, j.attempts);
                q.bind(7, j.created_at);
                q.bind(8, j.updated_at);
                bind_opt(q, 9, j.finished_at);
                bind_opt(q, 10, j.exit_code);
                q.bind(11, j.reason);
                q.exec();
                q.reset();
            }
        }
        if (!c.attempts.empty()) {
            SQLite::Statement q(*m_db, "INSERT INTO attempts (id, job_id, worker_id, gpu_index, gpu_milli, state, "
                                       "lease_expires_at, assigned_at, started_at, ended_at, exit_code, reason, "
                                       "price_micro_per_hour, voided_at) "
                                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                                       "state = excluded.state, lease_expires_at = excluded.lease_expires_at, "
                                       "started_at = excluded.started_at, ended_at = excluded.ended_at, "
                                       "exit_code = excluded.exit_code, reason = excluded.reason, "
                                       "voided_at = excluded.voided_at");
            for (const auto& a : c.attempts) {
                q.bind(1, a.id.value());
                q.bind(2, a.job.value());
                q.bind(3, a.worker.value());
                q.bind(4, a.gpu_index);
                q.bind(5, a.gpu_milli);
                q.bind(6, to_string(a.state));
                q.bind(7, a.lease_expires_at);
                q.bind(8, a.assigned_at);
                bind_opt(q, 9, a.started_at);
                bind_opt(q, 10, a.ended_at);
                bind_opt(q, 11, a.exit_code);
                q.bind(12, a.reason);
                q.bind(13, a.price_micro_per_hour);
                bind_opt(q, 14, a.voided_at);
                q.exec();
                q.reset();
            }
        }
        if (!c.grants.empty()) {
            SQLite::Statement q(*m_db, "INSERT INTO grants (id, team_id, amount, expires_at, note, created_at, "
                                       "expired_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                                       "expired_at = excluded.expired_at");
            for (const auto& g : c.grants) {
                q.bind(1, g.id);
                q.bind(2, g.team.value());
                q.bind(3, g.amount);
                bind_opt(q, 4, g.expires_at);
                q.bind(5, g.note);
                q.bind(6, g.created_at);
                bind_opt(q, 7, g.expired_at);
                q.exec();
                q.reset();
            }
        }
        if (!c.ledger.empty()) {
            // Plain INSERT: an entry is written once and never changed.
            SQLite::Statement q(*m_db, "INSERT INTO ledger_entries (id, at, debit, credit, amount, reason, attempt_id, "
                                       "grant_id, payer_team_id, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
            for (const auto& e : c.ledger) {
                q.bind(1, e.id);
                q.bind(2, e.at_ms);
                q.bind(3, credits::to_string(e.debit));
                q.bind(4, credits::to_string(e.credit));
                q.bind(5, e.amount);
                q.bind(6, credits::to_string(e.reason));
                bind_opt(q, 7, e.attempt != 0 ? std::optional<std::int64_t>(e.attempt) : std::nullopt);
                bind_opt(q, 8, e.grant != 0 ? std::optional<std::int64_t>(e.grant) : std::nullopt);
                bind_opt(q, 9, e.payer != 0 ? std::optional<std::int64_t>(e.payer) : std::nullopt);
                q.bind(10, e.note);
                q.exec();
                q.reset();
            }
        }
        if (!c.balances.empty()) {
            SQLite::Statement q(*m_db, "INSERT INTO account_balances (account, balance) VALUES (?, ?) "
                                       "ON CONFLICT(account) DO UPDATE SET balance = excluded.balance");
            for (const auto& b : c.balances) {
                q.bind(1, credits::to_string(b.account));
                q.bind(2, b.balance);
                q.exec();
                q.reset();
            }
        }
        tx.commit();
        return {};
    } catch (const std::exception& e) {
        return db_error("write failed", e);
    }
}

Result<std::int64_t> SqliteStore::log_length(AttemptId attempt) {
    try {
        SQLite::Statement q(*m_db, "SELECT COALESCE(MAX(byte_offset + length(data)), 0) FROM log_chunks "
                                   "WHERE attempt_id = ?");
        q.bind(1, attempt.value());
        q.executeStep();
        return q.getColumn(0).getInt64();
    } catch (const std::exception& e) {
        return db_error("log length", e);
    }
}

Result<LogAppend> SqliteStore::append_log(AttemptId attempt, std::int64_t offset, std::string_view data) {
    try {
        SQLite::Transaction tx(*m_db);
        auto length = log_length(attempt);
        if (!length) {
            return length.error();
        }
        if (offset < 0 || offset > *length) {
            Error e = make_error(ErrorCode::conflict,
                                 "log chunk at offset " + std::to_string(offset) + " would leave a gap; expected offset " +
                                     std::to_string(*length),
                                 "offset");
            return e;
        }
        const auto skip = static_cast<std::size_t>(*length - offset);
        if (skip >= data.size()) {
            return LogAppend{0, *length};
        }
        std::string_view fresh = data.substr(skip);
        SQLite::Statement q(*m_db, "INSERT INTO log_chunks (attempt_id, byte_offset, data) VALUES (?, ?, ?)");
        q.bind(1, attempt.value());
        q.bind(2, *length);
        q.bind(3, fresh.data(), static_cast<int>(fresh.size()));
        q.exec();
        tx.commit();
        auto stored = static_cast<std::int64_t>(fresh.size());
        return LogAppend{stored, *length + stored};
    } catch (const std::exception& e) {
        return db_error("log append", e);
    }
}

Status SqliteStore::drop_log_range(AttemptId attempt, std::int64_t from, std::int64_t to) {
    try {
        SQLite::Statement q(*m_db, "DELETE FROM log_chunks WHERE attempt_id = ? AND byte_offset >= ? "
                                   "AND byte_offset + length(data) <= ?");
        q.bind(1, attempt.value());
        q.bind(2, from);
        q.bind(3, to);
        q.exec();
        return {};
    } catch (const std::exception& e) {
        return db_error("log trim", e);
    }
}

Result<std::optional<std::int64_t>> SqliteStore::log_resume_offset(AttemptId attempt, std::int64_t offset) {
    try {
        SQLite::Statement q(*m_db, "SELECT MIN(byte_offset) FROM log_chunks WHERE attempt_id = ? "
                                   "AND byte_offset + length(data) > ?");
        q.bind(1, attempt.value());
        q.bind(2, offset);
        if (!q.executeStep() || q.getColumn(0).isNull()) {
            return std::optional<std::int64_t>();
        }
        return std::optional<std::int64_t>(std::max(offset, q.getColumn(0).getInt64()));
    } catch (const std::exception& e) {
        return db_error("log read", e);
    }
}

Result<std::string> SqliteStore::read_log(AttemptId attempt, std::int64_t offset, std::int64_t max_bytes) {
    try {
        SQLite::Statement q(*m_db, "SELECT byte_offset, data FROM log_chunks WHERE attempt_id = ? "
                                   "AND byte_offset + length(data) > ? ORDER BY byte_offset");
        q.bind(1, attempt.value());
        q.bind(2, offset);
        std::string out;
        while (q.executeStep() && static_cast<std::int64_t>(out.size()) < max_bytes) {
            std::int64_t start = q.getColumn(0).getInt64();
            const auto& col = q.getColumn(1);
            std::string_view chunk(static_cast<const char*>(col.getBlob()), static_cast<std::size_t>(col.getBytes()));
            if (start < offset) {
                chunk.remove_prefix(static_cast<std::size_t>(offset - start));
            }
            out.append(chunk);
        }
        if (static_cast<std::int64_t>(out.size()) > max_bytes) {
            out.resize(static_cast<std::size_t>(max_bytes));
        }
        return out;
    } catch (const std::exception& e) {
        return db_error("log read", e);
    }
}

Status SqliteStore::put_output(AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex) {
    try {
        SQLite::Transaction tx(*m_db);
        const auto size = blob_file_size(file);
        SQLite::Statement q(*m_db, "INSERT INTO outputs (attempt_id, sha256, data) VALUES (?, ?, zeroblob(?)) "
                                   "ON CONFLICT(attempt_id) DO UPDATE SET sha256 = excluded.sha256, data = excluded.data");
        q.bind(1, attempt.value());
        q.bind(2, std::string(sha256_hex));
        q.bind(3, size);
        q.exec();
        write_blob_from_file(*m_db, "outputs", attempt.value(), file, size);
        tx.commit();
        return {};
    } catch (const std::exception& e) {
        return db_error("output upload", e);
    }
}

Result<std::optional<std::string>> SqliteStore::get_output(AttemptId attempt) {
    try {
        SQLite::Statement q(*m_db, "SELECT data FROM outputs WHERE attempt_id = ?");
        q.bind(1, attempt.value());
        return first_blob(q);
    } catch (const std::exception& e) {
        return db_error("output read", e);
    }
}

Status SqliteStore::put_input_blob(TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                                   std::int64_t now) {
    try {
        SQLite::Transaction tx(*m_db);
        const auto size = blob_file_size(file);
        SQLite::Statement q(*m_db, "INSERT INTO team_input_blobs (team_id, sha256, size, data, created_at) "
                                   "VALUES (?, ?, ?, zeroblob(?), ?) ON CONFLICT(team_id, sha256) DO NOTHING");
        q.bind(1, team.value());
        q.bind(2, std::string(sha256_hex));
        q.bind(3, size);
        q.bind(4, size);
        q.bind(5, now);
        if (q.exec() == 0) {
            return {}; // this team has it already
        }
        write_blob_from_file(*m_db, "team_input_blobs", m_db->getLastInsertRowid(), file, size);
        tx.commit();
        return {};
    } catch (const std::exception& e) {
        return db_error("input upload", e);
    }
}

Result<std::optional<std::int64_t>> SqliteStore::input_blob_size(TeamId team, std::string_view sha256_hex) {
    try {
        SQLite::Statement q(*m_db, "SELECT size FROM team_input_blobs WHERE team_id = ? AND sha256 = ?");
        q.bind(1, team.value());
        q.bind(2, std::string(sha256_hex));
        if (!q.executeStep()) {
            return std::optional<std::int64_t>();
        }
        return std::optional<std::int64_t>(q.getColumn(0).getInt64());
    } catch (const std::exception& e) {
        return db_error("input lookup", e);
    }
}

Result<std::optional<std::string>> SqliteStore::get_input_blob(TeamId team, std::string_view sha256_hex) {
    try {
        SQLite::Statement q(*m_db, "SELECT data FROM team_input_blobs WHERE team_id = ? AND sha256 = ?");
        q.bind(1, team.value());
        q.bind(2, std::string(sha256_hex));
        return first_blob(q);
    } catch (const std::exception& e) {
        return db_error("input read", e);
    }
}

} // namespace gpupool::store
