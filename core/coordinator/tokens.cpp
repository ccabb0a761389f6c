// Authentication, tokens and teams: who may call the coordinator, as what (Coordinator's
// auth and admin methods for tokens and teams; token hashing is in auth.hpp).
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/util/token_secret.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

Result<Principal> Coordinator::authenticate(std::string_view bearer_secret) const {
    if (bearer_secret.empty()) {
        return make_error(ErrorCode::unauthorized, "missing token: send `Authorization: Bearer <token>`");
    }
    auto it = m_tokens.find(sha256_hex(bearer_secret));
    if (it == m_tokens.end() || it->second.revoked_at) {
        return make_error(ErrorCode::unauthorized, "unknown or revoked token");
    }
    const TokenRecord& t = it->second;
    if (t.worker) {
        auto w = m_workers.find(*t.worker);
        if (w != m_workers.end() && w->second.record.state == WorkerState::banned) {
            return make_error(ErrorCode::forbidden, "this worker is banned from the pool");
        }
    }
    m_token_last_used[t.id] = m_clock.now_ms();
    return Principal{t.role, t.team, t.worker, t.id};
}

Result<std::vector<TokenRecord>> Coordinator::list_tokens(const Principal& who,
                                                          const std::optional<std::string>& team) const {
    if (who.role != Role::admin) {
        return denied("only admins list tokens");
    }
    std::optional<TeamId> only;
    if (team) {
        auto t = team_named(*team);
        if (!t) {
            return t.error();
        }
        only = *t;
    }
    std::vector<TokenRecord> out;
    for (const auto& [hash, t] : m_tokens) {
        if (!only || t.team == only) {
            out.push_back(t);
            out.back().hash.clear();
        }
    }
    std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) { return a.id < b.id; });
    return out;
}

std::optional<std::int64_t> Coordinator::last_used(TokenId token_id) const {
    auto it = m_token_last_used.find(token_id);
    return it == m_token_last_used.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
}

bool Coordinator::has_admin() const {
    return std::any_of(m_tokens.begin(), m_tokens.end(),
                       [](const auto& kv) { return kv.second.role == Role::admin && !kv.second.revoked_at; });
}

Result<IssuedToken> Coordinator::issue(Role role, std::optional<TeamId> team, std::optional<WorkerId> worker,
                                       const std::string& label, Changes& changes) {
    auto secret = new_token_secret();
    if (!secret) {
        return secret.error();
    }
    auto id = take_ids(store::IdKind::token, 1);
    if (!id) {
        return id.error();
    }
    TokenRecord t;
    t.id = TokenId(*id);
    t.hash = sha256_hex(*secret);
    t.role = role;
    t.team = team;
    t.worker = worker;
    t.label = label;
    t.created_at = m_clock.now_ms();
    changes.tokens.push_back(t);
    return IssuedToken{t.id, *secret, role, team};
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
    if (has_admin()) {
        return make_error(ErrorCode::conflict, "the pool already has an admin token");
    }
    return issue_admin("first admin", "token.first_admin");
}

// ---- admin --------------------------------------------------------------------------------------

Result<TeamRecord> Coordinator::create_team(const Principal& who, const std::string& name, std::int64_t weight) {
    if (who.role != Role::admin) {
        return denied("only admins create teams");
    }
    if (name.empty() || name.size() > 64 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_'; })) {
        return invalid("team names are 1-64 letters, digits, - and _", "name");
    }
    if (weight < 1 || weight > 1000) {
        return invalid("weight must be from 1 to 1000", "weight");
    }
    for (const auto& [id, t] : m_teams) {
        if (t.name == name) {
            return make_error(ErrorCode::conflict, "team `" + name + "` already exists", "name");
        }
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
    for (const auto& [id, t] : m_teams) {
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
        auto named = team_named(team);
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

const TokenRecord* Coordinator::token_by_id(TokenId id) const {
    auto hash = m_token_hash_by_id.find(id);
    if (hash == m_token_hash_by_id.end()) {
        return nullptr;
    }
    auto it = m_tokens.find(hash->second);
    return it == m_tokens.end() ? nullptr : &it->second;
}

Status Coordinator::revoke_token(const Principal& who, TokenId token_id) {
    if (who.role != Role::admin) {
        return denied("only admins revoke tokens");
    }
    for (const auto& [hash, t] : m_tokens) {
        if (t.id == token_id) {
            Changes c;
            TokenRecord copy = t;
            copy.revoked_at = m_clock.now_ms();
            c.tokens.push_back(copy);
            nlohmann::json detail{{"role", to_string(t.role)}, {"label", t.label}};
            if (t.team) {
                detail["team"] = team_name(*t.team);
            }
            if (t.worker) {
                detail["worker"] = t.worker->value();
            }
            audit(who.token_id, "token.revoke", "token " + std::to_string(token_id.value()), detail.dump(), c);
            return commit(c);
        }
    }
    return not_found("no token " + std::to_string(token_id.value()));
}

} // namespace gpupool::coordinator
