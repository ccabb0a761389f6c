#include "core/credits/ledger.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <iterator>

namespace gpupool::credits {

namespace {

constexpr std::array<const char*, 10> k_reason_names{"grant", "adjustment", "expiry", "hold",   "charge",
                                                     "fee",   "release",    "payout", "refund", "check_pay"};

bool is_escrow_reason(EntryReason r) {
    return r == EntryReason::hold || r == EntryReason::charge || r == EntryReason::fee || r == EntryReason::release;
}

} // namespace

std::string to_string(const Account& a) {
    switch (a.kind) {
    case AccountKind::team:
        return "team:" + std::to_string(a.team);
    case AccountKind::issuer:
        return "issuer";
    case AccountKind::pool_fee:
        return "pool_fee";
    case AccountKind::escrow:
        return "escrow";
    case AccountKind::settling:
        return "settling:" + std::to_string(a.team);
    }
    return "?";
}

std::optional<Account> account_from_string(std::string_view s) {
    if (s == "issuer") {
        return Account::issuer();
    }
    if (s == "pool_fee") {
        return Account::pool_fee();
    }
    if (s == "escrow") {
        return Account::escrow();
    }
    for (auto [prefix, kind] : {std::pair{std::string_view("team:"), AccountKind::team},
                                std::pair{std::string_view("settling:"), AccountKind::settling}}) {
        if (!s.starts_with(prefix)) {
            continue;
        }
        std::int64_t id = 0;
        auto rest = s.substr(prefix.size());
        auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), id);
        if (ec == std::errc() && ptr == rest.data() + rest.size() && id > 0) {
            return Account{kind, id};
        }
    }
    return std::nullopt;
}

const char* to_string(EntryReason r) {
    return k_reason_names.at(static_cast<std::size_t>(r));
}

std::optional<EntryReason> entry_reason_from_string(std::string_view s) {
    for (std::size_t i = 0; i < k_reason_names.size(); ++i) {
        if (s == k_reason_names[i]) {
            return static_cast<EntryReason>(i);
        }
    }
    return std::nullopt;
}

Settlement settle(Micro held, Micro cost, bool chargeable, std::int64_t fee_ppm, bool same_team) {
    Settlement s;
    const Micro charge = chargeable ? std::clamp<Micro>(cost, 0, held) : 0;
    s.fee = same_team ? 0 : charge / 1'000'000 * fee_ppm + charge % 1'000'000 * fee_ppm / 1'000'000;
    s.provider = charge - s.fee;
    s.refund = held - charge;
    return s;
}

namespace {

// A spot check's pay (check_pay_entry): from the pool fee to a team, once per attempt.
std::optional<std::string> check_pay_rule(const Entry& e, const std::set<std::int64_t>& paid) {
    if (e.attempt <= 0 || e.debit != Account::pool_fee() || e.credit.kind != AccountKind::team) {
        return "a spot check's pay moves from the pool fee to the provider team for an attempt";
    }
    if (paid.count(e.attempt) != 0) {
        return "attempt " + std::to_string(e.attempt) + " was paid for its spot check already";
    }
    return std::nullopt;
}

} // namespace

