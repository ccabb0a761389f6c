// The credits ledger: double-entry bookkeeping of who owes whom, in integer micro-credits.
//
// Every movement is one immutable Entry that takes `amount` (> 0) from its `debit` account and
// gives it to its `credit` account, so the sum over all accounts is zero after every entry.
// Accounts: one per team, the issuer (grants come out of it: its balance is minus everything ever
// granted), the pool fee, the escrow, and one "settling" account per provider team (earnings not
// yet paid out). Balances are derived from the entries; a cached copy is kept by the store and
// verify() compares the two.
//
// Escrow rules (decision 7), enforced by check():
// - A hold moves an attempt's maximum cost from its team to escrow, once per attempt.
// - Settlement moves all of that escrow out again, in up to three entries: the charge to the
//   provider team, the pool fee, and the release of the rest back to the team. An attempt's escrow
//   can never go below zero, so an attempt cannot be settled twice; once an attempt's escrow is
//   back to zero it is closed and no further escrow entry may name it.
// - Grants and adjustments move between the issuer and a team and never touch the escrow.
//
// Settling (docs/credits.md, "Settling and voiding"): a pool with a settling period charges into
// the provider's settling account instead of its team account; a payout moves an attempt's settled
// earnings to the team once the period is over. Until then an admin can void the attempt (its
// worker lied about its results): refunds move the charge back to the paying team from the
// settling account, from the provider's team account for what was already paid out (which may
// leave it negative), and the fee from the pool fee. An attempt is refunded at most what it was
// charged, and a voided attempt is never paid out.
//
// Who pays (settle()): an attempt that ran and ended by its own doing (success, failure, user
// cancel, max_runtime, scheduler preemption) pays price x runtime, capped at its hold; an attempt
// lost to the worker or preempted by the GPU's owner pays nothing and its provider earns nothing.
//
// Pure: no I/O, no clock (times come in as arguments). Not thread-safe; one owner (the coordinator).
#pragma once

