#include "core/coordinator/token_book.hpp"

#include "core/util/token_secret.hpp"
#include "core/coordinator/resolve_name.hpp"

#include <algorithm>
#include <cctype>

namespace gpupool::coordinator {

using store::Role;
using store::TeamRecord;
using store::TokenRecord;

const TeamRecord* TokenBook::team(TeamId id) const {
    auto it = m_teams.find(id);
    return it == m_teams.end() ? nullptr : &it->second;
}

std::string TokenBook::team_name(TeamId id) const {
    const TeamRecord* t = team(id);
    return t == nullptr ? std::to_string(id.value()) : t->name;
}

Result<TeamId> TokenBook::team_named(const std::string& name) const {
    std::vector<NamedCandidate> teams;
    for (const auto& [id, t] : m_teams) {
        teams.push_back({id.value(), t.name, ""});
    }
    auto id =
        resolve_name("team", name, teams, "team",
                     "to make it: `gpupool admin team create " + name + "`; the teams: `gpupool admin team list`");
    if (!id) {
        return id.error();
    }
    return TeamId(*id);
}

std::vector<TeamId> TokenBook::team_ids(const std::vector<std::string>& names) const {
    std::vector<TeamId> ids;
    for (const auto& [id, t] : m_teams) { // ordered by id: the result is sorted
        if (std::find(names.begin(), names.end(), t.name) != names.end()) {
            ids.push_back(id);
        }
    }
    return ids;
}

const TokenRecord* TokenBook::live_token(std::string_view secret) const {
    auto it = m_by_hash.find(util::sha256_hex(secret));
    return it == m_by_hash.end() || it->second.revoked_at ? nullptr : &it->second;
}

const TokenRecord* TokenBook::token(TokenId id) const {
    auto hash = m_hash_by_id.find(id);
    if (hash == m_hash_by_id.end()) {
        return nullptr;
    }
    auto it = m_by_hash.find(hash->second);
    return it == m_by_hash.end() ? nullptr : &it->second;
}

std::string TokenBook::token_name(TokenId id) const {
    const TokenRecord* t = token(id);
    return t != nullptr && !t->label.empty() ? t->label : "token " + std::to_string(id.value());
}

bool TokenBook::has_admin() const {
    return std::any_of(m_by_hash.begin(), m_by_hash.end(),
                       [](const auto& kv) { return kv.second.role == Role::admin && !kv.second.revoked_at; });
}

std::vector<TokenRecord> TokenBook::listed(std::optional<TeamId> team) const {
    std::vector<TokenRecord> out;
    for (const auto& [hash, t] : m_by_hash) {
        if (!team || t.team == team) {
            out.push_back(t);
            out.back().hash.clear();
        }
    }
    std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) { return a.id < b.id; });
    return out;
}

std::vector<const TokenRecord*> TokenBook::members_of(TeamId team) const {
    std::vector<const TokenRecord*> out;
    for (const auto& [hash, t] : m_by_hash) {
        if (t.role == Role::member && t.team == team && !t.revoked_at) {
            out.push_back(&t);
        }
    }
    std::sort(out.begin(), out.end(), [](const TokenRecord* a, const TokenRecord* b) { return a->id < b->id; });
    return out;
}

