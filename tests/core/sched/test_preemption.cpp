#include "core/sched/preemption.hpp"
#include "core/sched/scheduler.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

using namespace gpupool::sched;
using namespace gpupool::sched::test;

namespace {

RunningJob running(std::int64_t id, std::int64_t worker, std::uint32_t gpu, std::int64_t milli, Priority p,
                   std::int64_t started, std::int64_t team = 1) {
    RunningJob r;
    r.job = JobId(id);
    r.attempt = AttemptId(100 + id);
    r.team = TeamId(team);
    r.priority = p;
    r.worker = WorkerId(worker);
    r.gpu_indices = {gpu};
    r.gpu_milli = milli;
    r.cpu_milli = 1000;
    r.memory_mib = 1024;
    r.started_at = started;
    return r;
}

JobRequest high_job(std::int64_t id, std::int64_t milli) {
    JobRequest j = share_job(id, milli);
    j.priority = Priority::high;
    j.team = TeamId(2);
    return j;
}

// Worker 1: one GPU shared by two low jobs; worker 2: one GPU used by one low job.
ClusterView two_workers() {
    ClusterView v;
    v.workers = {worker(1, {0}, 30000, 129024), worker(2, {0}, 31000, 130048)};
    v.running = {running(1, 1, 0, 500, Priority::low, 0), running(2, 1, 0, 500, Priority::low, 0),
                 running(3, 2, 0, 1000, Priority::low, 0)};
    return v;
}

PreemptionPolicy policy() {
    PreemptionPolicy p;
    p.min_runtime_s = 600;
    return p;
}

} // namespace

TEST_CASE("preemption picks the smallest victim set") {
    ClusterView v = two_workers();
    FairShareSorter shares(v.teams, OrderingPolicy{});
    auto set = find_victims(v.workers, v.running, high_job(9, 1000), shares, 1000, policy(), {});
    REQUIRE(set);
    // worker 2 needs one victim, worker 1 two
    CHECK(set->worker == 1);
    CHECK(set->victims == std::vector<std::size_t>{2});
}

TEST_CASE("preemption of part of a GPU takes one victim when one is enough") {
    ClusterView v = two_workers();
    FairShareSorter shares(v.teams, OrderingPolicy{});
    v.running[2].started_at = 900; // worker 2's job is too young at t = 1000
    auto set = find_victims(v.workers, v.running, high_job(9, 400), shares, 1000, policy(), {});
    REQUIRE(set);
    CHECK(set->worker == 0);
    CHECK(set->victims.size() == 1);
}

TEST_CASE("preemption never takes a victim younger than the minimum runtime") {
    ClusterView v = two_workers();
    for (auto& r : v.running) {
        r.started_at = 500; // ran 500 s at t = 1000, minimum 600
    }
    FairShareSorter shares(v.teams, OrderingPolicy{});
    CHECK_FALSE(find_victims(v.workers, v.running, high_job(9, 1000), shares, 1000, policy(), {}));
    CHECK(find_victims(v.workers, v.running, high_job(9, 1000), shares, 1100, policy(), {}));
}

TEST_CASE("preemption never takes a high job, and only high jobs preempt") {
    ClusterView v = two_workers();
    for (auto& r : v.running) {
        r.priority = Priority::high;
    }
    FairShareSorter shares(v.teams, OrderingPolicy{});
    CHECK_FALSE(find_victims(v.workers, v.running, high_job(9, 1000), shares, 1000, policy(), {}));
    ClusterView v2 = two_workers();
    JobRequest normal = high_job(9, 1000);
    normal.priority = Priority::normal;
    CHECK_FALSE(find_victims(v2.workers, v2.running, normal, shares, 1000, policy(), {}));
}

