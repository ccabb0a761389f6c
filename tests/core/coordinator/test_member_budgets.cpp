// Who submitted a job, and a member's own budget within the team's (real coordinator, SQLite file,
// manual clock).
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_member_budgets {

using namespace gpupool;
using namespace gpupool::coordinator;
using namespace gpupool::test::credit_pool;

namespace {

Principal member(CreditPool& p, const std::string& label) {
    auto t = create_token(*p.coord, p.admin, store::Role::member, "fellows", label);
    REQUIRE(t);
    return p.coord->authenticate(t->secret).value();
}

JobId submit_as(CreditPool& p, const Principal& who, recipe::JobSpec spec, bool allow_unfunded = true) {
    auto r = coordinator::submit(*p.coord, who,
                                 SubmitRequest{"eval.toml", 0, {std::move(spec)}, std::nullopt, allow_unfunded});
    REQUIRE(r);
    return r->jobs.front();
}

std::vector<std::int64_t> ids(const JobList& list) {
    std::vector<std::int64_t> out;
    for (const auto& j : list.jobs) {
        out.push_back(j.id.value());
    }
    return out;
}

} // namespace

TEST_CASE("jobs record who submitted them, and the list filters by it", "[coordinator][budgets]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const Principal alice = member(p, "alice");
    const Principal bob = member(p, "bob");
    const JobId a = submit_as(p, alice, half_l4("a"));
    const JobId b = submit_as(p, bob, half_l4("b"));
    CHECK(submitter_of(*p.coord, a) == "alice");
    CHECK(submitter_of(*p.coord, b) == "bob");

    JobQuery by_label;
    by_label.submitter_label = "bob";
    CHECK(ids(list_jobs(*p.coord, alice, by_label).value()) == std::vector<std::int64_t>{b.value()});
    JobQuery mine;
    mine.submitter_token = alice.token_id;
    CHECK(ids(list_jobs(*p.coord, alice, mine).value()) == std::vector<std::int64_t>{a.value()});
    JobQuery nobody;
    nobody.submitter_label = "carol";
    CHECK(list_jobs(*p.coord, alice, nobody).value().jobs.empty());

    // Still known after a restart (the sweep keeps the token) and after the token is revoked.
    REQUIRE(revoke_token(*p.coord, p.admin, bob.token_id));
    REQUIRE(p.restart());
    CHECK(submitter_of(*p.coord, b) == "bob");
}

TEST_CASE("a member's own budget holds back its jobs, not its teammates'", "[coordinator][budgets]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const Principal alice = member(p, "alice");
    const Principal bob = member(p, "bob");
    // Alice may spend 0.5 credits a day: one half-L4 hour (its hold is 0.5).
    BudgetChange change{"fellows", "alice", CapChange::set(k_credit / 2), CapChange::keep()};
    auto set = change_budget(*p.coord, p.admin, change);
    REQUIRE(set);
    CHECK(set->label == "alice");
    CHECK(set->day_micro == k_credit / 2);
    CHECK_FALSE(set->week_micro);

    // Submit refuses what her budget cannot cover, naming it.
    auto refused = coordinator::submit(
        *p.coord, alice, SubmitRequest{"eval.toml", 0, {half_l4("a1"), half_l4("a2")}, std::nullopt, false});
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message,
               Catch::Contains("your own budget (member `alice`) allows 0.5 credits more now"));
    // The estimate says what her budget leaves.
    auto est = estimate_cost(*p.coord, alice, "eval.toml", {half_l4("a1")}, std::nullopt);
    REQUIRE(est);
    REQUIRE(est->budget_room_micro);
    CHECK(*est->budget_room_micro == k_credit / 2);

    const JobId a1 = submit_as(p, alice, half_l4("a1"));
    const JobId a2 = submit_as(p, alice, half_l4("a2"));
    const JobId b1 = submit_as(p, bob, half_l4("b1"));
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    // One of alice's (0.5 fits her budget) and bob's; her second waits for her budget.
    auto placed = coordinator::assignments(*p.coord, p.owner_worker).value();
    std::vector<std::int64_t> jobs;
    for (const auto& a : placed) {
        jobs.push_back(a.job.value());
    }
    std::sort(jobs.begin(), jobs.end());
    CHECK(jobs == std::vector<std::int64_t>{a1.value(), b1.value()});
    CHECK_THAT(waiting_reason(*p.coord, a2), Catch::Contains("waiting for credits") &&
                                                 Catch::Contains("member `alice` can hold 0 credits now") &&
                                                 Catch::Contains("budget 0.5/day, 0.5 spent or held"));

    // The team's view lists her caps and what she holds.
    auto view = credits_of(*p.coord, bob, std::nullopt).value();
    REQUIRE(view.members.size() == 1);
    CHECK(view.members[0].label == "alice");
    CHECK(view.members[0].held_micro == k_credit / 2);

    // Her first job ends after 30 minutes: 0.25 spent, 0.25 room, still less than a hold of 0.5.
    const AttemptId first = placed[0].job == a1 ? placed[0].attempt : placed[1].attempt;
    REQUIRE(coordinator::start_attempt(*p.coord, p.owner_worker, first));
    p.clock.advance_ms(30 * 60 * 1000);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, first, 0, ""));
    p.coord->tick();
    view = credits_of(*p.coord, alice, std::nullopt).value();
    CHECK(view.members[0].spent_day_micro == k_credit / 4);
    CHECK(view.members[0].held_micro == 0);
    CHECK_THAT(waiting_reason(*p.coord, a2), Catch::Contains("member `alice` can hold 0.25 credits now"));

    // Caps survive a restart; a day later her budget has room again; `remove` lifts it.
    REQUIRE(p.restart());
    CHECK(credits_of(*p.coord, alice, std::nullopt).value().members.at(0).day_micro == k_credit / 2);
    p.clock.advance_ms(24LL * 3600 * 1000 + 1000);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    INFO(waiting_reason(*p.coord, a2));
    CHECK(waiting_reason(*p.coord, a2).empty());
    change.day = CapChange::remove();
    REQUIRE(change_budget(*p.coord, p.admin, change));
    CHECK(credits_of(*p.coord, alice, std::nullopt).value().members.empty());
    p.check_books();
}

