// The ledger's rules, and the property that random histories keep the books balanced.
#include "core/credits/ledger.hpp"

#include <catch2/catch.hpp>

#include <random>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_ledger {

using namespace gpupool::credits;

namespace {

Entry grant(std::int64_t id, std::int64_t team, Micro amount) {
    Entry e;
    e.id = id;
    e.debit = Account::issuer();
    e.credit = Account::of_team(team);
    e.amount = amount;
    e.reason = EntryReason::grant;
    e.grant = id;
    return e;
}

void apply_all(Ledger& l, const std::vector<Entry>& es) {
    for (const auto& e : es) {
        auto why = l.check(e);
        INFO(why.value_or(""));
        REQUIRE_FALSE(why);
        l.apply(e);
    }
}

} // namespace

TEST_CASE("ledger: a grant, a hold and a settlement move exactly what they say", "[credits]") {
    Ledger l;
    apply_all(l, {grant(1, 1, 100)});
    CHECK(l.balance(Account::issuer()) == -100);
    CHECK(l.balance(Account::of_team(1)) == 100);
    apply_all(l, {Ledger::hold_entry(2, 0, 7, 1, 60)});
    CHECK(l.balance(Account::of_team(1)) == 40);
    CHECK(l.held(7) == 60);
    CHECK(l.held_by_team(1) == 60);
    // cost 25 of a 60 hold, 10% fee: provider 23 (25 - 2 fee rounded down... 2.5 -> 2), fee 2, refund 35
    Settlement s = settle(60, 25, true, 100'000, false);
    CHECK(s.provider == 23);
    CHECK(s.fee == 2);
    CHECK(s.refund == 35);
    apply_all(l, Ledger::settlement_entries(3, 0, 7, 1, 2, s));
    CHECK(l.held(7) == 0);
    CHECK(l.closed(7));
    CHECK(l.charged(7) == 25);
    CHECK(l.balance(Account::of_team(2)) == 23);
    CHECK(l.balance(Account::pool_fee()) == 2);
    CHECK(l.balance(Account::of_team(1)) == 75);
    CHECK(l.total() == 0);
    CHECK(l.spent_since(1, 0) == 25);
}

TEST_CASE("ledger: who pays — worker faults and owner preemptions cost nothing", "[credits]") {
    Settlement fault = settle(60, 25, false, 100'000, false);
    CHECK(fault.provider == 0);
    CHECK(fault.fee == 0);
    CHECK(fault.refund == 60);
    Settlement over = settle(60, 90, true, 0, false); // ran past max_runtime: capped at the hold
    CHECK(over.provider == 60);
    CHECK(over.refund == 0);
    Settlement own = settle(60, 30, true, 100'000, true); // own GPUs: no pool fee
    CHECK(own.fee == 0);
    CHECK(own.provider == 30);
}

TEST_CASE("ledger: entries that break the rules are refused", "[credits]") {
    Ledger l;
    apply_all(l, {grant(1, 1, 100), Ledger::hold_entry(2, 0, 7, 1, 60)});
    Entry zero = grant(3, 1, 0);
    CHECK(l.check(zero));
    Entry second_hold = Ledger::hold_entry(3, 0, 7, 1, 10);
    CHECK(l.check(second_hold)->find("already has a hold") != std::string::npos);
    Entry too_much = Ledger::settlement_entries(3, 0, 7, 1, 2, Settlement{70, 0, 0}).front();
    CHECK(l.check(too_much)->find("only 0.00006") != std::string::npos);
    Entry stale_id = grant(2, 1, 5);
    CHECK(l.check(stale_id));
    Entry no_hold = Ledger::settlement_entries(3, 0, 8, 1, 2, Settlement{0, 0, 5}).front();
    CHECK(l.check(no_hold)->find("no hold") != std::string::npos);
    apply_all(l, Ledger::settlement_entries(3, 0, 7, 1, 2, settle(60, 10, true, 0, false)));
    Entry twice = Ledger::settlement_entries(10, 0, 7, 1, 2, Settlement{0, 0, 1}).front();
    CHECK(l.check(twice)->find("already settled") != std::string::npos);
    Entry grant_into_escrow = grant(11, 1, 5);
    grant_into_escrow.credit = Account::escrow();
    CHECK(l.check(grant_into_escrow));
}

TEST_CASE("ledger: earnings settle before they are paid out, and a voided attempt is refunded", "[credits]") {
    Ledger l;
    apply_all(l, {grant(1, 1, 100), Ledger::hold_entry(2, 1'000, 7, 1, 60), Ledger::hold_entry(3, 1'000, 8, 1, 60)});
    const Settlement s = settle(60, 25, true, 100'000, false); // provider 23, fee 2, back 35
    apply_all(l, Ledger::settlement_entries(4, 2'000, 7, 1, 2, s, /*settle_later=*/true));
    apply_all(l, Ledger::settlement_entries(7, 3'000, 8, 1, 2, s, /*settle_later=*/true));
    CHECK(l.balance(Account::of_team(2)) == 0);
    CHECK(l.balance(Account::settling_of(2)) == 46);
    CHECK(l.earnings(7).settling == 23);
    CHECK(l.settling_due(1'999).empty());
    CHECK(l.settling_due(2'000) == std::vector<std::int64_t>{7});
    CHECK(l.settling_due(3'000) == std::vector<std::int64_t>{7, 8});

    // Attempt 7's period is over: its earnings reach the provider's team account.
    auto payout = l.payout_entry(10, 5'000, 7);
    REQUIRE(payout);
    CHECK(payout->amount == 23);
    apply_all(l, {*payout});
    CHECK(l.balance(Account::of_team(2)) == 23);
    CHECK(l.balance(Account::settling_of(2)) == 23);
    CHECK_FALSE(l.payout_entry(11, 5'000, 7));
    CHECK(l.settling_due(10'000) == std::vector<std::int64_t>{8});

    // Attempt 8 is voided while settling: its charge comes back from settling, its fee from the pool.
    auto refunds = l.refund_entries(11, 6'000, 8, "voided");
    REQUIRE(refunds.size() == 2);
    apply_all(l, refunds);
    CHECK(l.balance(Account::settling_of(2)) == 0);
    CHECK(l.balance(Account::pool_fee()) == 2);
    CHECK(l.balance(Account::of_team(1)) == 100 - 25);
    CHECK(l.charged(8) == 0);
    CHECK_FALSE(l.payout_entry(13, 7'000, 8)); // a voided attempt is never paid out
    CHECK(l.settling_due(10'000).empty());
    CHECK(l.refund_entries(13, 7'000, 8, "again").empty()); // voided once

    // Attempt 7, already paid out, is voided too: the provider's team pays it back (here to zero).
    apply_all(l, l.refund_entries(13, 8'000, 7, "voided"));
    CHECK(l.balance(Account::of_team(2)) == 0);
    CHECK(l.balance(Account::of_team(1)) == 100);
    CHECK(l.balance(Account::pool_fee()) == 0);
    CHECK(l.total() == 0);
}

TEST_CASE("ledger: payouts and refunds that break the rules are refused", "[credits]") {
    Ledger l;
    apply_all(l, {grant(1, 1, 100), Ledger::hold_entry(2, 0, 7, 1, 60)});
    apply_all(l, Ledger::settlement_entries(3, 0, 7, 1, 2, settle(60, 20, true, 0, false), true));
    Entry payout = *l.payout_entry(10, 0, 7);
    Entry too_much = payout;
    too_much.amount = 21;
    CHECK(l.check(too_much)->find("only 0.00002") != std::string::npos);
    Entry wrong_team = payout;
    wrong_team.credit = Account::of_team(3);
    CHECK(l.check(wrong_team));
    Entry unknown = payout;
    unknown.attempt = 9;
    CHECK(l.check(unknown)->find("no earnings settling") != std::string::npos);
    Entry refund = l.refund_entries(10, 0, 7, "v").front();
    Entry to_stranger = refund;
    to_stranger.credit = Account::of_team(3);
    CHECK(l.check(to_stranger)->find("paying team") != std::string::npos);
    Entry from_issuer = refund;
    from_issuer.debit = Account::issuer();
    CHECK(l.check(from_issuer));
    Entry over = refund;
    over.debit = Account::of_team(2);
    over.amount = 21;
    CHECK(l.check(over)->find("refunded") != std::string::npos);
    CHECK(account_from_string("settling:2") == Account::settling_of(2));
    CHECK(to_string(Account::settling_of(2)) == "settling:2");
    CHECK(entry_reason_from_string("refund") == EntryReason::refund);
}

TEST_CASE("ledger: a spot check's run is paid from the pool fee, once, to a team", "[credits][spot-checks]") {
    Ledger l;
    apply_all(l, {grant(1, 1, 100)});
    const Entry pay = Ledger::check_pay_entry(2, 0, 9, 1, 2, 30);
    CHECK(pay.debit == Account::pool_fee());
    CHECK(pay.credit == Account::of_team(2));
    apply_all(l, {pay});
    CHECK(l.balance(Account::pool_fee()) == -30); // what checking costs the pool
    CHECK(l.balance(Account::of_team(2)) == 30);
    CHECK(l.balance(Account::of_team(1)) == 100); // the team whose result was checked pays nothing
    CHECK(l.total() == 0);
    Entry twice = Ledger::check_pay_entry(3, 0, 9, 1, 2, 30);
    CHECK(l.check(twice)->find("paid for its spot check already") != std::string::npos);
    Entry from_team = Ledger::check_pay_entry(3, 0, 10, 1, 2, 30);
    from_team.debit = Account::of_team(1);
    CHECK(l.check(from_team));
    Entry to_escrow = Ledger::check_pay_entry(3, 0, 10, 1, 2, 30);
    to_escrow.credit = Account::escrow();
    CHECK(l.check(to_escrow));
    Entry no_attempt = Ledger::check_pay_entry(3, 0, 0, 1, 2, 30);
    CHECK(l.check(no_attempt));
    CHECK(to_string(EntryReason::check_pay) == std::string("check_pay"));
    CHECK(entry_reason_from_string("check_pay") == EntryReason::check_pay);
}

TEST_CASE("ledger: verify finds a cached balance that differs from the entries", "[credits]") {
    Ledger l;
    apply_all(l, {grant(1, 1, 100)});
    std::map<Account, Micro> cached = l.balances();
    CHECK_FALSE(l.verify(cached));
    cached[Account::of_team(1)] = 101;
    auto why = l.verify(cached);
    REQUIRE(why);
    CHECK(why->find("team:1") != std::string::npos);
    CHECK(why->find("1.01") == std::string::npos); // micro, not credits: 0.000101
}

// Thousands of random histories: grants, adjustments, holds, settlements of every kind (straight to
// the provider or through settling), payouts, voided attempts, double settlement attempts and
// restarts (a ledger rebuilt from its rows) — the sum stays 0, no attempt is settled twice or
// refunded more than it was charged, and every balance equals the sum of its rows.
TEST_CASE("ledger: random histories keep the books balanced (property)", "[credits][property]") {
    constexpr int k_histories = 2000;
    constexpr int k_ops = 120;
    int double_settlements_refused = 0;
    int voided = 0;
    int paid_out = 0;
    for (int seed = 1; seed <= k_histories; ++seed) {
        std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
        auto pick = [&](std::int64_t lo, std::int64_t hi) {
            return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
        };
        Ledger l;
        std::vector<std::int64_t> open;    // attempts with a hold, not settled
        std::vector<std::int64_t> settled; // attempts settled
        std::map<std::int64_t, std::int64_t> payer;
        std::int64_t next_attempt = 1;
        std::int64_t now = 0;
        for (int op = 0; op < k_ops; ++op) {
            now += pick(0, 5000);
            const std::int64_t kind = pick(0, 11);
            std::vector<Entry> batch;
            if (kind == 0) { // grant
                Entry e = grant(l.next_id(), pick(1, 4), pick(1, 10'000'000));
                e.at_ms = now;
                batch.push_back(e);
            } else if (kind == 1) { // adjustment either way
                Entry e;
                e.id = l.next_id();
                e.at_ms = now;
                e.amount = pick(1, 1'000'000);
                e.reason = EntryReason::adjustment;
                const std::int64_t team = pick(1, 4);
                e.debit = pick(0, 1) == 0 ? Account::issuer() : Account::of_team(team);
                e.credit = e.debit.kind == AccountKind::issuer ? Account::of_team(team) : Account::issuer();
                batch.push_back(e);
            } else if (kind <= 4) { // a placement holds the maximum cost (balances may go negative when not enforced)
                const std::int64_t team = pick(1, 4);
                const std::int64_t a = next_attempt++;
                payer[a] = team;
                batch.push_back(Ledger::hold_entry(l.next_id(), now, a, team, pick(1, 5'000'000)));
                open.push_back(a);
            } else if (kind <= 8 && !open.empty()) { // an attempt ends: success, failure, cancel, lost, preempted
                const auto i = static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(open.size()) - 1));
                const std::int64_t a = open[i];
                const bool chargeable = pick(0, 3) != 0; // lost and owner-preempted are not charged
                const std::int64_t provider = pick(1, 4);
                Settlement s =
                    settle(l.held(a), pick(0, 6'000'000), chargeable, pick(0, 200'000), provider == payer[a]);
                REQUIRE(s.provider + s.fee + s.refund == l.held(a));
                batch = Ledger::settlement_entries(l.next_id(), now, a, payer[a], provider, s, pick(0, 1) == 1);
                open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
                settled.push_back(a);
            } else if (kind == 10) { // the settling period of the older charges is over
                for (std::int64_t a : l.settling_due(now - 10'000)) {
                    auto e = l.payout_entry(l.next_id() + static_cast<std::int64_t>(batch.size()), now, a);
                    REQUIRE(e);
                    batch.push_back(*e);
                    ++paid_out;
                }
            } else if (kind == 11 && !settled.empty()) { // an admin voids an attempt (maybe again)
                const std::int64_t a =
                    settled[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(settled.size()) - 1))];
                batch = l.refund_entries(l.next_id(), now, a, "voided");
                voided += batch.empty() ? 0 : 1;
            } else if (!settled.empty()) { // a duplicate completion tries to settle again: refused
                const std::int64_t a =
                    settled[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(settled.size()) - 1))];
                auto again = Ledger::settlement_entries(l.next_id(), now, a, payer[a], 1, Settlement{1, 0, 0});
                REQUIRE(l.check(again.front()));
                ++double_settlements_refused;
            }
            for (const auto& e : batch) {
                auto why = l.check(e);
                INFO("seed " << seed << " op " << op << ": " << why.value_or(""));
                REQUIRE_FALSE(why);
                l.apply(e);
            }
            REQUIRE(l.total() == 0);
            if (pick(0, 19) == 0) { // restart: rebuild from the rows, verify the cached balances
                Ledger rebuilt;
                for (const auto& e : l.entries()) {
                    REQUIRE_FALSE(rebuilt.check(e));
                    rebuilt.apply(e);
                }
                REQUIRE_FALSE(rebuilt.verify(l.balances()));
                l = std::move(rebuilt);
            }
        }
        // Every balance equals the sum of its rows; escrow holds exactly the open attempts' holds.
        std::map<Account, Micro> from_rows;
        for (const auto& e : l.entries()) {
            from_rows[e.debit] -= e.amount;
            from_rows[e.credit] += e.amount;
        }
        REQUIRE_FALSE(l.verify(from_rows));
        Micro open_held = 0;
        for (auto a : open) {
            open_held += l.held(a);
        }
        REQUIRE(l.balance(Account::escrow()) == open_held);
        // The settling accounts hold exactly what is settling; nothing is refunded past its charge.
        std::map<std::int64_t, Micro> settling_by_team;
        for (auto a : settled) {
            REQUIRE(l.closed(a));
            const auto got = l.earnings(a);
            REQUIRE(got.refunded <= got.charge + got.fee);
            REQUIRE(l.charged(a) == got.charge + got.fee - got.refunded);
            settling_by_team[got.provider] += got.settling;
        }
        for (std::int64_t team = 1; team <= 4; ++team) {
            REQUIRE(l.balance(Account::settling_of(team)) == settling_by_team[team]);
        }
        // What each team spent since any moment equals the sum of its charges and fees from then on.
        for (int probe = 0; probe < 8; ++probe) {
            const std::int64_t team = pick(1, 4);
            const std::int64_t since = pick(0, now + 1);
            Micro expected = 0;
            for (const auto& e : l.entries()) {
                if ((e.reason == EntryReason::charge || e.reason == EntryReason::fee) && e.payer == team &&
                    e.at_ms >= since) {
                    expected += e.amount;
                }
            }
            REQUIRE(l.spent_since(team, since) == expected);
        }
    }
    CHECK(double_settlements_refused > 100);
    CHECK(voided > 100);
    CHECK(paid_out > 100);
}

} // namespace test_ledger
} // namespace