std::optional<std::string> Ledger::check(const Entry& e) const {
    if (e.amount <= 0 || e.amount > k_max_amount) {
        return "an entry moves a positive amount (got " + format_credits(e.amount) + ")";
    }
    if (e.debit == e.credit) {
        return "an entry moves between two different accounts";
    }
    if (!m_entries.empty() && e.id <= m_entries.back().id) {
        return "entry ids only grow (" + std::to_string(e.id) + " after " + std::to_string(m_entries.back().id) + ")";
    }
    const bool touches_escrow = e.debit.kind == AccountKind::escrow || e.credit.kind == AccountKind::escrow;
    if (touches_escrow != is_escrow_reason(e.reason)) {
        return std::string("a ") + to_string(e.reason) + " entry " + (touches_escrow ? "may not" : "must") +
               " touch the escrow";
    }
    switch (e.reason) {
    case EntryReason::grant:
        if (e.debit.kind != AccountKind::issuer || e.credit.kind != AccountKind::team) {
            return "a grant moves from the issuer to a team";
        }
        return std::nullopt;
    case EntryReason::expiry:
        if (e.debit.kind != AccountKind::team || e.credit.kind != AccountKind::issuer) {
            return "an expiry moves from a team back to the issuer";
        }
        return std::nullopt;
    case EntryReason::adjustment: {
        const bool ok = (e.debit.kind == AccountKind::issuer && e.credit.kind == AccountKind::team) ||
                        (e.debit.kind == AccountKind::team && e.credit.kind == AccountKind::issuer);
        if (!ok) {
            return "an adjustment moves between the issuer and a team";
        }
        return std::nullopt;
    }
    case EntryReason::hold:
        if (e.attempt <= 0 || e.debit != Account::of_team(e.payer) || e.credit.kind != AccountKind::escrow) {
            return "a hold moves from the attempt's team to escrow";
        }
        if (m_payer.count(e.attempt) != 0) {
            return "attempt " + std::to_string(e.attempt) + " already has a hold";
        }
        return std::nullopt;
    case EntryReason::charge:
    case EntryReason::fee:
    case EntryReason::release: {
        if (e.attempt <= 0 || e.debit.kind != AccountKind::escrow) {
            return "a settlement moves from escrow for an attempt";
        }
        auto payer = m_payer.find(e.attempt);
        if (payer == m_payer.end()) {
            return "attempt " + std::to_string(e.attempt) + " has no hold to settle";
        }
        if (m_closed.count(e.attempt) != 0) {
            return "attempt " + std::to_string(e.attempt) + " is already settled";
        }
        if (e.payer != payer->second) {
            return "attempt " + std::to_string(e.attempt) + " is paid by team " + std::to_string(payer->second);
        }
        if (e.amount > held(e.attempt)) {
            return "attempt " + std::to_string(e.attempt) + " has only " + format_credits(held(e.attempt)) +
                   " in escrow, not " + format_credits(e.amount);
        }
        const bool to_provider = e.credit.kind == AccountKind::team || e.credit.kind == AccountKind::settling;
        const bool ok = (e.reason == EntryReason::charge && to_provider) ||
                        (e.reason == EntryReason::fee && e.credit.kind == AccountKind::pool_fee) ||
                        (e.reason == EntryReason::release && e.credit == Account::of_team(e.payer));
        if (!ok) {
            return std::string("a ") + to_string(e.reason) + " goes to " +
                   (e.reason == EntryReason::fee      ? "the pool fee"
                    : e.reason == EntryReason::charge ? "the provider team"
                                                      : "the paying team");
        }
        return std::nullopt;
    }
    case EntryReason::payout: {
        auto it = m_earnings.find(e.attempt);
        if (e.attempt <= 0 || it == m_earnings.end() || it->second.settling <= 0) {
            return "attempt " + std::to_string(e.attempt) + " has no earnings settling";
        }
        if (e.debit != Account::settling_of(it->second.provider) || e.credit != Account::of_team(it->second.provider)) {
            return "a payout moves from the provider's settling account to its team";
        }
        if (e.payer != m_payer.at(e.attempt) || e.amount > it->second.settling) {
            return "attempt " + std::to_string(e.attempt) + " has only " + format_credits(it->second.settling) +
                   " settling";
        }
        return std::nullopt;
    }
    case EntryReason::check_pay:
        return check_pay_rule(e, m_check_paid);
    case EntryReason::refund: {
        auto it = m_earnings.find(e.attempt);
        if (e.attempt <= 0 || it == m_earnings.end()) {
            return "attempt " + std::to_string(e.attempt) + " was not charged";
        }
        const Earnings& got = it->second;
        if (e.payer != m_payer.at(e.attempt) || e.credit != Account::of_team(e.payer)) {
            return "a refund goes to the paying team";
        }
        if (got.refunded + e.amount > got.charge + got.fee) {
            return "attempt " + std::to_string(e.attempt) + " was charged " + format_credits(got.charge + got.fee) +
                   " and refunded " + format_credits(got.refunded) + " already";
        }
        if (e.debit == Account::settling_of(got.provider)) {
            if (e.amount > got.settling) {
                return "attempt " + std::to_string(e.attempt) + " has only " + format_credits(got.settling) +
                       " settling";
            }
            return std::nullopt;
        }
        if (e.debit != Account::of_team(got.provider) && e.debit != Account::pool_fee()) {
            return "a refund comes from the provider (settling or team account) or the pool fee";
        }
        return std::nullopt;
    }
    }
    return "unknown reason";
}

