// TokenBook: the pool's teams and tokens, and who each bearer secret is.
//
// It owns the team and token records the coordinator holds in memory, indexed by the token's hash
// (authentication) and by its id, plus when each token last authenticated a request (memory only:
// not durable, not compared). The records change in one place only: absorb(), called by the
// coordinator with each change set after the store committed it. Everything else is a const read or
// a stage_…() that checks a request and appends the records it would write to a store::Changes,
// changing nothing here until that change is committed and absorbed.
//
// The contract: a book that absorbed a sequence of committed changes equals (operator==) a book that
// absorbed the store's snapshot after them (Coordinator::drift checks it). Not thread-safe: the
// coordinator's one thread owns it. Token secrets are "gpp_" + 64 hex digits (auth.hpp); only their
// SHA-256 is kept.
#pragma once

#include "core/store/store.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpupool::coordinator {

// Who is asking, resolved from a bearer token.
struct Principal {
    store::Role role = store::Role::member;
    std::optional<TeamId> team;
    std::optional<WorkerId> worker;
    TokenId token_id{};
};

struct IssuedToken {
    TokenId id{};
    std::string secret; // shown once
    store::Role role = store::Role::member;
    std::optional<TeamId> team;
};

inline constexpr std::size_t k_max_label_chars = 200;

class TokenBook {
public:
    // ---- teams ----
    const std::map<TeamId, store::TeamRecord>& teams() const { return m_teams; }
    // nullptr for a team there is not.
    const store::TeamRecord* team(TeamId id) const;
    // The team's name, or its id in digits for an unknown one.
    std::string team_name(TeamId id) const;
    // The team an admin named (by name or id: resolve_name's rules); not_found says how to make it.
    Result<TeamId> team_named(const std::string& name) const;
    // The ids of the teams with these names, ascending; names no team has are left out.
    std::vector<TeamId> team_ids(const std::vector<std::string>& names) const;

    // ---- tokens ----
    // The live (not revoked) token whose secret this is; nullptr otherwise.
    const store::TokenRecord* live_token(std::string_view secret) const;
    // nullptr for a token there is not.
    const store::TokenRecord* token(TokenId id) const;
    // A token's label, or "token N" for an unlabelled (or unknown) one.
    std::string token_name(TokenId id) const;
    // Whether any admin token is live.
    bool has_admin() const;
    // Tokens (of `team` only, when set), oldest first, their hashes blanked.
    std::vector<store::TokenRecord> listed(std::optional<TeamId> team) const;
    // The live member tokens of `team`, oldest first.
    std::vector<const store::TokenRecord*> members_of(TeamId team) const;
    // The live member token of `team` an admin named: its id in digits, or its label when one
    // token has it. not_found / invalid_input name the field `member`.
    Result<const store::TokenRecord*> member_token(TeamId team, const std::string& member) const;

    // When a token last authenticated a request (memory only; const: reading a token notes it).
    void note_used(TokenId id, std::int64_t now_ms) const { m_last_used[id] = now_ms; }
    std::optional<std::int64_t> last_used(TokenId id) const;

    // ---- staging: check, then append to `changes` (nothing changes here until absorb) ----
    // Whether a team `name` of `weight` may be made (field `name` or `weight` on refusal).
    Status check_new_team(const std::string& name, std::int64_t weight) const;
    // A token with a fresh secret; `uses_left` only for enrollment tokens.
    static Result<IssuedToken> stage_token(TokenId id, store::Role role, std::optional<TeamId> team,
                                           std::optional<WorkerId> worker, const std::string& label,
                                           std::int64_t now_ms, store::Changes& changes);
    // The token revoked at `now_ms` (as it will be); not_found when there is no such token.
    Result<store::TokenRecord> stage_revoke(TokenId id, std::int64_t now_ms, store::Changes& changes) const;

    // ---- learning of commits ----
    void absorb(const store::Changes& changes);
    // The durable state only (last uses are not).
    bool operator==(const TokenBook& other) const { return m_teams == other.m_teams && m_by_hash == other.m_by_hash; }
    // The first team or token that differs from `rebuilt`, in words; nullopt when none does.
    std::optional<std::string> first_difference(const TokenBook& rebuilt) const;

private:
    std::map<TeamId, store::TeamRecord> m_teams;
    std::unordered_map<std::string, store::TokenRecord> m_by_hash;
    std::unordered_map<TokenId, std::string> m_hash_by_id;
    mutable std::unordered_map<TokenId, std::int64_t> m_last_used;
};

} // namespace gpupool::coordinator