TEST_CASE("normal jobs are victims only when their team is above its fair share") {
    ClusterView v = two_workers();
    for (auto& r : v.running) {
        r.priority = Priority::normal;
    }
    // team 1 (the victims') used 90 of 100 GPU-seconds with half the weight: above
    FairShareSorter greedy({TeamShare{TeamId(1), 1.0, 90.0}, TeamShare{TeamId(2), 1.0, 10.0}}, OrderingPolicy{});
    CHECK(find_victims(v.workers, v.running, high_job(9, 1000), greedy, 1000, policy(), {}));
    FairShareSorter modest({TeamShare{TeamId(1), 1.0, 10.0}, TeamShare{TeamId(2), 1.0, 90.0}}, OrderingPolicy{});
    CHECK_FALSE(find_victims(v.workers, v.running, high_job(9, 1000), modest, 1000, policy(), {}));
}

TEST_CASE("schedule() reports victims with the grace deadline and keeps the job queued") {
    ClusterView v = two_workers();
    Policy p;
    p.preemption.grace_s = 45;
    Decisions d = schedule(v, {high_job(9, 1000)}, p, 1000);
    CHECK(d.placements.empty());
    REQUIRE(d.preemptions.size() == 1);
    CHECK(d.preemptions[0].victim == JobId(3));
    CHECK(d.preemptions[0].attempt == AttemptId(103));
    CHECK(d.preemptions[0].for_job == JobId(9));
    CHECK(d.preemptions[0].stop_by == 1045);
    REQUIRE(d.waiting.size() == 1);
    CHECK(d.waiting[0].outcome == PlaceOutcome::not_now);
    CHECK_THAT(d.waiting[0].reason, Catch::Contains("preempting 1 job(s) on worker w2"));
}

TEST_CASE("two high jobs do not share a victim") {
    ClusterView v = two_workers();
    Decisions d = schedule(v, {high_job(8, 1000), high_job(9, 1000)}, Policy{}, 1000);
    REQUIRE(d.preemptions.size() == 3); // one victim for the first, the two on worker 1 for the second
    std::vector<std::int64_t> victims;
    for (const auto& pr : d.preemptions) {
        victims.push_back(pr.victim.value());
    }
    std::sort(victims.begin(), victims.end());
    CHECK(victims == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("preemption frees job slots: a worker at its --slots cap can still take a high job") {
    ClusterView v;
    v.workers = {worker(1, {500}, 30000, 129024)}; // half the GPU is free, but no slot is
    v.workers[0].slots_free = 0;
    v.running = {running(1, 1, 0, 250, Priority::low, 0), running(2, 1, 0, 250, Priority::low, 0)};
    FairShareSorter shares(v.teams, OrderingPolicy{});
    auto one = find_victims(v.workers, v.running, high_job(9, 500), shares, 1000, policy(), {});
    REQUIRE(one);
    CHECK(one->victims.size() == 1);

    // The owner lowered --slots to 1 while two jobs run: one slot short, so two victims.
    v.workers[0].slots_free = -1;
    auto two = find_victims(v.workers, v.running, high_job(9, 500), shares, 1000, policy(), {});
    REQUIRE(two);
    CHECK(two->victims == std::vector<std::size_t>{0, 1});
}

TEST_CASE("preemption never makes room on a worker whose owner does not take the job") {
    ClusterView v = two_workers();
    v.workers[1].terms = WorkerTerms{0, std::vector<TeamId>{TeamId(1)}, {}}; // worker 2 takes team 1 only
    FairShareSorter shares(v.teams, OrderingPolicy{});
    auto set = find_victims(v.workers, v.running, high_job(9, 1000), shares, 1000, policy(), {}); // team 2
    REQUIRE(set);
    CHECK(set->worker == 0); // two victims on worker 1 rather than the one on worker 2
    CHECK(set->victims.size() == 2);
    v.workers[0].terms = v.workers[1].terms;
    CHECK_FALSE(find_victims(v.workers, v.running, high_job(9, 1000), shares, 1000, policy(), {}).has_value());
}