#include "core/credits/money.hpp"

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::credits {

enum class AccountKind : std::uint8_t { team, issuer, pool_fee, escrow, settling };

struct Account {
    AccountKind kind = AccountKind::issuer;
    std::int64_t team = 0; // for team and settling accounts

    static Account of_team(std::int64_t team) { return {AccountKind::team, team}; }
    static Account settling_of(std::int64_t team) { return {AccountKind::settling, team}; }
    static Account issuer() { return {AccountKind::issuer, 0}; }
    static Account pool_fee() { return {AccountKind::pool_fee, 0}; }
    static Account escrow() { return {AccountKind::escrow, 0}; }
    auto operator<=>(const Account&) const = default;
};

// "team:3", "settling:3", "issuer", "pool_fee", "escrow".
std::string to_string(const Account& a);
std::optional<Account> account_from_string(std::string_view s);

enum class EntryReason : std::uint8_t {
    grant,      // issuer -> team
    adjustment, // issuer <-> team, by an admin, with a note
    expiry,     // team -> issuer: the unspent part of an expired grant
    hold,       // team -> escrow when an attempt is placed
    charge,     // escrow -> provider team (or its settling account) for the time an attempt ran
    fee,        // escrow -> pool fee
    release,    // escrow -> team: the part of the hold that was not used
    payout,     // settling -> provider team: an attempt's earnings, once its settling period is over
    refund,     // settling, provider team or pool fee -> paying team: a voided attempt's charge
    check_pay,  // pool fee -> provider team: a spot check's run, which the pool pays for, not the team
};

const char* to_string(EntryReason r);
std::optional<EntryReason> entry_reason_from_string(std::string_view s);

struct Entry {
    std::int64_t id = 0;
    std::int64_t at_ms = 0;
    Account debit;  // pays
    Account credit; // receives
    Micro amount = 0;
    EntryReason reason = EntryReason::grant;
    std::int64_t attempt = 0; // hold/charge/fee/release/payout/refund: the attempt
    std::int64_t grant = 0;   // grant/expiry: the grant's id (its grant entry's id)
    std::int64_t payer = 0;   // hold/charge/fee/release/payout/refund: the team whose job it is
    std::string note;
    bool operator==(const Entry&) const = default;
};

// How an attempt's hold is split when it ends.
struct Settlement {
    Micro provider = 0; // to the provider team
    Micro fee = 0;      // to the pool fee account
    Micro refund = 0;   // back to the paying team
};

// `cost` is price x runtime; `chargeable` is false for worker faults and owner preemptions.
// The fee (parts per million of the charge, rounded down) is waived when payer and provider are
// the same team. provider + fee + refund == held always.
Settlement settle(Micro held, Micro cost, bool chargeable, std::int64_t fee_ppm, bool same_team);

class Ledger {
public:
    // Whether `e` may be appended now (see the rules above); the message says which rule it breaks.
    std::optional<std::string> check(const Entry& e) const;
    // Appends an entry that passed check(). Asserts it.
    void apply(const Entry& e);

    Micro balance(const Account& a) const;
    const std::map<Account, Micro>& balances() const { return m_balances; }
    Micro total() const; // always 0
    const std::vector<Entry>& entries() const { return m_entries; }
    std::int64_t next_id() const { return m_entries.empty() ? 1 : m_entries.back().id + 1; }

    Micro held(std::int64_t attempt) const;      // in escrow now for this attempt
    Micro held_by_team(std::int64_t team) const; // in escrow now for the team's attempts
    Micro charged(std::int64_t attempt) const;   // charge + fee settled for this attempt, less refunds
    bool has_hold(std::int64_t attempt) const;
    bool closed(std::int64_t attempt) const; // held once, settled since
    // The team's charges and fees (what it spent) at or after `since_ms`. O(log n): budgets are
    // checked in every scheduling pass. Entries come in time order (they are stamped at commit).
    Micro spent_since(std::int64_t team, std::int64_t since_ms) const;

    // What an attempt's settlement did, for payouts and voiding.
    struct Earnings {
        std::int64_t provider = 0; // the team its charge went to (0: not charged)
        Micro charge = 0;          // to the provider (directly or through settling)
        Micro fee = 0;
        Micro settling = 0;        // of the charge, still in the provider's settling account
        Micro refunded = 0;
        std::int64_t charged_at_ms = 0;
    };
    Earnings earnings(std::int64_t attempt) const;
    // Attempts with earnings still settling that were charged at or before `until_ms`, oldest first.
    std::vector<std::int64_t> settling_due(std::int64_t until_ms) const;

    // The first difference between the derived balances and `cached`, described; nullopt if equal.
    std::optional<std::string> verify(const std::map<Account, Micro>& cached) const;

    // The hold and settlement entries for one attempt, ids from `first_id`; zero amounts are left out.
    static Entry hold_entry(std::int64_t id, std::int64_t at_ms, std::int64_t attempt, std::int64_t team, Micro amount);
    // `settle_later`: the charge goes to the provider's settling account (a pool with a settling
    // period), not straight to its team account.
    static std::vector<Entry> settlement_entries(std::int64_t first_id, std::int64_t at_ms, std::int64_t attempt,
                                                 std::int64_t payer, std::int64_t provider, const Settlement& s,
                                                 bool settle_later = false);
    // Pays a spot check's provider for its run from the pool fee (at most once per attempt; the pool
    // fee may go below zero: the pool's cost of checking, docs/evidence.md). `payer`: the team whose
    // result was checked, for the record.
    static Entry check_pay_entry(std::int64_t id, std::int64_t at_ms, std::int64_t attempt, std::int64_t payer,
                                 std::int64_t provider, Micro amount);
    // Pays out what is settling for `attempt` (nullopt if nothing is).
    std::optional<Entry> payout_entry(std::int64_t id, std::int64_t at_ms, std::int64_t attempt) const;
    // Gives a voided attempt's charge and fee back to its team (nothing if it was not charged or is
    // already refunded): from settling first, then from the provider's team account, then the fee.
    std::vector<Entry> refund_entries(std::int64_t first_id, std::int64_t at_ms, std::int64_t attempt,
                                      const std::string& note) const;

private:
    std::vector<Entry> m_entries;
    std::map<Account, Micro> m_balances;
    std::map<std::int64_t, Micro> m_held;         // by attempt, while open
    std::map<std::int64_t, std::int64_t> m_payer; // attempt -> team, from its hold
    std::map<std::int64_t, Micro> m_held_by_team;
    std::map<std::int64_t, Earnings> m_earnings; // by attempt, once charged
    std::set<std::pair<std::int64_t, std::int64_t>> m_settling; // (charged_at_ms, attempt) with settling > 0
    std::set<std::int64_t> m_closed;
    std::set<std::int64_t> m_check_paid; // attempts whose spot-check run was paid
    struct Spent {
        std::int64_t at_ms = 0;
        Micro total = 0; // the team's spending up to and including this entry
    };
    std::map<std::int64_t, std::vector<Spent>> m_spent_by_team;
};

} // namespace gpupool::credits
