// The admin's operations on teams and tokens (admin_ops.hpp): each checks the caller, stages
// through the TokenBook, audits and commits through the Coordinator.
#include "core/coordinator/admin_ops.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_ops.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

// An admin token made on the coordinator's own machine (no token acted: the audit's actor is none).
Result<IssuedToken> issue_admin(Coordinator& pool, const std::string& label, const std::string& action) {
    Changes c;
    auto tok = issue_token(pool, Role::admin, std::nullopt, std::nullopt, label, c);
    if (!tok) {
        return tok;
    }
    pool.audit(std::nullopt, action, "token " + std::to_string(tok->id.value()),
               nlohmann::json{{"label", label}}.dump(), c);
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return tok;
}

} // namespace

Result<IssuedToken> detail::issue_token(Coordinator& pool, Role role, std::optional<TeamId> team,
                                        std::optional<WorkerId> worker, const std::string& label, Changes& changes) {
    auto id = pool.take_ids(store::IdKind::token, 1);
    if (!id) {
        return id.error();
    }
    return TokenBook::stage_token(TokenId(*id), role, team, worker, label, pool.now_ms(), changes);
}

Result<IssuedToken> init_admin(Coordinator& pool) {
    if (pool.tokens().has_admin()) {
        return make_error(ErrorCode::conflict, "the pool already has an admin token");
    }
    return issue_admin(pool, "first admin", "token.first_admin");
}

Result<IssuedToken> recover_admin(Coordinator& pool, const std::string& label) {
    return issue_admin(pool, label, "token.recover_admin");
}

Result<TeamRecord> create_team(Coordinator& pool, const Principal& who, const std::string& name, std::int64_t weight) {
    if (who.role != Role::admin) {
        return denied("only admins create teams");
    }
    if (auto st = pool.tokens().check_new_team(name, weight); !st) {
        return st.error();
    }
    auto id = pool.take_ids(store::IdKind::team, 1);
    if (!id) {
        return id.error();
    }
    Changes c;
    TeamRecord t{TeamId(*id), name, weight, pool.now_ms(), std::nullopt, std::nullopt};
    c.teams.push_back(t);
    pool.audit(who.token_id, "team.create", "team `" + name + "`",
               nlohmann::json{{"id", t.id.value()}, {"weight", weight}}.dump(), c);
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return t;
}

Result<std::vector<TeamRecord>> list_teams(const Coordinator& pool, const Principal& who) {
    std::vector<TeamRecord> out;
    for (const auto& [id, t] : pool.tokens().teams()) {
        if (who.role == Role::admin || (who.team && *who.team == id)) {
            out.push_back(t);
        }
    }
    return out;
}

Result<IssuedToken> create_token(Coordinator& pool, const Principal& who, Role role, const std::string& team,
                                 const std::string& label, std::int64_t uses) {
    if (who.role != Role::admin) {
        return denied("only admins create tokens");
    }
    if (uses < 1 || uses > k_max_enroll_uses) {
        return invalid("an enrollment token registers 1 to " + std::to_string(k_max_enroll_uses) + " workers", "uses");
    }
    if (label.size() > k_max_label_chars) {
        return invalid("labels are at most " + std::to_string(k_max_label_chars) + " characters", "label");
    }
    if (role == Role::worker) {
        return invalid("worker tokens are issued when a worker registers with an enrollment token", "role");
    }
    std::optional<TeamId> team_id;
    if (role != Role::admin) {
        auto named = pool.tokens().team_named(team);
        if (!named) {
            return named.error();
        }
        team_id = *named;
    }
    Changes c;
    auto tok = issue_token(pool, role, team_id, std::nullopt, label, c);
    if (!tok) {
        return tok;
    }
    if (role == Role::enroll) {
        c.tokens.back().uses_left = uses;
    }
    nlohmann::json detail{{"role", to_string(role)}, {"label", label}};
    if (team_id) {
        detail["team"] = team;
    }
    if (role == Role::enroll) {
        detail["uses"] = uses;
    }
    pool.audit(who.token_id, "token.create", "token " + std::to_string(tok->id.value()), detail.dump(), c);
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return tok;
}