Result<const TokenRecord*> TokenBook::member_token(TeamId team, const std::string& member) const {
    const bool by_id = !member.empty() &&
                       std::all_of(member.begin(), member.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
                       member.size() < 19;
    std::vector<const TokenRecord*> found;
    for (const TokenRecord* t : members_of(team)) {
        if ((by_id && t->id == TokenId(std::stoll(member))) || (!by_id && t->label == member)) {
            found.push_back(t);
        }
    }
    const std::string name = team_name(team);
    if (found.empty()) {
        return make_error(ErrorCode::not_found,
                          "team `" + name + "` has no live member token " +
                              (by_id ? member : "labelled `" + member + "`") +
                              " (see `gpupool admin token list --team " + name + "`)",
                          "member");
    }
    if (found.size() > 1) {
        return make_error(ErrorCode::invalid_input,
                          std::to_string(found.size()) + " member tokens of team `" + name + "` are labelled `" +
                              member + "`: name one by its id (see `gpupool admin token list --team " + name + "`)",
                          "member");
    }
    return found.front();
}

std::optional<std::int64_t> TokenBook::last_used(TokenId id) const {
    auto it = m_last_used.find(id);
    return it == m_last_used.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
}

Status TokenBook::check_new_team(const std::string& name, std::int64_t weight) const {
    if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
        })) {
        return make_error(ErrorCode::invalid_input, "team names are 1-64 letters, digits, - and _", "name");
    }
    if (weight < 1 || weight > 1000) {
        return make_error(ErrorCode::invalid_input, "weight must be from 1 to 1000", "weight");
    }
    for (const auto& [id, t] : m_teams) {
        if (t.name == name) {
            return make_error(ErrorCode::conflict, "team `" + name + "` already exists", "name");
        }
    }
    return {};
}

Result<IssuedToken> TokenBook::stage_token(TokenId id, Role role, std::optional<TeamId> team,
                                           std::optional<WorkerId> worker, const std::string& label,
                                           std::int64_t now_ms, store::Changes& changes) {
    auto secret = util::new_token_secret();
    if (!secret) {
        return secret.error();
    }
    TokenRecord t;
    t.id = id;
    t.hash = util::sha256_hex(*secret);
    t.role = role;
    t.team = team;
    t.worker = worker;
    t.label = label;
    t.created_at = now_ms;
    changes.tokens.push_back(t);
    return IssuedToken{t.id, *secret, role, team};
}

Result<TokenRecord> TokenBook::stage_revoke(TokenId id, std::int64_t now_ms, store::Changes& changes) const {
    const TokenRecord* t = token(id);
    if (t == nullptr) {
        return make_error(ErrorCode::not_found, "no token " + std::to_string(id.value()));
    }
    TokenRecord copy = *t;
    copy.revoked_at = now_ms;
    changes.tokens.push_back(copy);
    return copy;
}

void TokenBook::absorb(const store::Changes& changes) {
    for (const auto& t : changes.teams) {
        m_teams[t.id] = t;
    }
    for (const auto& t : changes.tokens) {
        m_by_hash[t.hash] = t;
        m_hash_by_id[t.id] = t.hash;
    }
}

std::optional<std::string> TokenBook::first_difference(const TokenBook& rebuilt) const {
    if (m_teams != rebuilt.m_teams) {
        for (const auto& [id, t] : rebuilt.m_teams) {
            const TeamRecord* mine = team(id);
            if (mine == nullptr || !(*mine == t)) {
                return "team " + std::to_string(id.value()) + (mine == nullptr ? " missing" : " differs");
            }
        }
        return "teams: " + std::to_string(m_teams.size()) + " kept, " + std::to_string(rebuilt.m_teams.size()) +
               " in the store";
    }
    if (m_by_hash != rebuilt.m_by_hash) {
        for (const auto& [hash, t] : rebuilt.m_by_hash) {
            const TokenRecord* mine = token(t.id);
            if (mine == nullptr || !(*mine == t)) {
                return "token " + std::to_string(t.id.value()) + (mine == nullptr ? " missing" : " differs");
            }
        }
        return "tokens: " + std::to_string(m_by_hash.size()) + " kept, " + std::to_string(rebuilt.m_by_hash.size()) +
               " in the store";
    }
    if (m_hash_by_id.size() != m_by_hash.size()) {
        return "token ids: " + std::to_string(m_hash_by_id.size()) + " indexed, " + std::to_string(m_by_hash.size()) +
               " tokens";
    }
    return std::nullopt;
}

} // namespace gpupool::coordinator
