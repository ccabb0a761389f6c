#include "core/sched/ordering.hpp"
#include "core/sched/scheduler.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <type_traits>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_ordering {

using namespace gpupool::sched;
using namespace gpupool::sched::test;

namespace {

JobRequest job(std::int64_t id, std::int64_t team, Priority p, std::int64_t submitted) {
    JobRequest j = share_job(id, 500);
    j.team = TeamId(team);
    j.priority = p;
    j.submitted_at = submitted;
    return j;
}

std::vector<std::int64_t> ids(const std::vector<JobRequest>& pending, const std::vector<std::size_t>& order) {
    std::vector<std::int64_t> out;
    for (auto i : order) {
        out.push_back(pending[i].id.value());
    }
    return out;
}

OrderingPolicy no_aging() {
    OrderingPolicy p;
    p.aging_s = 0;
    return p;
}

} // namespace

TEST_CASE("ids of different kinds do not mix") {
    STATIC_REQUIRE_FALSE(std::is_convertible_v<WorkerId, JobId>);
    STATIC_REQUIRE_FALSE(std::is_convertible_v<std::int64_t, TeamId>);
    STATIC_REQUIRE_FALSE(std::is_convertible_v<gpupool::SweepId, gpupool::TokenId>);
    STATIC_REQUIRE_FALSE(std::is_convertible_v<std::int64_t, gpupool::SweepId>);
    STATIC_REQUIRE_FALSE(std::is_convertible_v<gpupool::TokenId, std::int64_t>);
    STATIC_REQUIRE(JobId(3) < JobId(4));
}

TEST_CASE("class_first: priority classes come first, whatever the age or usage") {
    std::vector<JobRequest> pending{job(1, 1, Priority::low, 0), job(2, 1, Priority::normal, 50),
                                    job(3, 2, Priority::high, 100)};
    OrderingPolicy p = no_aging();
    p.mode = OrderMode::class_first;
    FairShareSorter sorter({TeamShare{TeamId(2), 1.0, 1e9}}, p); // team 2 used a lot
    CHECK(ids(pending, sorter.order(pending, 100)) == std::vector<std::int64_t>{3, 2, 1});
}

TEST_CASE("high_first: submitted-high jobs first, then fair share before class", "[sched][ordering]") {
    // team 1 used a lot, team 2 nothing: team 2's low job goes before team 1's normal one
    std::vector<JobRequest> pending{job(1, 1, Priority::normal, 0), job(2, 2, Priority::low, 50),
                                    job(3, 1, Priority::high, 100), job(4, 1, Priority::low, 10)};
    std::vector<TeamShare> usage{TeamShare{TeamId(1), 1.0, 1e6}, TeamShare{TeamId(2), 1.0, 0.0}};
    OrderingPolicy p = no_aging();
    CHECK(p.mode == OrderMode::high_first); // the default
    CHECK(ids(pending, FairShareSorter(usage, p).order(pending, 100)) == std::vector<std::int64_t>{3, 2, 1, 4});
    p.mode = OrderMode::share_first; // no high tier: team 1's high job waits for team 2 too
    CHECK(ids(pending, FairShareSorter(usage, p).order(pending, 100)) == std::vector<std::int64_t>{2, 3, 1, 4});
    p.mode = OrderMode::class_first;
    CHECK(ids(pending, FairShareSorter(usage, p).order(pending, 100)) == std::vector<std::int64_t>{3, 1, 2, 4});
    // the cursor walks the same order
    for (auto mode : {OrderMode::high_first, OrderMode::share_first, OrderMode::class_first}) {
        p.mode = mode;
        FairShareSorter sorter(usage, p);
        OrderingCursor cursor(pending, 100, p);
        std::vector<std::size_t> walked;
        while (auto i = cursor.next(sorter)) {
            walked.push_back(*i);
        }
        CHECK(walked == sorter.order(pending, 100));
    }
}

