#include "core/sched/preemption.hpp"
#include "core/sched/scheduler.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_preemption {

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

namespace {

// Worker 1: two low half-GPU jobs that started recently; worker 2: one low whole-GPU job that has
// run for hours. At t = 10,000 one victim on worker 2 loses 10,000 GPU-s, two on worker 1 lose 1,000.
ClusterView old_and_young() {
    ClusterView v;
    v.workers = {worker(1, {0}, 30000, 129024), worker(2, {0}, 31000, 130048)};
    v.running = {running(1, 1, 0, 500, Priority::low, 9000), running(2, 1, 0, 500, Priority::low, 9000),
                 running(3, 2, 0, 1000, Priority::low, 0)};
    return v;
}

} // namespace

TEST_CASE("preemption: victims are chosen by the work they lose, not by their number", "[sched][preemption]") {
    ClusterView v = old_and_young();
    FairShareSorter shares(v.teams, OrderingPolicy{});
    CHECK(lost_gpu_seconds(v.running[0], 10000) == Approx(500.0));   // 0.5 GPU x 1,000 s
    CHECK(lost_gpu_seconds(v.running[2], 10000) == Approx(10000.0)); // 1 GPU x 10,000 s
    auto least_lost = find_victims(v.workers, v.running, high_job(9, 1000), shares, 10000, policy(), {});
    REQUIRE(least_lost);
    CHECK(least_lost->worker == 0);
    CHECK(least_lost->victims == std::vector<std::size_t>{0, 1});
    // the rule before issue #12: the fewest victims, however much they lose
    PreemptionPolicy fewest = policy();
    fewest.choice = VictimChoice::fewest_victims;
    auto one = find_victims(v.workers, v.running, high_job(9, 1000), shares, 10000, fewest, {});
    REQUIRE(one);
    CHECK(one->victims == std::vector<std::size_t>{2});
}

TEST_CASE("preemption: a job that checkpoints loses only the work since its last save", "[sched][preemption]") {
    ClusterView v = old_and_young();
    v.running[2].checkpoints = true;
    v.running[2].checkpointed_at = 9900;
    CHECK(lost_gpu_seconds(v.running[2], 10000) == Approx(100.0));
    // a save before the attempt started (an earlier attempt's) does not count
    RunningJob stale = v.running[2];
    stale.checkpointed_at = -5;
    CHECK(lost_gpu_seconds(stale, 10000) == Approx(10000.0));
    // a save time without the declaration is ignored
    RunningJob undeclared = v.running[2];
    undeclared.checkpoints = false;
    CHECK(lost_gpu_seconds(undeclared, 10000) == Approx(10000.0));
    FairShareSorter shares(v.teams, OrderingPolicy{});
    auto set = find_victims(v.workers, v.running, high_job(9, 1000), shares, 10000, policy(), {});
    REQUIRE(set);
    CHECK(set->victims == std::vector<std::size_t>{2}); // 100 GPU-s rather than 1,000
}

TEST_CASE("preemption: a job that declares how often it saves loses only the run since the last whole interval",
          "[sched][preemption]") {
    ClusterView v = old_and_young();
    v.running[2].checkpoint_every_s = 600; // started at 0: saved at 9,600 by now (10,000)
    CHECK(lost_gpu_seconds(v.running[2], 10000) == Approx(400.0));
    CHECK(lost_gpu_seconds(v.running[2], 599) == Approx(599.0)); // no save yet in its first interval
    CHECK(lost_gpu_seconds(v.running[2], 600) == Approx(0.0));
    FairShareSorter shares(v.teams, OrderingPolicy{});
    auto set = find_victims(v.workers, v.running, high_job(9, 1000), shares, 10000, policy(), {});
    REQUIRE(set);
    CHECK(set->victims == std::vector<std::size_t>{2}); // 400 GPU-s rather than the two young jobs' 1,000
    // Saved rarely, it costs more than the young pair: they go instead.
    v.running[2].checkpoint_every_s = 6000; // last save at 6,000: 4,000 GPU-s lost
    auto other = find_victims(v.workers, v.running, high_job(9, 1000), shares, 10000, policy(), {});
    REQUIRE(other);
    CHECK(other->victims == std::vector<std::size_t>{0, 1});
}

TEST_CASE("preemption: a job is not preempted again once it reached the cap", "[sched][preemption]") {
    ClusterView v = two_workers();
    v.running[2].preempted_before = 1; // worker 2's job was preempted once already
    FairShareSorter shares(v.teams, OrderingPolicy{});
    PreemptionPolicy capped = policy();
    capped.max_per_job = 1;
    CHECK_FALSE(preemptible(v.running[2], high_job(9, 1000), shares, 1000, capped));
    auto set = find_victims(v.workers, v.running, high_job(9, 1000), shares, 1000, capped, {});
    REQUIRE(set);
    CHECK(set->worker == 0); // the two on worker 1 instead
    capped.max_per_job = 2;
    CHECK(preemptible(v.running[2], high_job(9, 1000), shares, 1000, capped));
    PreemptionPolicy uncapped = policy();
    uncapped.max_per_job = 0;
    v.running[2].preempted_before = 50;
    CHECK(preemptible(v.running[2], high_job(9, 1000), shares, 1000, uncapped));
    CHECK(PreemptionPolicy{}.max_per_job == 1); // the default
}

TEST_CASE("schedule(): each preemption carries the work it throws away", "[sched][preemption]") {
    ClusterView v = old_and_young();
    Decisions d = schedule(v, {high_job(9, 1000)}, Policy{}, 10000);
    REQUIRE(d.preemptions.size() == 2);
    CHECK(d.preemptions[0].lost_gpu_seconds == Approx(500.0));
    CHECK(d.preemptions[1].lost_gpu_seconds == Approx(500.0));
    Decisions old = schedule(v, {high_job(9, 1000)}, legacy_policy(Policy{}), 10000);
    REQUIRE(old.preemptions.size() == 1);
    CHECK(old.preemptions[0].victim == JobId(3));
    CHECK(old.preemptions[0].lost_gpu_seconds == Approx(10000.0));
}

} // namespace test_preemption
} // namespace