void Ledger::apply(const Entry& e) {
    assert(!check(e));
    m_entries.push_back(e);
    m_balances[e.debit] -= e.amount;
    m_balances[e.credit] += e.amount;
    if (e.reason == EntryReason::payout || e.reason == EntryReason::refund) {
        Earnings& got = m_earnings.at(e.attempt);
        if (e.debit.kind == AccountKind::settling) {
            m_settling.erase({got.charged_at_ms, e.attempt});
            got.settling -= e.amount;
            if (got.settling > 0) {
                m_settling.insert({got.charged_at_ms, e.attempt});
            }
        }
        if (e.reason == EntryReason::refund) {
            got.refunded += e.amount;
        }
        return;
    }
    if (e.reason == EntryReason::check_pay) {
        m_check_paid.insert(e.attempt);
        return;
    }
    if (!is_escrow_reason(e.reason)) {
        return;
    }
    if (e.reason == EntryReason::hold) {
        m_payer[e.attempt] = e.payer;
        m_held[e.attempt] += e.amount;
        m_held_by_team[e.payer] += e.amount;
        return;
    }
    if (e.reason == EntryReason::charge || e.reason == EntryReason::fee) {
        Earnings& got = m_earnings[e.attempt];
        got.charged_at_ms = e.at_ms;
        if (e.reason == EntryReason::fee) {
            got.fee += e.amount;
        } else {
            got.provider = e.credit.team;
            got.charge += e.amount;
            if (e.credit.kind == AccountKind::settling) {
                got.settling += e.amount;
                m_settling.insert({e.at_ms, e.attempt});
            }
        }
    }
    if (e.reason != EntryReason::release) {
        auto& spent = m_spent_by_team[e.payer];
        spent.push_back({e.at_ms, (spent.empty() ? 0 : spent.back().total) + e.amount});
    }
    m_held_by_team[e.payer] -= e.amount;
    auto it = m_held.find(e.attempt);
    it->second -= e.amount;
    if (it->second == 0) {
        m_held.erase(it);
        m_closed.insert(e.attempt);
    }
}

Micro Ledger::balance(const Account& a) const {
    auto it = m_balances.find(a);
    return it == m_balances.end() ? 0 : it->second;
}

Micro Ledger::total() const {
    Micro sum = 0;
    for (const auto& [a, b] : m_balances) {
        sum += b;
    }
    return sum;
}

Micro Ledger::held(std::int64_t attempt) const {
    auto it = m_held.find(attempt);
    return it == m_held.end() ? 0 : it->second;
}

Micro Ledger::held_by_team(std::int64_t team) const {
    auto it = m_held_by_team.find(team);
    return it == m_held_by_team.end() ? 0 : it->second;
}

Micro Ledger::charged(std::int64_t attempt) const {
    auto it = m_earnings.find(attempt);
    return it == m_earnings.end() ? 0 : it->second.charge + it->second.fee - it->second.refunded;
}

Ledger::Earnings Ledger::earnings(std::int64_t attempt) const {
    auto it = m_earnings.find(attempt);
    return it == m_earnings.end() ? Earnings{} : it->second;
}

std::vector<std::int64_t> Ledger::settling_due(std::int64_t until_ms) const {
    std::vector<std::int64_t> out;
    for (auto it = m_settling.begin(); it != m_settling.end() && it->first <= until_ms; ++it) {
        out.push_back(it->second);
    }
    return out;
}

bool Ledger::has_hold(std::int64_t attempt) const {
    return m_payer.count(attempt) != 0;
}

bool Ledger::closed(std::int64_t attempt) const {
    return m_closed.count(attempt) != 0;
}

Micro Ledger::spent_since(std::int64_t team, std::int64_t since_ms) const {
    auto it = m_spent_by_team.find(team);
    if (it == m_spent_by_team.end()) {
        return 0;
    }
    const auto& spent = it->second;
    auto first = std::partition_point(spent.begin(), spent.end(), [&](const Spent& s) { return s.at_ms < since_ms; });
    if (first == spent.end()) {
        return 0;
    }
    return spent.back().total - (first == spent.begin() ? 0 : std::prev(first)->total);
}