Status revoke_token(Coordinator& pool, const Principal& who, TokenId token_id) {
    if (who.role != Role::admin) {
        return denied("only admins revoke tokens");
    }
    Changes c;
    auto revoked = pool.tokens().stage_revoke(token_id, pool.now_ms(), c);
    if (!revoked) {
        return revoked.error();
    }
    nlohmann::json detail{{"role", to_string(revoked->role)}, {"label", revoked->label}};
    if (revoked->team) {
        detail["team"] = pool.tokens().team_name(*revoked->team);
    }
    if (revoked->worker) {
        detail["worker"] = revoked->worker->value();
    }
    pool.audit(who.token_id, "token.revoke", "token " + std::to_string(token_id.value()), detail.dump(), c);
    return pool.commit(c);
}

Result<std::vector<TokenRecord>> list_tokens(const Coordinator& pool, const Principal& who,
                                             const std::optional<std::string>& team) {
    if (who.role != Role::admin) {
        return denied("only admins list tokens");
    }
    std::optional<TeamId> only;
    if (team) {
        auto t = pool.tokens().team_named(*team);
        if (!t) {
            return t.error();
        }
        only = *t;
    }
    return pool.tokens().listed(only);
}

Result<std::vector<WorkerRecord>> list_workers(const Coordinator& pool, const Principal& who) {
    if (who.role != Role::admin && who.role != Role::member) {
        return denied("workers are listed by admins and team members");
    }
    std::vector<WorkerRecord> out;
    for (const auto& [id, w] : pool.roster().workers()) {
        if (who.role == Role::admin || (who.team && *who.team == w.record.team)) {
            out.push_back(w.record);
        }
    }
    return out;
}

Status record_audit(Coordinator& pool, const Principal& who, const std::string& action, const std::string& target,
                    const std::string& detail_json) {
    if (who.role != Role::admin) {
        return denied("only admins act on the pool");
    }
    Changes c;
    pool.audit(who.token_id, action, target, detail_json, c);
    return pool.commit(c);
}

// ---- workers ----