TEST_CASE("budget changes: members are named by label or id, only admins change them, a cap left out is kept",
          "[coordinator][budgets]") {
    CreditPool p;
    const Principal alice = member(p, "alice");
    member(p, "twin");
    member(p, "twin");
    CHECK_FALSE(change_budget(*p.coord, alice, BudgetChange{"fellows", "alice", CapChange::set(1), CapChange::keep()}));
    auto unknown =
        change_budget(*p.coord, p.admin, BudgetChange{"fellows", "carol", CapChange::set(1), CapChange::keep()});
    REQUIRE_FALSE(unknown);
    CHECK(unknown.error().field == "member");
    CHECK_THAT(unknown.error().message, Catch::Contains("no live member token labelled `carol`"));
    auto twins =
        change_budget(*p.coord, p.admin, BudgetChange{"fellows", "twin", CapChange::set(1), CapChange::keep()});
    REQUIRE_FALSE(twins);
    CHECK_THAT(twins.error().message, Catch::Contains("2 member tokens") && Catch::Contains("by its id"));
    // Another team's member is not found through this team.
    CHECK_FALSE(
        change_budget(*p.coord, p.admin, BudgetChange{"owners", "alice", CapChange::set(1), CapChange::keep()}));
    CHECK_FALSE(
        change_budget(*p.coord, p.admin, BudgetChange{"fellows", "alice", CapChange::set(-1), CapChange::keep()}));

    const std::string by_id = std::to_string(alice.token_id.value());
    REQUIRE(change_budget(*p.coord, p.admin,
                          BudgetChange{"fellows", by_id, CapChange::set(2 * k_credit), CapChange::set(5 * k_credit)}));
    auto kept =
        change_budget(*p.coord, p.admin, BudgetChange{"fellows", "alice", CapChange::keep(), CapChange::remove()});
    REQUIRE(kept);
    CHECK(kept->day_micro == 2 * k_credit);
    CHECK_FALSE(kept->week_micro);
    // The team's own caps are untouched by a member's.
    auto team = credits_of(*p.coord, p.admin, std::string("fellows")).value();
    CHECK_FALSE(team.budget_day_micro);
    CHECK_FALSE(team.budget_week_micro);
}

} // namespace test_member_budgets
} // namespace