std::optional<std::string> Ledger::verify(const std::map<Account, Micro>& cached) const {
    Micro sum = 0;
    for (const auto& [a, b] : cached) {
        sum += b;
        if (balance(a) != b) {
            return "account " + to_string(a) + " has a cached balance of " + format_credits(b) +
                   " but its entries add up to " + format_credits(balance(a));
        }
    }
    for (const auto& [a, b] : m_balances) {
        if (b != 0 && cached.count(a) == 0) {
            return "account " + to_string(a) + " has entries adding up to " + format_credits(b) +
                   " but no cached balance";
        }
    }
    if (sum != 0) {
        return "the cached balances add up to " + format_credits(sum) + ", not 0";
    }
    return std::nullopt;
}

Entry Ledger::hold_entry(std::int64_t id, std::int64_t at_ms, std::int64_t attempt, std::int64_t team, Micro amount) {
    Entry e;
    e.id = id;
    e.at_ms = at_ms;
    e.debit = Account::of_team(team);
    e.credit = Account::escrow();
    e.amount = amount;
    e.reason = EntryReason::hold;
    e.attempt = attempt;
    e.payer = team;
    return e;
}

std::vector<Entry> Ledger::settlement_entries(std::int64_t first_id, std::int64_t at_ms, std::int64_t attempt,
                                              std::int64_t payer, std::int64_t provider, const Settlement& s,
                                              bool settle_later) {
    std::vector<Entry> out;
    auto add = [&](EntryReason reason, Account to, Micro amount) {
        if (amount <= 0) {
            return;
        }
        Entry e;
        e.id = first_id + static_cast<std::int64_t>(out.size());
        e.at_ms = at_ms;
        e.debit = Account::escrow();
        e.credit = to;
        e.amount = amount;
        e.reason = reason;
        e.attempt = attempt;
        e.payer = payer;
        out.push_back(e);
    };
    add(EntryReason::charge, settle_later ? Account::settling_of(provider) : Account::of_team(provider), s.provider);
    add(EntryReason::fee, Account::pool_fee(), s.fee);
    add(EntryReason::release, Account::of_team(payer), s.refund);
    return out;
}

Entry Ledger::check_pay_entry(std::int64_t id, std::int64_t at_ms, std::int64_t attempt, std::int64_t payer,
                              std::int64_t provider, Micro amount) {
    Entry e;
    e.id = id;
    e.at_ms = at_ms;
    e.debit = Account::pool_fee();
    e.credit = Account::of_team(provider);
    e.amount = amount;
    e.reason = EntryReason::check_pay;
    e.attempt = attempt;
    e.payer = payer;
    return e;
}

std::optional<Entry> Ledger::payout_entry(std::int64_t id, std::int64_t at_ms, std::int64_t attempt) const {
    auto it = m_earnings.find(attempt);
    if (it == m_earnings.end() || it->second.settling <= 0) {
        return std::nullopt;
    }
    Entry e;
    e.id = id;
    e.at_ms = at_ms;
    e.debit = Account::settling_of(it->second.provider);
    e.credit = Account::of_team(it->second.provider);
    e.amount = it->second.settling;
    e.reason = EntryReason::payout;
    e.attempt = attempt;
    e.payer = m_payer.at(attempt);
    return e;
}

std::vector<Entry> Ledger::refund_entries(std::int64_t first_id, std::int64_t at_ms, std::int64_t attempt,
                                          const std::string& note) const {
    std::vector<Entry> out;
    auto it = m_earnings.find(attempt);
    if (it == m_earnings.end()) {
        return out;
    }
    const Earnings& got = it->second;
    if (got.refunded > 0) {
        return out; // voided already
    }
    const std::int64_t payer = m_payer.at(attempt);
    auto add = [&](Account from, Micro amount) {
        if (amount <= 0 || from == Account::of_team(payer)) {
            return; // nothing to give back, or the team paid itself (no fee between one team)
        }
        Entry e;
        e.id = first_id + static_cast<std::int64_t>(out.size());
        e.at_ms = at_ms;
        e.debit = from;
        e.credit = Account::of_team(payer);
        e.amount = amount;
        e.reason = EntryReason::refund;
        e.attempt = attempt;
        e.payer = payer;
        e.note = note;
        out.push_back(e);
    };
    add(Account::settling_of(got.provider), got.settling);
    add(Account::of_team(got.provider), got.charge - got.settling);
    add(Account::pool_fee(), got.fee);
    return out;
}

} // namespace gpupool::credits
