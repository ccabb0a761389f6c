// SqliteStore's rows: each record kind read from and written to its table, one function each.
#include "core/store/sqlite_internal.hpp"

#include "core/recipe/recipe_json.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <array>

namespace gpupool::store::sqlite {

namespace {

// ---- reading -----------------------------------------------------------------------------------

Status load_teams(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, name, weight, created_at, budget_day_micro, budget_week_micro "
                            "FROM teams ORDER BY id");
    while (q.executeStep()) {
        s.teams.push_back({TeamId(q.getColumn(0).getInt64()), q.getColumn(1).getString(),
                           q.getColumn(2).getInt64(), q.getColumn(3).getInt64(), opt_int(q.getColumn(4)),
                           opt_int(q.getColumn(5))});
    }
    return {};
}

Status load_tokens(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, hash, role, team_id, worker_id, label, created_at, revoked_at, "
                            "uses_left, budget_day_micro, budget_week_micro FROM tokens ORDER BY id");
    while (q.executeStep()) {
        TokenRecord t;
        t.id = TokenId(q.getColumn(0).getInt64());
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
    return {};
}

Status load_workers(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, team_id, name, inventory, state, registered_at, last_seen_at, "
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
        if (auto enrolled_by = opt_int(q.getColumn(7))) {
            w.enrolled_by = TokenId(*enrolled_by);
        }
        s.workers.push_back(std::move(w));
    }
    return {};
}

Status load_sweeps(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, team_id, submitter_token_id, source, job_count, max_parallel, "
                            "created_at, idempotency_key FROM sweeps ORDER BY id");
    while (q.executeStep()) {
        s.sweeps.push_back({SweepId(q.getColumn(0).getInt64()), TeamId(q.getColumn(1).getInt64()),
                            TokenId(q.getColumn(2).getInt64()), q.getColumn(3).getString(), q.getColumn(4).getInt64(),
                            q.getColumn(5).getInt64(), q.getColumn(6).getInt64(), q.getColumn(7).getString()});
    }
    return {};
}

Status load_jobs(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, sweep_id, team_id, spec, state, attempts, created_at, updated_at, "
                            "finished_at, exit_code, reason, retries, retry_key FROM jobs ORDER BY id");
    while (q.executeStep()) {
        JobRecord j;
        j.id = JobId(q.getColumn(0).getInt64());
        j.sweep_id = SweepId(q.getColumn(1).getInt64());
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
        j.retries = q.getColumn(11).getInt64();
        j.retry_key = q.getColumn(12).getString();
        s.jobs.push_back(std::move(j));
    }
    return {};
}

Status load_attempts(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, job_id, worker_id, gpu_index, gpu_milli, state, lease_expires_at, "
                            "assigned_at, started_at, ended_at, exit_code, reason, price_micro_per_hour, "
                            "voided_at, retry FROM attempts ORDER BY id");
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
        a.retry = q.getColumn(14).getInt64();
        s.attempts.push_back(std::move(a));
    }
    return {};
}

Status load_ledger(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, at, debit, credit, amount, reason, attempt_id, grant_id, "
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
    return {};
}

Status load_balances(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT account, balance FROM account_balances ORDER BY account");
    while (q.executeStep()) {
        auto account = credits::account_from_string(q.getColumn(0).getString());
        if (!account) {
            return make_error(ErrorCode::io, "database: unknown account `" + q.getColumn(0).getString() + "`");
        }
        s.balances.push_back({*account, q.getColumn(1).getInt64()});
    }
    return {};
}

Status load_grants(SQLite::Database& db, Snapshot& s) {
    SQLite::Statement q(db, "SELECT id, team_id, amount, expires_at, note, created_at, expired_at "
                            "FROM grants ORDER BY id");
    while (q.executeStep()) {
        s.grants.push_back({q.getColumn(0).getInt64(), TeamId(q.getColumn(1).getInt64()),
                            q.getColumn(2).getInt64(), opt_int(q.getColumn(3)), q.getColumn(4).getString(),
                            q.getColumn(5).getInt64(), opt_int(q.getColumn(6))});
    }
    return {};
}

// ---- writing -----------------------------------------------------------------------------------

