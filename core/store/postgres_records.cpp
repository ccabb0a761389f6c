// PostgresStore's rows: each record kind read from and written to its table, one function each, with
// the same upsert rules as SQLite's (sqlite_records.cpp).
#include "core/recipe/recipe_json.hpp"
#include "core/store/postgres_internal.hpp"

#include <array>

namespace gpupool::store::pg {

namespace {

std::optional<std::int64_t> id_or_null(std::int64_t id) {
    return id != 0 ? std::optional<std::int64_t>(id) : std::nullopt;
}

template <class Id>
std::optional<std::int64_t> opt_id(const std::optional<Id>& id) {
    return id ? std::optional<std::int64_t>(id->value()) : std::nullopt;
}

// ---- reading -----------------------------------------------------------------------------------

void load_teams(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, name, weight, created_at, budget_day_micro, budget_week_micro FROM teams ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        s.teams.push_back(
            {TeamId(q.integer(0)), q.text(1), q.integer(2), q.integer(3), q.opt_integer(4), q.opt_integer(5)});
    }
}

void load_tokens(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, hash, role, team_id, worker_id, label, created_at, revoked_at, uses_left, "
                     "budget_day_micro, budget_week_micro FROM tokens ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        TokenRecord t;
        t.id = TokenId(q.integer(0));
        t.hash = q.text(1);
        t.role = role_from_string(q.text(2)).value_or(Role::member);
        if (auto team = q.opt_integer(3)) {
            t.team = TeamId(*team);
        }
        if (auto worker = q.opt_integer(4)) {
            t.worker = WorkerId(*worker);
        }
        t.label = q.text(5);
        t.created_at = q.integer(6);
        t.revoked_at = q.opt_integer(7);
        t.uses_left = q.opt_integer(8);
        t.budget_day_micro = q.opt_integer(9);
        t.budget_week_micro = q.opt_integer(10);
        s.tokens.push_back(std::move(t));
    }
}

void load_workers(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, team_id, name, inventory, state, registered_at, last_seen_at, enrolled_by "
                     "FROM workers ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        WorkerRecord w;
        w.id = WorkerId(q.integer(0));
        w.team = TeamId(q.integer(1));
        w.name = q.text(2);
        w.inventory_json = q.text(3);
        w.state = worker_state_from_string(q.text(4)).value_or(WorkerState::active);
        w.registered_at = q.integer(5);
        w.last_seen_at = q.integer(6);
        if (auto enrolled_by = q.opt_integer(7)) {
            w.enrolled_by = TokenId(*enrolled_by);
        }
        s.workers.push_back(std::move(w));
    }
}

void load_sweeps(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, team_id, submitter_token_id, source, job_count, max_parallel, created_at, "
                     "idempotency_key FROM sweeps ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        s.sweeps.push_back({SweepId(q.integer(0)), TeamId(q.integer(1)), TokenId(q.integer(2)), q.text(3), q.integer(4),
                            q.integer(5), q.integer(6), q.text(7)});
    }
}

void load_jobs(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, sweep_id, team_id, spec, state, attempts, created_at, updated_at, finished_at, "
                     "exit_code, reason, retries, retry_key FROM jobs ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        JobRecord j;
        j.id = JobId(q.integer(0));
        j.sweep_id = SweepId(q.integer(1));
        j.team = TeamId(q.integer(2));
        auto spec = recipe::job_from_json(nlohmann::json::parse(q.text(3)));
        if (!spec) {
            throw Failure(make_error(ErrorCode::io, "job " + std::to_string(j.id.value()) +
                                                        " has an unreadable spec: " + spec.error().describe()));
        }
        j.spec = std::move(*spec);
        j.state = job_state_from_string(q.text(4)).value_or(JobState::queued);
        j.attempts = q.integer(5);
        j.created_at = q.integer(6);
        j.updated_at = q.integer(7);
        j.finished_at = q.opt_integer(8);
        j.exit_code = q.opt_integer(9);
        j.reason = q.text(10);
        j.retries = q.integer(11);
        j.retry_key = q.text(12);
        s.jobs.push_back(std::move(j));
    }
}

void load_attempts(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, job_id, worker_id, gpu_index, gpu_milli, state, lease_expires_at, assigned_at, "
                     "started_at, ended_at, exit_code, reason, price_micro_per_hour, voided_at, retry "
                     "FROM attempts ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        AttemptRecord a;
        a.id = AttemptId(q.integer(0));
        a.job = JobId(q.integer(1));
        a.worker = WorkerId(q.integer(2));
        a.gpu_index = q.integer(3);
        a.gpu_milli = q.integer(4);
        a.state = attempt_state_from_string(q.text(5)).value_or(AttemptState::lost);
        a.lease_expires_at = q.integer(6);
        a.assigned_at = q.integer(7);
        a.started_at = q.opt_integer(8);
        a.ended_at = q.opt_integer(9);
        a.exit_code = q.opt_integer(10);
        a.reason = q.text(11);
        a.price_micro_per_hour = q.integer(12);
        a.voided_at = q.opt_integer(13);
        a.retry = q.integer(14);
        s.attempts.push_back(std::move(a));
    }
}

