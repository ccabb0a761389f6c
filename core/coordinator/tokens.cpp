// Authentication, tokens and teams: who may call the coordinator, as what. The Coordinator's
// methods here check the caller and write; the records and their rules are the TokenBook's
// (token_book.hpp).
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/util/token_secret.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

Result<Principal> Coordinator::authenticate(std::string_view bearer_secret) const {
    if (bearer_secret.empty()) {
        return make_error(ErrorCode::unauthorized, "missing token: send `Authorization: Bearer <token>`");
    }
    const TokenRecord* t = m_tokens.live_token(bearer_secret);
    if (t == nullptr) {
        return make_error(ErrorCode::unauthorized, "unknown or revoked token");
    }
    if (t->worker && m_roster.banned(*t->worker)) {
        return make_error(ErrorCode::forbidden, "this worker is banned from the pool");
    }
    m_tokens.note_used(t->id, m_clock.now_ms());
    return Principal{t->role, t->team, t->worker, t->id};
}

Result<std::vector<TokenRecord>> Coordinator::list_tokens(const Principal& who,
                                                          const std::optional<std::string>& team) const {
    if (who.role != Role::admin) {
        return denied("only admins list tokens");
    }
    std::optional<TeamId> only;
    if (team) {
        auto t = m_tokens.team_named(*team);
        if (!t) {
            return t.error();
        }
        only = *t;
    }
    return m_tokens.listed(only);
}

Result<IssuedToken> Coordinator::issue(Role role, std::optional<TeamId> team, std::optional<WorkerId> worker,
                                       const std::string& label, Changes& changes) {
    auto id = take_ids(store::IdKind::token, 1);
    if (!id) {
        return id.error();
    }
    return TokenBook::stage_token(TokenId(*id), role, team, worker, label, m_clock.now_ms(), changes);
}

Result<IssuedToken> Coordinator::recover_admin(const std::string& label) {
    return issue_admin(label, "token.recover_admin");
}

// An admin token made on the coordinator's own machine (no token acted: the audit's actor is none).
Result<IssuedToken> Coordinator::issue_admin(const std::string& label, const std::string& action) {
    Changes c;
    auto tok = issue(Role::admin, std::nullopt, std::nullopt, label, c);
    if (!tok) {
        return tok;
    }
    audit(std::nullopt, action, "token " + std::to_string(tok->id.value()), nlohmann::json{{"label", label}}.dump(), c);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return tok;
}

Result<IssuedToken> Coordinator::init_admin() {
    if (m_tokens.has_admin()) {
        return make_error(ErrorCode::conflict, "the pool already has an admin token");
    }
    return issue_admin("first admin", "token.first_admin");
}

// ---- admin --------------------------------------------------------------------------------------

Result<TeamRecord> Coordinator::create_team(const Principal& who, const std::string& name, std::int64_t weight) {
    if (who.role != Role::admin) {
        return denied("only admins create teams");
    }
    if (auto st = m_tokens.check_new_team(name, weight); !st) {
        return st.error();
    }
    auto id = take_ids(store::IdKind::team, 1);
    if (!id) {
        return id.error();
    }
    Changes c;
    TeamRecord t{TeamId(*id), name, weight, m_clock.now_ms(), std::nullopt, std::nullopt};
    c.teams.push_back(t);
    audit(who.token_id, "team.create", "team `" + name + "`",
          nlohmann::json{{"id", t.id.value()}, {"weight", weight}}.dump(), c);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return t;
}

Result<std::vector<TeamRecord>> Coordinator::list_teams(const Principal& who) const {
    std::vector<TeamRecord> out;
    for (const auto& [id, t] : m_tokens.teams()) {
        if (who.role == Role::admin || (who.team && *who.team == id)) {
            out.push_back(t);
        }
    }
    return out;
}

Result<IssuedToken> Coordinator::create_token(const Principal& who, Role role, const std::string& team,
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
        auto named = m_tokens.team_named(team);
        if (!named) {
            return named.error();
        }
        team_id = *named;
    }
    Changes c;
    auto tok = issue(role, team_id, std::nullopt, label, c);
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
    audit(who.token_id, "token.create", "token " + std::to_string(tok->id.value()), detail.dump(), c);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return tok;
}

Status Coordinator::revoke_token(const Principal& who, TokenId token_id) {
    if (who.role != Role::admin) {
        return denied("only admins revoke tokens");
    }
    Changes c;
    auto revoked = m_tokens.stage_revoke(token_id, m_clock.now_ms(), c);
    if (!revoked) {
        return revoked.error();
    }
    nlohmann::json detail{{"role", to_string(revoked->role)}, {"label", revoked->label}};
    if (revoked->team) {
        detail["team"] = m_tokens.team_name(*revoked->team);
    }
    if (revoked->worker) {
        detail["worker"] = revoked->worker->value();
    }
    audit(who.token_id, "token.revoke", "token " + std::to_string(token_id.value()), detail.dump(), c);
    return commit(c);
}

} // namespace gpupool::coordinator
