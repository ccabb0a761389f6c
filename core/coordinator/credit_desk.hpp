// CreditDesk: the pool's money — the credits ledger, grants, what budgets leave, what attempts cost.
//
// It owns the ledger (core/credits/ledger.hpp: accounts, holds, settlements, payouts) and the
// grants, and changes them in one place only: absorb(), with each change set after the store
// committed it (load() once, at start, from the store's rows, checking every entry and the cached
// balances). Everything else is a const read, or a stage_…() that appends the ledger entries and
// grant records a change needs to a store::Changes, changing nothing here until it is committed.
// Budgets and costs read the teams and tokens (TokenBook) and the jobs and attempts (JobBook)
// through const references it is given: they must outlive it.
//
// The contract: a desk that absorbed a sequence of committed changes equals (first_difference) one
// that loaded the store's rows after them. Not thread-safe: the coordinator's one thread owns it.
#pragma once

#include "core/coordinator/job_book.hpp"
#include "core/coordinator/token_book.hpp"
#include "core/credits/catalog.hpp"
#include "core/credits/ledger.hpp"
#include "core/store/store.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpupool::coordinator {

struct CreditOptions {
    // Holds must be covered by the team's balance and budget, and submit refuses a sweep whose
    // estimate it cannot pay for. Off only for the embedded local mode (`gpupool run`).
    bool enforce = true;
    credits::RateCatalog rates = credits::default_rate_catalog();
    std::int64_t pool_fee_ppm = 0; // of each charge, to the pool-fee account
    // How long an owner's earnings for an attempt settle before they reach its team account (0:
    // at once). Results can be voided after that too, but then the refund is clawed back from
    // the owner's balance, which may go negative.
    std::int64_t settle_ms = 0;
};

// A member's own caps (a member token's), what its jobs spent and hold now.
struct MemberBudget {
    TokenId token_id{};
    std::string label;
    std::optional<std::int64_t> day_micro{};
    std::optional<std::int64_t> week_micro{};
    std::int64_t spent_day_micro = 0; // charges of its jobs' attempts that ended in the last 24 hours
    std::int64_t spent_week_micro = 0;
    std::int64_t held_micro = 0; // in escrow for its jobs' running attempts
};

class CreditDesk {
public:
    CreditDesk(const CreditOptions& options, const TokenBook& tokens, const JobBook& jobs)
        : m_options(&options), m_tokens(&tokens), m_jobs(&jobs) {}

    const credits::Ledger& ledger() const { return m_ledger; }
    const std::map<std::int64_t, store::GrantRecord>& grants() const { return m_grants; }
    // The id the next entry appended to `changes` gets.
    std::int64_t next_entry_id(const store::Changes& changes) const;

    // ---- budgets (rolling 24 hours and 7 days) ----
    // What the team's own caps leave now, whatever the balance; nullopt without caps.
    std::optional<std::int64_t> team_caps_room(TeamId team, std::int64_t now_ms) const;
    // What the team may still hold now: its balance and, under budgets, what they leave.
    std::int64_t budget_room(TeamId team, std::int64_t now_ms) const;
    MemberBudget member_budget(const store::TokenRecord& token, std::int64_t now_ms) const;
    // What a member (a token with caps of its own) may still hold now; nullopt without caps.
    std::optional<std::int64_t> member_room(TokenId token, std::int64_t now_ms) const;
    // "team `x` can hold 0.2 credits now (balance 5; budget 1/day, 0.8 spent or held)".
    std::string team_can_hold(TeamId team, std::int64_t left, std::int64_t now_ms) const;
    // "member `alice` can hold 0.5 credits now (budget 2/day, 1.5 spent or held)"; `placing`: what the
    // member's jobs placed in this pass hold on top of the stored holds.
    std::string member_can_hold(TokenId token, std::int64_t left, std::int64_t placing, std::int64_t now_ms) const;

    // ---- costs ----
    // Micro-credits an attempt has cost: settled when it ended, accrued so far while it runs.
    std::int64_t cost_micro(const store::AttemptRecord& attempt, std::int64_t now_ms) const;
    std::int64_t job_cost_micro(JobId job, std::int64_t now_ms) const; // over its attempts
    std::int64_t held_micro(JobId job) const;                          // its latest attempt's hold
    // Median runtime in seconds of the team's past successful runs of recipe `source`, and how many.
    std::pair<std::int64_t, std::int64_t> history(TeamId team, const std::string& source) const;

    // ---- staging ----
    // The cached balance of every account `changes` move, as it will be (written with them).
    void stage_balances(store::Changes& changes) const;
    // Settles an ending attempt's hold (if it has one still open): charged to its team at its price
    // for `runtime_ms` unless not `chargeable`, the provider paid (at once, or after the settling
    // period when it is another team), the rest back.
    void stage_settlement(const store::AttemptRecord& attempt, TeamId payer, TeamId provider, bool chargeable,
                          std::int64_t runtime_ms, std::int64_t now_ms, store::Changes& changes) const;
    // Pays a spot check's attempt (docs/evidence.md), which holds nothing: the pool fee pays its
    // provider its price for `runtime_ms` (at most its max_runtime), as a team would have been
    // charged, when `chargeable`; nothing when that comes to 0 (an unpriced CPU worker).
    void stage_check_pay(const store::AttemptRecord& attempt, TeamId payer, TeamId provider, bool chargeable,
                         std::int64_t runtime_ms, std::int64_t max_runtime_ms, std::int64_t now,
                         store::Changes& changes) const;
    // Earnings whose settling period is over, paid out.
    void stage_payouts(std::int64_t now_ms, store::Changes& changes) const;
    // Grants past their expiry: what is left of each (up to the team's positive balance) back.
    void stage_grant_expiries(std::int64_t now_ms, store::Changes& changes) const;
    // A grant to `team` (checked: a positive amount, an expiry in the future); field names on refusal.
    Result<store::GrantRecord> stage_grant(TeamId team, std::int64_t amount_micro,
                                           std::optional<std::int64_t> expires_at, const std::string& note,
                                           std::int64_t now_ms, store::Changes& changes) const;
    // A signed correction between the issuer and `team` (checked: non-zero, a note).
    Result<credits::Entry> stage_adjustment(TeamId team, std::int64_t amount_micro, const std::string& note,
                                            std::int64_t now_ms, store::Changes& changes) const;

    // ---- learning of commits ----
    // At start: every entry checked against the ledger's rules and applied, then the balances
    // rebuilt from them compared with the cached ones; an error (io) says which disagree.
    Status load(const std::vector<credits::Entry>& entries, const std::vector<store::BalanceRecord>& cached);
    void absorb(const store::Changes& changes);
    // The first difference from `rebuilt` (entries, balances, grants), in words; nullopt when none.
    std::optional<std::string> first_difference(const CreditDesk& rebuilt) const;

private:
    const CreditOptions* m_options;
    const TokenBook* m_tokens;
    const JobBook* m_jobs;
    credits::Ledger m_ledger;
    std::map<std::int64_t, store::GrantRecord> m_grants;
};

} // namespace gpupool::coordinator