void load_ledger(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, at, debit, credit, amount, reason, attempt_id, grant_id, payer_team_id, note "
                     "FROM ledger_entries ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        LedgerEntry e;
        e.id = q.integer(0);
        e.at_ms = q.integer(1);
        auto debit = credits::account_from_string(q.text(2));
        auto credit = credits::account_from_string(q.text(3));
        auto reason = credits::entry_reason_from_string(q.text(5));
        if (!debit || !credit || !reason) {
            throw Failure(make_error(ErrorCode::io,
                                     "ledger entry " + std::to_string(e.id) + " names an unknown account or reason"));
        }
        e.debit = *debit;
        e.credit = *credit;
        e.amount = q.integer(4);
        e.reason = *reason;
        e.attempt = q.opt_integer(6).value_or(0);
        e.grant = q.opt_integer(7).value_or(0);
        e.payer = q.opt_integer(8).value_or(0);
        e.note = q.text(9);
        s.ledger.push_back(std::move(e));
    }
}

void load_balances(Connection& db, Snapshot& s) {
    // COLLATE "C": the order of the accounts' names byte by byte, as SQLite sorts them.
    Rows r = db.exec("SELECT account, balance FROM account_balances ORDER BY account COLLATE \"C\"");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        auto account = credits::account_from_string(q.text(0));
        if (!account) {
            throw Failure(make_error(ErrorCode::io, "unknown account `" + q.text(0) + "`"));
        }
        s.balances.push_back({*account, q.integer(1)});
    }
}

void load_grants(Connection& db, Snapshot& s) {
    Rows r = db.exec("SELECT id, team_id, amount, expires_at, note, created_at, expired_at FROM grants ORDER BY id");
    for (int i = 0; i < row_count(r); ++i) {
        const Row q(r.get(), i);
        s.grants.push_back({q.integer(0), TeamId(q.integer(1)), q.integer(2), q.opt_integer(3), q.text(4), q.integer(5),
                            q.opt_integer(6)});
    }
}

// ---- writing -----------------------------------------------------------------------------------

void write_teams(Connection& db, const Changes& c) {
    for (const auto& t : c.teams) {
        db.exec("INSERT INTO teams (id, name, weight, created_at, budget_day_micro, budget_week_micro) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET name = excluded.name, "
                "weight = excluded.weight, budget_day_micro = excluded.budget_day_micro, "
                "budget_week_micro = excluded.budget_week_micro",
                params(t.id.value(), t.name, t.weight, t.created_at, t.budget_day_micro, t.budget_week_micro));
    }
}

// Workers before tokens: worker tokens reference them.
void write_workers(Connection& db, const Changes& c) {
    for (const auto& w : c.workers) {
        db.exec("INSERT INTO workers (id, team_id, name, inventory, state, registered_at, last_seen_at, enrolled_by) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE SET name = excluded.name, "
                "inventory = excluded.inventory, state = excluded.state, last_seen_at = excluded.last_seen_at",
                params(w.id.value(), w.team.value(), w.name, w.inventory_json, std::string_view(to_string(w.state)),
                       w.registered_at, w.last_seen_at, opt_id(w.enrolled_by)));
    }
}

void write_tokens(Connection& db, const Changes& c) {
    for (const auto& t : c.tokens) {
        db.exec("INSERT INTO tokens (id, hash, role, team_id, worker_id, label, created_at, revoked_at, uses_left, "
                "budget_day_micro, budget_week_micro) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
                "ON CONFLICT (id) DO UPDATE SET worker_id = excluded.worker_id, label = excluded.label, "
                "revoked_at = excluded.revoked_at, uses_left = excluded.uses_left, "
                "budget_day_micro = excluded.budget_day_micro, budget_week_micro = excluded.budget_week_micro",
                params(t.id.value(), t.hash, std::string_view(to_string(t.role)), opt_id(t.team), opt_id(t.worker),
                       t.label, t.created_at, t.revoked_at, t.uses_left, t.budget_day_micro, t.budget_week_micro));
    }
}

void write_sweeps(Connection& db, const Changes& c) {
    for (const auto& s : c.sweeps) {
        db.exec("INSERT INTO sweeps (id, team_id, submitter_token_id, source, job_count, max_parallel, created_at, "
                "idempotency_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
                params(s.id.value(), s.team.value(), s.submitter_token.value(), s.source, s.job_count, s.max_parallel,
                       s.created_at, s.idempotency_key));
    }
}

