// The ledger's tables in SqliteStore: entries are written once, balances with them, all or nothing.
#include "core/store/sqlite_store.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_sqlite_store_ledger {

using namespace gpupool;
using namespace gpupool::store;
using credits::Account;

namespace {

LedgerEntry grant_entry(std::int64_t id, std::int64_t amount) {
    LedgerEntry e;
    e.id = id;
    e.at_ms = 1000 + id;
    e.debit = Account::issuer();
    e.credit = Account::of_team(1);
    e.amount = amount;
    e.reason = credits::EntryReason::grant;
    e.grant = id;
    e.note = "n" + std::to_string(id);
    return e;
}

} // namespace

TEST_CASE("store: ledger entries, balances and grants round-trip, an entry id is written once", "[store][credits]") {
    test::TempDir dir;
    auto db = SqliteStore::open(dir.path() / "pool.db").value();
    CHECK(db->schema_version() == k_schema_version);
    Changes c;
    c.teams.push_back({TeamId(1), "fellows", 1, 100, 5'000'000, std::nullopt});
    c.ledger.push_back(grant_entry(1, 7));
    c.balances.push_back({Account::issuer(), -7});
    c.balances.push_back({Account::of_team(1), 7});
    c.grants.push_back({1, TeamId(1), 7, 99'000, "n1", 1001, std::nullopt});
    REQUIRE(db->apply(c));

    // A second write of entry 1 fails the whole apply: the balance in it is not written either.
    Changes dup;
    dup.ledger.push_back(grant_entry(1, 9));
    dup.balances.push_back({Account::of_team(1), 16});
    CHECK_FALSE(db->apply(dup));

    auto snap = db->load().value();
    REQUIRE(snap.ledger.size() == 1);
    CHECK(snap.ledger[0] == grant_entry(1, 7));
    REQUIRE(snap.balances.size() == 2);
    CHECK(snap.balances[1].account == Account::of_team(1));
    CHECK(snap.balances[1].balance == 7);
    REQUIRE(snap.grants.size() == 1);
    CHECK(snap.grants[0].expires_at == 99'000);
    CHECK(snap.teams[0].budget_day_micro == 5'000'000);
    CHECK_FALSE(snap.teams[0].budget_week_micro);

    // Settling accounts and the payout and refund reasons round-trip too.
    Changes settle;
    LedgerEntry payout = grant_entry(3, 2);
    payout.debit = Account::settling_of(1);
    payout.reason = credits::EntryReason::payout;
    payout.grant = 0;
    payout.attempt = 5;
    payout.payer = 1;
    LedgerEntry refund = payout;
    refund.id = 4;
    refund.reason = credits::EntryReason::refund;
    settle.ledger = {payout, refund};
    settle.balances.push_back({Account::settling_of(1), -4});
    REQUIRE(db->apply(settle));
    snap = db->load().value();
    REQUIRE(snap.ledger.size() == 3);
    CHECK(snap.ledger[1] == payout);
    CHECK(snap.ledger[2] == refund);
    CHECK(snap.balances[1].account == Account::settling_of(1));

    // A zero or negative amount is refused by the schema too.
    Changes zero;
    zero.ledger.push_back(grant_entry(2, 0));
    CHECK_FALSE(db->apply(zero));
}

} // namespace test_sqlite_store_ledger
} // namespace
