// The admin's operations on teams, tokens and workers: the first admin, teams, member and enrollment
// tokens, revocation, the lists an admin reads, draining and banning workers (with the voiding of
// their results), and audit records of actions that change no record.
//
// Free functions over the Coordinator's components, not members of it: each checks the caller,
// asks the components (the TokenBook, token_book.hpp; for a ban also the JobBook and the
// CreditDesk) to validate and stage its records, appends the audit record and commits through
// Coordinator::commit, the one way the pool's state changes; on any refusal nothing is written. Each runs on the
// coordinator's thread, as the Coordinator's own methods do. Every change is audited in the same transaction (audit.cpp
// lists the actions).
#pragma once

#include "core/coordinator/token_book.hpp"
#include "core/coordinator/views.hpp"
#include "core/store/records.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::coordinator {

class Coordinator;

// Creates the first admin token; refused (conflict) once an admin exists.
Result<IssuedToken> init_admin(Coordinator& pool);
// Creates another admin token whatever exists (the recovery for a lost one; only reachable by
// whoever can open the database file).
Result<IssuedToken> recover_admin(Coordinator& pool, const std::string& label = "recovered admin");

// Admin: a team with a unique name and a fair-share weight (TokenBook::check_new_team's rules).
Result<store::TeamRecord> create_team(Coordinator& pool, const Principal& who, const std::string& name,
                                      std::int64_t weight);
// Every team for an admin; a member's or a worker's own team for them.
Result<std::vector<store::TeamRecord>> list_teams(const Coordinator& pool, const Principal& who);
// Admin: role member/admin/enroll; `team` by name for member and enroll. `uses`: how many workers
// an enrollment token may register (ignored for other roles); the last registration revokes it.
// Worker tokens are issued by registration only.
Result<IssuedToken> create_token(Coordinator& pool, const Principal& who, Role role, const std::string& team,
                                 const std::string& label, std::int64_t uses = 1);
Status revoke_token(Coordinator& pool, const Principal& who, TokenId token_id);
// Admin: tokens (their secrets are never stored), oldest first; `team` narrows to one team's.
Result<std::vector<store::TokenRecord>> list_tokens(const Coordinator& pool, const Principal& who,
                                                    const std::optional<std::string>& team);
// Admins see every worker, members their team's; other roles are refused.
Result<std::vector<store::WorkerRecord>> list_workers(const Coordinator& pool, const Principal& who);
// Admin: drains a worker (no new work; its running attempts go on) or makes it active again.
Status set_worker_state(Coordinator& pool, const Principal& who, WorkerId worker, store::WorkerState state);
// Admin: bans the worker (its running attempts end lost, uncharged) and, with `void_since`, voids
// every result it reported for attempts that ended at or after that time (lost attempts reported
// nothing): each is marked voided, its charge and fee go back to the team that paid (from the
// owner's settling earnings, or from its balance once paid out), and a job whose outcome it was
// (succeeded or failed) is queued to run again; voided attempts do not count against
// retry.max_attempts. One transaction. Banning again with an earlier time voids what is left.
// The ban revokes the enrollment token the worker registered with, which stops new registrations
// but not the other workers that token registered (its siblings, listed in the answer): with
// `with_siblings` they are banned too, in the same transaction, each as the named one (their
// results since `void_since` voided as well).
Result<Voided> ban_worker(Coordinator& pool, const Principal& who, WorkerId worker,
                          std::optional<std::int64_t> void_since, bool with_siblings = false);
// Admin: records an action that changes no record (a backup was taken).
Status record_audit(Coordinator& pool, const Principal& who, const std::string& action, const std::string& target,
                    const std::string& detail_json);

namespace detail {
// A new token: its id from the coordinator's block, its record staged in `changes` (TokenBook::
// stage_token); nothing is written until they are committed. Registration issues worker tokens.
Result<IssuedToken> issue_token(Coordinator& pool, Role role, std::optional<TeamId> team,
                                std::optional<WorkerId> worker, const std::string& label, store::Changes& changes);
} // namespace detail

} // namespace gpupool::coordinator