namespace {

// The worker's new state (a ban also revokes its enrollment token and ends its attempts as lost).
void worker_state_changes(const Coordinator& pool, WorkerId worker, WorkerState state, Changes& c) {
    WorkerRecord w = pool.roster().at(worker).record;
    w.state = state;
    c.workers.push_back(w);
    if (state == WorkerState::banned) {
        // The ban sticks to the owner: the enrollment token the worker came in with is revoked, so
        // registering again with it fails.
        if (w.enrolled_by) {
            const TokenRecord* enrollment = pool.tokens().token(*w.enrolled_by);
            const bool staged = std::any_of(c.tokens.begin(), c.tokens.end(), [&](const TokenRecord& t) {
                return t.id == *w.enrolled_by; // revoked already for a sibling banned in the same changes
            });
            if (enrollment != nullptr && !enrollment->revoked_at && !staged) {
                TokenRecord revoked = *enrollment;
                revoked.revoked_at = pool.now_ms();
                c.tokens.push_back(revoked);
            }
        }
        for (AttemptId id : pool.job_book().active()) {
            const AttemptRecord& a = pool.job_book().attempts().at(id);
            if (a.worker == worker) {
                AttemptRecord copy = a;
                end_attempt(pool, copy, AttemptState::lost, std::nullopt, "worker banned", c);
            }
        }
    }
}

// Voids what `worker` reported for attempts that ended at or after `since_ms` (ban_worker).
void void_results(const Coordinator& pool, WorkerId worker, std::int64_t since_ms, Voided& out, Changes& c) {
    const std::int64_t now = pool.now_ms();
    const std::string note = "voided: worker " + std::to_string(worker.value()) + " was banned";
    for (const auto& [id, attempt] : pool.job_book().attempts()) {
        if (attempt.worker != worker || !attempt.ended_at || *attempt.ended_at < since_ms || attempt.voided_at ||
            attempt.state == AttemptState::lost) {
            continue;
        }
        AttemptRecord a = attempt;
        a.voided_at = now;
        c.attempts.push_back(a);
        out.attempts.push_back(id);
        auto refunds =
            pool.credit_desk().ledger().refund_entries(pool.credit_desk().next_entry_id(c), now, id.value(), note);
        for (const auto& e : refunds) {
            out.refunded_micro += e.amount;
        }
        c.ledger.insert(c.ledger.end(), refunds.begin(), refunds.end());
        // The job's outcome came from this attempt: it runs again.
        JobRecord job = pool.job_book().jobs().at(a.job);
        if (pool.job_book().latest_attempt().at(a.job) == id &&
            (job.state == JobState::succeeded || job.state == JobState::failed)) {
            job.state = JobState::queued;
            job.finished_at.reset();
            job.exit_code.reset();
            job.updated_at = now;
            job.reason = "the result of attempt " + std::to_string(id.value()) + " was voided (worker " +
                         std::to_string(worker.value()) + " was banned); queued to run again";
            c.jobs.push_back(std::move(job));
            out.requeued.push_back(a.job);
        }
    }
}

// One worker's part of ban_worker: its results voided, the audit record, the ban (`named`: the
// worker the admin named, when this one is its sibling).
void stage_ban(const Coordinator& pool, const Principal& who, WorkerId worker, std::optional<std::int64_t> void_since,
               std::optional<WorkerId> named, Voided& out, Changes& c) {
    const std::size_t voided_before = out.attempts.size();
    const std::int64_t refunded_before = out.refunded_micro;
    const std::size_t requeued_before = out.requeued.size();
    if (void_since) {
        // Before the ban ends the worker's running attempts (as lost: nothing to void in them).
        void_results(pool, worker, *void_since, out, c);
    }
    const WorkerRecord& w = pool.roster().at(worker).record;
    nlohmann::json detail{{"from", to_string(w.state)}};
    if (void_since) {
        detail["void_since"] = *void_since;
        detail["voided_attempts"] = out.attempts.size() - voided_before;
        detail["refunded_micro"] = out.refunded_micro - refunded_before;
        detail["requeued_jobs"] = out.requeued.size() - requeued_before;
    }
    if (named) {
        detail["sibling_of"] = named->value(); // enrolled with the same token as the worker named
    }
    pool.audit(who.token_id, "worker.ban", worker_target(w), detail.dump(), c);
    worker_state_changes(pool, worker, WorkerState::banned, c);
    out.banned.push_back(worker);
}

} // namespace

Status set_worker_state(Coordinator& pool, const Principal& who, WorkerId worker, WorkerState state) {
    if (who.role != Role::admin) {
        return denied("only admins drain or ban workers");
    }
    if (pool.roster().find(worker) == nullptr) {
        return not_found("no worker " + std::to_string(worker.value()));
    }
    Changes c;
    const WorkerRecord& w = pool.roster().at(worker).record;
    pool.audit(who.token_id, state == WorkerState::active ? "worker.activate" : "worker.drain", worker_target(w),
               nlohmann::json{{"from", to_string(w.state)}, {"to", to_string(state)}}.dump(), c);
    worker_state_changes(pool, worker, state, c);
    return pool.commit(c);
}

Result<Voided> ban_worker(Coordinator& pool, const Principal& who, WorkerId worker,
                          std::optional<std::int64_t> void_since, bool with_siblings) {
    if (who.role != Role::admin) {
        return denied("only admins drain or ban workers");
    }
    if (pool.roster().find(worker) == nullptr) {
        return not_found("no worker " + std::to_string(worker.value()));
    }
    Voided out;
    const std::vector<WorkerId> siblings = pool.roster().enrolled_with(worker);
    Changes c;
    stage_ban(pool, who, worker, void_since, std::nullopt, out, c);
    if (with_siblings) {
        for (WorkerId sibling : siblings) {
            stage_ban(pool, who, sibling, void_since, worker, out, c);
        }
    }
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    for (WorkerId sibling : siblings) {
        out.siblings.push_back(pool.roster().at(sibling).record);
    }
    return out;
}

} // namespace gpupool::coordinator
