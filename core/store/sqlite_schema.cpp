// SqliteStore's schema: the migrations from version 0 (an empty file) to k_schema_version, applied
// forward on open, each in its own transaction with the PRAGMA user_version it reaches.
#include "core/store/sqlite_internal.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <array>
#include <string>

namespace gpupool::store::sqlite {

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
    // 6 -> 7: the audit log of admin actions (issue #16), appended in the action's own transaction.
    R"sql(
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    token_id INTEGER,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_log_at ON audit_log(at);
)sql",
    // 7 -> 8: the coordinator's samples of the pool for the dashboard's chart (issue #16), a day of them.
    R"sql(
CREATE TABLE pool_samples (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    workers_online INTEGER NOT NULL,
    gpus_online INTEGER NOT NULL,
    gpu_milli_online INTEGER NOT NULL,
    gpu_milli_allocated INTEGER NOT NULL,
    jobs_queued INTEGER NOT NULL,
    jobs_running INTEGER NOT NULL
);
CREATE INDEX pool_samples_at ON pool_samples(at);
)sql",
    // 9: ids come from the store (Store::reserve_ids): the next id of each kind not yet handed out.
    R"sql(
CREATE TABLE id_counters (
    kind TEXT PRIMARY KEY,
    next INTEGER NOT NULL
);
)sql",
    // 9 -> 10: a failed or cancelled job can be retried (`gpupool retry`): the job counts its retries
    // and keeps its latest retry's idempotency key; each attempt says which run of its job it was.
    R"sql(
ALTER TABLE jobs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN retry_key TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN retry INTEGER NOT NULL DEFAULT 0;
)sql",
    // 10 -> 11: each attempt's evidence (issue 43): what its worker ran, its outputs' listing, a spot
    // check's verdict, read one attempt at a time.
    R"sql(
CREATE TABLE attempt_evidence (
    attempt_id INTEGER NOT NULL REFERENCES attempts(id),
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (attempt_id, kind)
);
)sql",
    // 11 -> 12: spot checks (issue 43): each worker's record of checks, and a check job names the
    // attempt it runs again (and, for a tie-break, the check it settles against).
    R"sql(
ALTER TABLE workers ADD COLUMN checks_agreed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN checks_disagreed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN check_of INTEGER;
ALTER TABLE jobs ADD COLUMN check_against INTEGER;
)sql",
};

// Version 4 first shipped without the sweeps' idempotency key (454bb39); the key was then added to
// the same migration (5e8dfc7), so a file made in between is at version 4 or later without the
// column. Adds it where it is missing; a no-op everywhere else.
void add_missing_idempotency_key(SQLite::Database& db) {
    SQLite::Statement columns(db, "SELECT COUNT(*) FROM pragma_table_info('sweeps') WHERE name = 'idempotency_key'");
    if (columns.executeStep() && columns.getColumn(0).getInt() == 0) {
        SQLite::Transaction tx(db);
        db.exec("ALTER TABLE sweeps ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT ''");
        tx.commit();
    }
}

} // namespace

int schema_version(SQLite::Database& db) { return db.execAndGet("PRAGMA user_version").getInt(); }

Status migrate(SQLite::Database& db) {
    try {
        int version = schema_version(db);
        if (version > k_schema_version) {
            return make_error(ErrorCode::io, "database schema version " + std::to_string(version) +
                                                 " is newer than this gpupool understands (" +
                                                 std::to_string(k_schema_version) + "); upgrade gpupool");
        }
        for (int v = version; v < k_schema_version; ++v) {
            SQLite::Transaction tx(db);
            db.exec(k_migrations.at(static_cast<std::size_t>(v)));
            db.exec("PRAGMA user_version = " + std::to_string(v + 1));
            tx.commit();
        }
        add_missing_idempotency_key(db);
        return {};
    } catch (const std::exception& e) {
        return db_error("migration failed", e);
    }
}

} // namespace gpupool::store::sqlite