void write_teams(SQLite::Database& db, const Changes& c) {
    if (c.teams.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO teams (id, name, weight, created_at, budget_day_micro, "
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
void write_workers(SQLite::Database& db, const Changes& c) {
    if (c.workers.empty()) {
        return;
    }
    SQLite::Statement q(db,
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
        bind_opt(q, 8, w.enrolled_by ? std::optional<std::int64_t>(w.enrolled_by->value()) : std::nullopt);
        q.exec();
        q.reset();
    }
}

void write_tokens(SQLite::Database& db, const Changes& c) {
    if (c.tokens.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO tokens (id, hash, role, team_id, worker_id, label, created_at, "
                            "revoked_at, uses_left, budget_day_micro, budget_week_micro) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT(id) DO UPDATE SET "
                            "worker_id = excluded.worker_id, label = excluded.label, "
                            "revoked_at = excluded.revoked_at, uses_left = excluded.uses_left, "
                            "budget_day_micro = excluded.budget_day_micro, "
                            "budget_week_micro = excluded.budget_week_micro");
    for (const auto& t : c.tokens) {
        q.bind(1, t.id.value());
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

void write_sweeps(SQLite::Database& db, const Changes& c) {
    if (c.sweeps.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO sweeps (id, team_id, submitter_token_id, source, job_count, "
                            "max_parallel, created_at, idempotency_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT(id) DO NOTHING");
    for (const auto& s : c.sweeps) {
        q.bind(1, s.id.value());
        q.bind(2, s.team.value());
        q.bind(3, s.submitter_token.value());
        q.bind(4, s.source);
        q.bind(5, s.job_count);
        q.bind(6, s.max_parallel);
        q.bind(7, s.created_at);
        q.bind(8, s.idempotency_key);
        q.exec();
        q.reset();
    }
}

void write_jobs(SQLite::Database& db, const Changes& c) {
    if (c.jobs.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO jobs (id, sweep_id, team_id, spec, state, attempts, created_at, "
                            "updated_at, finished_at, exit_code, reason, retries, retry_key) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT(id) DO UPDATE SET state = excluded.state, attempts = excluded.attempts, "
                            "updated_at = excluded.updated_at, finished_at = excluded.finished_at, "
                            "exit_code = excluded.exit_code, reason = excluded.reason, "
                            "retries = excluded.retries, retry_key = excluded.retry_key");
    for (const auto& j : c.jobs) {
        q.bind(1, j.id.value());
        q.bind(2, j.sweep_id.value());
        q.bind(3, j.team.value());
        q.bind(4, recipe::to_json(j.spec).dump());
        q.bind(5, to_string(j.state));
        q.bind(6, j.attempts);
        q.bind(7, j.created_at);
        q.bind(8, j.updated_at);
        bind_opt(q, 9, j.finished_at);
        bind_opt(q, 10, j.exit_code);
        q.bind(11, j.reason);
        q.bind(12, j.retries);
        q.bind(13, j.retry_key);
        q.exec();
        q.reset();
    }
}

void write_attempts(SQLite::Database& db, const Changes& c) {
    if (c.attempts.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO attempts (id, job_id, worker_id, gpu_index, gpu_milli, state, "
                            "lease_expires_at, assigned_at, started_at, ended_at, exit_code, reason, "
                            "price_micro_per_hour, voided_at, retry) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
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
        q.bind(15, a.retry);
        q.exec();
        q.reset();
    }
}

void write_grants(SQLite::Database& db, const Changes& c) {
    if (c.grants.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO grants (id, team_id, amount, expires_at, note, created_at, "
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

void write_ledger(SQLite::Database& db, const Changes& c) {
    if (c.ledger.empty()) {
        return;
    }
    // Plain INSERT: an entry is written once and never changed.
    SQLite::Statement q(db, "INSERT INTO ledger_entries (id, at, debit, credit, amount, reason, attempt_id, "
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

void write_balances(SQLite::Database& db, const Changes& c) {
    if (c.balances.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO account_balances (account, balance) VALUES (?, ?) "
                            "ON CONFLICT(account) DO UPDATE SET balance = excluded.balance");
    for (const auto& b : c.balances) {
        q.bind(1, credits::to_string(b.account));
        q.bind(2, b.balance);
        q.exec();
        q.reset();
    }
}

// Appended without an id: SQLite numbers the rows in the order they are written.
void write_audit(SQLite::Database& db, const Changes& c) {
    if (c.audit.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO audit_log (at, token_id, action, target, detail) VALUES (?, ?, ?, ?, ?)");
    for (const auto& a : c.audit) {
        q.bind(1, a.at_ms);
        bind_opt(q, 2, a.actor ? std::optional<std::int64_t>(a.actor->value()) : std::nullopt);
        q.bind(3, a.action);
        q.bind(4, a.target);
        q.bind(5, a.detail);
        q.exec();
        q.reset();
    }
}

// Appended like the audit log: numbered by SQLite in the order written.
void write_samples(SQLite::Database& db, const Changes& c) {
    if (c.samples.empty()) {
        return;
    }
    SQLite::Statement q(db, "INSERT INTO pool_samples (at, workers_online, gpus_online, gpu_milli_online, "
                            "gpu_milli_allocated, jobs_queued, jobs_running) VALUES (?, ?, ?, ?, ?, ?, ?)");
    for (const auto& x : c.samples) {
        q.bind(1, x.at_ms);
        q.bind(2, x.workers_online);
        q.bind(3, x.gpus_online);
        q.bind(4, x.gpu_milli_online);
        q.bind(5, x.gpu_milli_allocated);
        q.bind(6, x.jobs_queued);
        q.bind(7, x.jobs_running);
        q.exec();
        q.reset();
    }
}

} // namespace

Result<Snapshot> load_records(SQLite::Database& db) {
    using Loader = Status (*)(SQLite::Database&, Snapshot&);
    constexpr std::array<Loader, 9> k_loaders{load_teams, load_tokens, load_workers, load_sweeps, load_jobs,
                                              load_attempts, load_ledger, load_balances, load_grants};
    Snapshot s;
    for (Loader load : k_loaders) {
        if (auto st = load(db, s); !st) {
            return st.error();
        }
    }
    return s;
}

void write_records(SQLite::Database& db, const Changes& c) {
    // In the order the foreign keys need: teams, then workers (worker tokens name them), ...
    using Writer = void (*)(SQLite::Database&, const Changes&);
    constexpr std::array<Writer, 11> k_writers{write_teams,    write_workers,  write_tokens, write_sweeps,
                                               write_jobs,     write_attempts, write_grants, write_ledger,
                                               write_balances, write_audit,    write_samples};
    for (Writer write : k_writers) {
        write(db, c);
    }
}

} // namespace gpupool::store::sqlite