void write_jobs(Connection& db, const Changes& c) {
    for (const auto& j : c.jobs) {
        db.exec(
            "INSERT INTO jobs (id, sweep_id, team_id, spec, state, attempts, created_at, updated_at, finished_at, "
            "exit_code, reason, retries, retry_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) "
            "ON CONFLICT (id) DO UPDATE SET state = excluded.state, attempts = excluded.attempts, "
            "updated_at = excluded.updated_at, finished_at = excluded.finished_at, "
            "exit_code = excluded.exit_code, reason = excluded.reason, retries = excluded.retries, "
            "retry_key = excluded.retry_key",
            params(j.id.value(), j.sweep_id.value(), j.team.value(), recipe::to_json(j.spec).dump(),
                   std::string_view(to_string(j.state)), j.attempts, j.created_at, j.updated_at, j.finished_at,
                   j.exit_code, j.reason, j.retries, j.retry_key));
    }
}

void write_attempts(Connection& db, const Changes& c) {
    for (const auto& a : c.attempts) {
        db.exec(
            "INSERT INTO attempts (id, job_id, worker_id, gpu_index, gpu_milli, state, lease_expires_at, "
            "assigned_at, started_at, ended_at, exit_code, reason, price_micro_per_hour, voided_at, retry) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT (id) DO UPDATE SET "
            "state = excluded.state, lease_expires_at = excluded.lease_expires_at, "
            "started_at = excluded.started_at, ended_at = excluded.ended_at, exit_code = excluded.exit_code, "
            "reason = excluded.reason, voided_at = excluded.voided_at",
            params(a.id.value(), a.job.value(), a.worker.value(), a.gpu_index, a.gpu_milli,
                   std::string_view(to_string(a.state)), a.lease_expires_at, a.assigned_at, a.started_at, a.ended_at,
                   a.exit_code, a.reason, a.price_micro_per_hour, a.voided_at, a.retry));
    }
}

void write_grants(Connection& db, const Changes& c) {
    for (const auto& g : c.grants) {
        db.exec("INSERT INTO grants (id, team_id, amount, expires_at, note, created_at, expired_at) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO UPDATE SET expired_at = excluded.expired_at",
                params(g.id, g.team.value(), g.amount, g.expires_at, g.note, g.created_at, g.expired_at));
    }
}

// Plain INSERT: an entry is written once and never changed (an id that exists fails the apply).
void write_ledger(Connection& db, const Changes& c) {
    for (const auto& e : c.ledger) {
        db.exec("INSERT INTO ledger_entries (id, at, debit, credit, amount, reason, attempt_id, grant_id, "
                "payer_team_id, note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                params(e.id, e.at_ms, credits::to_string(e.debit), credits::to_string(e.credit), e.amount,
                       std::string_view(credits::to_string(e.reason)), id_or_null(e.attempt), id_or_null(e.grant),
                       id_or_null(e.payer), e.note));
    }
}

void write_balances(Connection& db, const Changes& c) {
    for (const auto& b : c.balances) {
        db.exec("INSERT INTO account_balances (account, balance) VALUES ($1, $2) "
                "ON CONFLICT (account) DO UPDATE SET balance = excluded.balance",
                params(credits::to_string(b.account), b.balance));
    }
}

// Appended without an id: the identity numbers the rows in the order they are written.
void write_audit(Connection& db, const Changes& c) {
    for (const auto& a : c.audit) {
        db.exec("INSERT INTO audit_log (at, token_id, action, target, detail) VALUES ($1, $2, $3, $4, $5)",
                params(a.at_ms, opt_id(a.actor), a.action, a.target, a.detail));
    }
}

void write_samples(Connection& db, const Changes& c) {
    for (const auto& x : c.samples) {
        db.exec("INSERT INTO pool_samples (at, workers_online, gpus_online, gpu_milli_online, gpu_milli_allocated, "
                "jobs_queued, jobs_running) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                params(x.at_ms, x.workers_online, x.gpus_online, x.gpu_milli_online, x.gpu_milli_allocated,
                       x.jobs_queued, x.jobs_running));
    }
}

} // namespace

Snapshot load_records(Connection& db) {
    using Loader = void (*)(Connection&, Snapshot&);
    constexpr std::array<Loader, 9> k_loaders{load_teams,    load_tokens, load_workers,  load_sweeps, load_jobs,
                                              load_attempts, load_ledger, load_balances, load_grants};
    Snapshot s;
    for (Loader load : k_loaders) {
        load(db, s);
    }
    return s;
}

void write_records(Connection& db, const Changes& c) {
    // In the order the foreign keys need: teams, then workers (worker tokens name them), ...
    using Writer = void (*)(Connection&, const Changes&);
    constexpr std::array<Writer, 11> k_writers{write_teams,    write_workers,  write_tokens, write_sweeps,
                                               write_jobs,     write_attempts, write_grants, write_ledger,
                                               write_balances, write_audit,    write_samples};
    for (Writer write : k_writers) {
        write(db, c);
    }
}

} // namespace gpupool::store::pg
