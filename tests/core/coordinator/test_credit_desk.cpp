// CreditDesk on its own: staged grants, adjustments, holds and settlements change nothing until
// absorbed; load() refuses a ledger whose cached balances disagree; budgets read the teams' caps;
// grants expire; first_difference compares with a desk loaded from the rows.
#include "core/coordinator/credit_desk.hpp"

#include <catch2/catch.hpp>

namespace gpupool::coordinator::test_credit_desk {
namespace {

using credits::Account;
constexpr std::int64_t k_credit = credits::k_micro_per_credit;

// Team 1 "fellows" with a day cap of 3 credits, team 2 "owners"; no jobs.
struct Desk {
    CreditOptions options;
    TokenBook tokens;
    JobBook jobs{30'000};
    CreditDesk desk{options, tokens, jobs};
    Desk() {
        store::Changes c;
        c.teams = {{TeamId(1), "fellows", 1, 0, 3 * k_credit, std::nullopt},
                   {TeamId(2), "owners", 1, 0, std::nullopt, std::nullopt}};
        tokens.absorb(c);
    }
    // Stages, then absorbs as a commit would.
    void commit(store::Changes& c) {
        desk.stage_balances(c);
        desk.absorb(c);
    }
};

} // namespace

TEST_CASE("credit desk: a staged grant is nothing until absorbed, then it is the team's balance",
          "[coordinator][components][credit_desk]") {
    Desk d;
    store::Changes c;
    auto g = d.desk.stage_grant(TeamId(1), 10 * k_credit, 5'000, "cohort 3", 1'000, c);
    REQUIRE(g.has_value());
    CHECK(g->id == 1);
    CHECK(d.desk.ledger().balance(Account::of_team(1)) == 0);
    CHECK(d.desk.grants().empty());
    d.commit(c);
    REQUIRE(c.balances.size() == 2); // the issuer's and the team's, cached with the entry
    CHECK(d.desk.ledger().balance(Account::of_team(1)) == 10 * k_credit);
    CHECK(d.desk.grants().at(1).expires_at == 5'000);
    // Refused, naming the field, with nothing staged.
    store::Changes bad;
    CHECK(d.desk.stage_grant(TeamId(1), 0, std::nullopt, "", 1'000, bad).error().field == "amount_micro");
    CHECK(d.desk.stage_grant(TeamId(1), k_credit, 999, "", 1'000, bad).error().field == "expires_at");
    CHECK(d.desk.stage_adjustment(TeamId(1), k_credit, "", 1'000, bad).error().field == "note");
    CHECK(d.desk.stage_adjustment(TeamId(1), 0, "why", 1'000, bad).error().field == "amount_micro");
    CHECK(bad.ledger.empty());
    CHECK(bad.grants.empty());
}

TEST_CASE("credit desk: an expired grant gives back what is left of it, up to the balance",
          "[coordinator][components][credit_desk]") {
    Desk d;
    store::Changes c;
    REQUIRE(d.desk.stage_grant(TeamId(1), 10 * k_credit, 5'000, "cohort 3", 1'000, c).has_value());
    REQUIRE(d.desk.stage_adjustment(TeamId(1), -4 * k_credit, "spent elsewhere", 1'000, c).has_value());
    d.commit(c);
    store::Changes early;
    d.desk.stage_grant_expiries(4'999, early);
    CHECK(early.empty());
    store::Changes due;
    d.desk.stage_grant_expiries(5'000, due);
    REQUIRE(due.ledger.size() == 1);
    CHECK(due.ledger[0].amount == 6 * k_credit);
    CHECK(due.ledger[0].reason == credits::EntryReason::expiry);
    REQUIRE(due.grants.size() == 1);
    CHECK(due.grants[0].expired_at == 5'000);
    d.commit(due);
    CHECK(d.desk.ledger().balance(Account::of_team(1)) == 0);
    store::Changes again;
    d.desk.stage_grant_expiries(9'000, again);
    CHECK(again.empty()); // expired once
}

TEST_CASE("credit desk: budgets leave the smaller of the balance and the caps",
          "[coordinator][components][credit_desk]") {
    Desk d;
    store::Changes c;
    REQUIRE(d.desk.stage_grant(TeamId(1), 10 * k_credit, std::nullopt, "", 0, c).has_value());
    REQUIRE(d.desk.stage_grant(TeamId(2), 2 * k_credit, std::nullopt, "", 0, c).has_value());
    d.commit(c);
    CHECK(d.desk.team_caps_room(TeamId(1), 1'000) == 3 * k_credit);
    CHECK(d.desk.budget_room(TeamId(1), 1'000) == 3 * k_credit); // the cap binds
    CHECK_FALSE(d.desk.team_caps_room(TeamId(2), 1'000).has_value());
    CHECK(d.desk.budget_room(TeamId(2), 1'000) == 2 * k_credit); // the balance binds
    CHECK(d.desk.team_can_hold(TeamId(1), 3 * k_credit, 1'000) ==
          "team `fellows` can hold 3 credits now (balance 10; budget 3/day, 0 spent or held)");
    CHECK_FALSE(d.desk.member_room(TokenId(9), 1'000).has_value()); // no such member: no caps
}

TEST_CASE("credit desk: load() rebuilds the ledger from its rows and refuses cached balances that disagree",
          "[coordinator][components][credit_desk]") {
    Desk d;
    store::Changes c;
    REQUIRE(d.desk.stage_grant(TeamId(1), 10 * k_credit, std::nullopt, "", 0, c).has_value());
    d.commit(c);
    Desk loaded;
    REQUIRE(static_cast<bool>(loaded.desk.load(c.ledger, c.balances)));
    store::Changes grants;
    grants.grants = c.grants;
    loaded.desk.absorb(grants);
    CHECK_FALSE(d.desk.first_difference(loaded.desk).has_value());
    // A cached balance edited by hand: refused, saying so.
    auto tampered = c.balances;
    tampered[0].balance += 1;
    Desk refused;
    auto st = refused.desk.load(c.ledger, tampered);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == ErrorCode::io);
    CHECK(st.error().message.find("cached balances disagree") != std::string::npos);
    // A desk that missed an entry differs from the rows.
    Desk behind;
    CHECK(behind.desk.first_difference(loaded.desk) == "ledger: 0 entries kept, 1 in the store");
}

} // namespace gpupool::coordinator::test_credit_desk