TEST_CASE("high_first: aging reorders a team's own jobs, not the teams", "[sched][ordering]") {
    OrderingPolicy p;
    p.aging_s = 3600;
    // team 1 (above its share) has a low job aged to high; team 2 a fresh normal one
    std::vector<JobRequest> pending{job(1, 1, Priority::low, 0), job(2, 2, Priority::normal, 7100),
                                    job(3, 1, Priority::normal, 7000)};
    std::vector<TeamShare> usage{TeamShare{TeamId(1), 1.0, 1e6}, TeamShare{TeamId(2), 1.0, 0.0}};
    CHECK(ids(pending, FairShareSorter(usage, p).order(pending, 7200)) == std::vector<std::int64_t>{2, 1, 3});
    p.mode = OrderMode::class_first; // before: the aged job overtook the team below its share
    CHECK(ids(pending, FairShareSorter(usage, p).order(pending, 7200)) == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("within a class, the team with the least decayed usage per weight goes first") {
    std::vector<JobRequest> pending{job(1, 1, Priority::normal, 0), job(2, 2, Priority::normal, 10)};
    // shares: team 1 = 100 / 1 = 100, team 2 = 50 / 1 = 50
    FairShareSorter equal({TeamShare{TeamId(1), 1.0, 100.0}, TeamShare{TeamId(2), 1.0, 50.0}}, no_aging());
    CHECK(ids(pending, equal.order(pending, 10)) == std::vector<std::int64_t>{2, 1});
    // shares: team 1 = 100 / 4 = 25, team 2 = 50 / 1 = 50
    FairShareSorter weighted({TeamShare{TeamId(1), 4.0, 100.0}, TeamShare{TeamId(2), 1.0, 50.0}}, no_aging());
    CHECK(ids(pending, weighted.order(pending, 10)) == std::vector<std::int64_t>{1, 2});
}

TEST_CASE("within a team and class, the oldest goes first") {
    std::vector<JobRequest> pending{job(1, 1, Priority::normal, 30), job(2, 1, Priority::normal, 10),
                                    job(3, 1, Priority::normal, 20)};
    FairShareSorter sorter({}, no_aging());
    CHECK(ids(pending, sorter.order(pending, 40)) == std::vector<std::int64_t>{2, 3, 1});
}

TEST_CASE("aging lifts a waiting job one class per aging period (starvation-free)") {
    JobRequest old_low = job(1, 1, Priority::low, 0);
    CHECK(effective_priority(old_low, 3599, 3600) == Priority::low);
    CHECK(effective_priority(old_low, 3600, 3600) == Priority::normal);
    CHECK(effective_priority(old_low, 7200, 3600) == Priority::high);
    CHECK(effective_priority(old_low, 100 * 3600, 3600) == Priority::high);
    OrderingPolicy p;
    p.aging_s = 3600;
    std::vector<JobRequest> pending{job(2, 2, Priority::normal, 7000), old_low};
    FairShareSorter sorter({}, p);
    // at 7200 s the low job has waited two periods and is now `high`
    CHECK(ids(pending, sorter.order(pending, 7200)) == std::vector<std::int64_t>{1, 2});
}

TEST_CASE("usage decays with the half-life") {
    CHECK(decay(100.0, 3600.0, 3600.0) == Approx(50.0));
    CHECK(decay(100.0, 7200.0, 3600.0) == Approx(25.0));
    UsageLedger ledger(3600.0);
    ledger.record(TeamId(1), 100.0, 0);
    ledger.record(TeamId(1), 50.0, 3600); // 100 decayed to 50, plus 50
    CHECK(ledger.usage(TeamId(1), 3600) == Approx(100.0));
    CHECK(ledger.usage(TeamId(1), 7200) == Approx(50.0));
    CHECK(ledger.usage(TeamId(2), 7200) == 0.0);
}

TEST_CASE("the cursor alternates teams as placements are charged") {
    std::vector<JobRequest> pending;
    for (int i = 0; i < 3; ++i) {
        pending.push_back(job(10 + i, 1, Priority::normal, i));
        pending.push_back(job(20 + i, 2, Priority::normal, i));
    }
    FairShareSorter sorter({}, OrderingPolicy{});
    OrderingCursor cursor(pending, 100, OrderingPolicy{});
    std::vector<std::int64_t> order;
    while (auto i = cursor.next(sorter)) {
        order.push_back(pending[*i].id.value());
        sorter.charge(pending[*i].team, 1.0);
    }
    // shares tie at first (team 1 wins by id), then the uncharged team goes
    CHECK(order == std::vector<std::int64_t>{10, 20, 11, 21, 12, 22});
}

TEST_CASE("above fair share compares usage fraction with weight fraction") {
    // usage fractions: 1 = .75, 2 = .25; weight fractions: 1 = .5, 2 = .5
    FairShareSorter s({TeamShare{TeamId(1), 1.0, 75.0}, TeamShare{TeamId(2), 1.0, 25.0}}, OrderingPolicy{});
    CHECK(s.above_fair_share(TeamId(1)));
    CHECK_FALSE(s.above_fair_share(TeamId(2)));
    // weight fractions: 1 = .8, 2 = .2
    FairShareSorter w({TeamShare{TeamId(1), 4.0, 75.0}, TeamShare{TeamId(2), 1.0, 25.0}}, OrderingPolicy{});
    CHECK_FALSE(w.above_fair_share(TeamId(1)));
    CHECK(w.above_fair_share(TeamId(2)));
}

namespace {

// Two teams keep 50 one-GPU jobs each queued (topped up every round) on a 4-GPU worker; every round all running jobs
// end after 100 s and schedule() refills the GPUs. Returns GPU-seconds per team.
std::pair<double, double> run_rounds(double weight1, double weight2, int rounds) {
    ClusterView view;
    view.workers = {worker(1, {1000, 1000, 1000, 1000})};
    Policy policy;
    policy.placement.scorer = ScorerKind::bestfit;
    policy.ordering.half_life_s = 3600;
    UsageLedger ledger(policy.ordering.half_life_s);
    double used[2] = {0.0, 0.0};
    std::int64_t next_id = 1;
    std::vector<JobRequest> pending;
    for (int r = 0; r < rounds; ++r) {
        const std::int64_t now = r * 100;
        for (std::int64_t team = 1; team <= 2; ++team) {
            auto queued = std::count_if(pending.begin(), pending.end(),
                                        [&](const JobRequest& j) { return j.team == TeamId(team); });
            for (; queued < 50; ++queued) {
                JobRequest j = whole_job(next_id++, 1);
                j.team = TeamId(team);
                j.submitted_at = now;
                pending.push_back(j);
            }
        }
        view.teams = {TeamShare{TeamId(1), weight1, ledger.usage(TeamId(1), now)},
                      TeamShare{TeamId(2), weight2, ledger.usage(TeamId(2), now)}};
        Decisions d = schedule(view, pending, policy, now);
        REQUIRE(d.placements.size() == 4);
        for (const auto& p : d.placements) {
            auto it = std::find_if(pending.begin(), pending.end(), [&](const JobRequest& j) { return j.id == p.job; });
            const TeamId team = it->team;
            ledger.record(team, 100.0, now + 100);
            used[team.value() - 1] += 100.0;
            pending.erase(it);
        }
    }
    return {used[0], used[1]};
}

} // namespace

TEST_CASE("fair share converges to the weights") {
    auto [a, b] = run_rounds(1.0, 1.0, 200);
    // equal weights: equal GPU time, within 5%
    CHECK(a / b == Approx(1.0).epsilon(0.05));
    auto [c, d] = run_rounds(3.0, 1.0, 200);
    // weights 3:1 -> GPU time 3:1 (team 2 still gets its quarter)
    CHECK(c / d == Approx(3.0).epsilon(0.1));
    CHECK(d > 0.0);
}

} // namespace test_ordering
} // namespace
