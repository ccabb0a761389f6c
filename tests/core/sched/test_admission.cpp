// Admission (admission.hpp): which queued jobs enter a pass and which placements their payers can
// cover. Prices here: 1 credit per GPU-hour on model 0, 4 credits on model 1, CPU 0.02 per core-hour.
#include "core/sched/scheduler.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_admission {

using namespace gpupool;
using namespace gpupool::sched;
using namespace gpupool::sched::test;

namespace {

constexpr credits::Micro k_credit = 1'000'000;

Admission priced() {
    Admission a;
    a.prices.cpu_micro_per_core_hour = k_credit / 50;
    a.prices.gpu_micro_per_hour = {k_credit, 4 * k_credit};
    a.prices.default_gpu_micro_per_hour = k_credit;
    return a;
}

JobRequest hour_job(std::int64_t id, std::int64_t milli, std::int64_t team = 1) {
    JobRequest j = share_job(id, milli);
    j.team = TeamId(team);
    j.max_runtime_s = 3600;
    return j;
}

const WaitingJob* waiting_of(const Decisions& d, std::int64_t job) {
    for (const auto& w : d.waiting) {
        if (w.job == JobId(job)) {
            return &w;
        }
    }
    return nullptr;
}

} // namespace

TEST_CASE("admission: the hold is price x max_runtime, the largest over the workers a job fits",
          "[sched][admission]") {
    const Admission a = priced();
    Worker cheap = worker(1, {1000});                      // model 0: 1 credit/h
    Worker dear = worker(2, {1000}, 32000, 131072, 1);     // model 1: 4 credits/h
    JobRequest j = hour_job(1, 500);
    CHECK(hourly_price(j, cheap, 0u, 500, a.prices) == k_credit / 2);
    CHECK(hold_of(j, hourly_price(j, dear, 0u, 500, a.prices)) == 2 * k_credit);
    CHECK(largest_hold(j, {cheap, dear}, a.prices) == 2 * k_credit);
    j.gpu_models = 1; // model 0 only: the dear worker is not a place it could go
    CHECK(largest_hold(j, {cheap, dear}, a.prices) == k_credit / 2);
    JobRequest cpu = cpu_job(2, 2000);
    cpu.max_runtime_s = 3600;
    CHECK(largest_hold(cpu, {cheap}, a.prices) == k_credit / 25); // 2 cores x 0.02
}

TEST_CASE("admission: a team that cannot cover a job's largest hold keeps it out of the pass",
          "[sched][admission]") {
    ClusterView v;
    v.workers = {worker(1, {1000}), worker(2, {1000}, 32000, 131072, 1)};
    Admission a = priced();
    a.credits.emplace();
    a.credits->team[TeamId(1)] = k_credit; // covers the cheap GPU (0.5) but not the dear one (2)
    a.credits->team[TeamId(2)] = 10 * k_credit;
    Decisions d = schedule(v, {hour_job(1, 500), hour_job(2, 500, 2)}, a, Policy{}, 0);
    const WaitingJob* w = waiting_of(d, 1);
    REQUIRE(w != nullptr);
    CHECK(w->gate == Gate::team_credits);
    CHECK(w->credits.need == 2 * k_credit);
    CHECK(w->credits.left == k_credit);
    CHECK_FALSE(w->credits.worker);
    REQUIRE(d.placements.size() == 1);
    CHECK(d.placements[0].job == JobId(2));
}

TEST_CASE("admission: a placement its team can no longer cover is not made and leaves the GPU to others",
          "[sched][admission]") {
    ClusterView v;
    v.workers = {worker(1, {1000})};
    Admission a = priced();
    a.credits.emplace();
    a.credits->team[TeamId(1)] = 6 * k_credit / 10; // each job's 0.5 hold enters, one is covered
    a.credits->team[TeamId(2)] = k_credit;
    Policy p;
    p.placement.tie_break = TieBreak::first;
    p.ordering.mode = OrderMode::class_first; // class before fair share: team 1's two jobs first
    JobRequest first = hour_job(1, 500);
    JobRequest second = hour_job(2, 500);
    JobRequest other = hour_job(3, 500, 2);
    other.priority = Priority::low; // ordered after team 1's two jobs
    first.submitted_at = 0;
    second.submitted_at = 1;
    other.submitted_at = 2;
    Decisions d = schedule(v, {first, second, other}, a, p, 10);
    const WaitingJob* w = waiting_of(d, 2);
    REQUIRE(w != nullptr);
    CHECK(w->gate == Gate::team_credits);
    CHECK(w->credits.need == k_credit / 2);
    CHECK(w->credits.left == k_credit / 10);
    REQUIRE(w->credits.worker);
    CHECK(*w->credits.worker == WorkerId(1));
    CHECK(w->credits.price_per_hour == k_credit / 2);
    // The refused job took nothing: team 2's job has the other half of the GPU.
    REQUIRE(d.placements.size() == 2);
    CHECK(waiting_of(d, 3) == nullptr);
}

TEST_CASE("admission: a spot check the pool pays for enters and is placed whatever its team's room",
          "[sched][admission][spot-checks]") {
    ClusterView v;
    v.workers = {worker(1, {1000})};
    Admission a = priced();
    a.credits.emplace();
    a.credits->team[TeamId(1)] = 0; // the team has nothing left
    JobRequest check = hour_job(1, 500);
    check.pool_pays = true;
    JobRequest own = hour_job(2, 500);
    Decisions d = schedule(v, {check, own}, a, Policy{}, 0);
    REQUIRE(d.placements.size() == 1);
    CHECK(d.placements[0].job == JobId(1));
    const WaitingJob* w = waiting_of(d, 2);
    REQUIRE(w != nullptr);
    CHECK(w->gate == Gate::team_credits);
}

TEST_CASE("a spot check kept off the only owner waits, says why, and does not hold back the same team's like job",
          "[sched][spot-checks]") {
    ClusterView v;
    v.workers = {worker(1, {1000})};
    v.workers[0].owner = TeamId(7);
    JobRequest check = hour_job(1, 500);
    check.avoid_owners = {TeamId(7)};
    check.submitted_at = 0;
    JobRequest own = hour_job(2, 500); // the same shape and team: a failure cached for one is not the other's
    own.submitted_at = 1;
    Decisions d = schedule(v, {check, own}, priced(), Policy{}, 10);
    REQUIRE(d.placements.size() == 1);
    CHECK(d.placements[0].job == JobId(2));
    const WaitingJob* w = waiting_of(d, 1);
    REQUIRE(w != nullptr);
    CHECK_THAT(w->reason, Catch::Contains("belong to the owner(s) whose result it checks"));
}

TEST_CASE("admission: a member's caps reserve job by job within the team's room", "[sched][admission]") {
    ClusterView v;
    v.workers = {worker(1, {1000, 1000})};
    Admission a = priced();
    a.credits.emplace();
    a.credits->team[TeamId(1)] = 100 * k_credit;
    a.credits->member[TokenId(7)] = 3 * k_credit / 4; // room for one 0.5 hold
    std::vector<JobRequest> q;
    for (std::int64_t id = 1; id <= 3; ++id) {
        q.push_back(hour_job(id, 500));
        q.back().member = TokenId(id < 3 ? 7 : 0); // job 3 is a teammate's without caps
    }
    Decisions d = schedule(v, q, a, Policy{}, 0);
    const WaitingJob* w = waiting_of(d, 2);
    REQUIRE(w != nullptr);
    CHECK(w->gate == Gate::member_credits);
    CHECK(w->credits.reserved == k_credit / 2); // job 1 entered first
    CHECK(w->credits.left == k_credit / 4);
    CHECK(d.placements.size() == 2);
}

TEST_CASE("admission: max_parallel counts a sweep's running attempts and its jobs entering the pass",
          "[sched][admission]") {
    ClusterView v;
    v.workers = {worker(1, {1000, 1000, 1000, 1000})};
    Admission a = priced();
    a.sweep_max_parallel[SweepId(5)] = 3;
    a.sweep_running[SweepId(5)] = 1;
    std::vector<JobRequest> q;
    for (std::int64_t id = 1; id <= 4; ++id) {
        q.push_back(hour_job(id, 1000));
        q.back().sweep = SweepId(5);
    }
    JobRequest free_sweep = hour_job(9, 1000);
    free_sweep.sweep = SweepId(6);
    q.push_back(free_sweep);
    Decisions d = schedule(v, q, a, Policy{}, 0);
    CHECK(d.placements.size() == 3); // two of sweep 5 (one already runs) and sweep 6's
    for (std::int64_t id : {3, 4}) {
        const WaitingJob* w = waiting_of(d, id);
        REQUIRE(w != nullptr);
        CHECK(w->gate == Gate::max_parallel);
        CHECK(w->reason == "its sweep is at max_parallel = 3");
    }
}

TEST_CASE("admission: a job naming only models no worker has waits without using a sweep's slot",
          "[sched][admission]") {
    ClusterView v;
    v.workers = {worker(1, {1000, 1000})};
    Admission a = priced();
    a.sweep_max_parallel[SweepId(5)] = 1;
    JobRequest lost = hour_job(1, 1000);
    lost.no_known_model = true;
    lost.sweep = SweepId(5);
    JobRequest fine = hour_job(2, 1000);
    fine.sweep = SweepId(5);
    Decisions d = schedule(v, {lost, fine}, a, Policy{}, 0);
    const WaitingJob* w = waiting_of(d, 1);
    REQUIRE(w != nullptr);
    CHECK(w->gate == Gate::unknown_models);
    REQUIRE(d.placements.size() == 1);
    CHECK(d.placements[0].job == JobId(2));
}

TEST_CASE("admission: without credits every job enters, as schedule() without admission",
          "[sched][admission]") {
    ClusterView v;
    v.workers = {worker(1, {1000}), worker(2, {500})};
    std::vector<JobRequest> q = {hour_job(1, 500), hour_job(2, 500), hour_job(3, 1000)};
    Decisions with = schedule(v, q, priced(), Policy{}, 0);
    Decisions without = schedule(v, q, Policy{}, 0);
    REQUIRE(with.placements.size() == without.placements.size());
    for (std::size_t i = 0; i < with.placements.size(); ++i) {
        CHECK(with.placements[i].job == without.placements[i].job);
        CHECK(with.placements[i].worker == without.placements[i].worker);
    }
}

TEST_CASE("admission: the largest hold over a fleet's GPU kinds is the largest over its workers", "[sched][admission]") {
    const Admission a = priced();
    std::vector<Worker> fleet;
    for (int i = 0; i < 50; ++i) { // many workers, three kinds: model 0 at two memory sizes, model 1
        fleet.push_back(worker(i + 1, {1000}, 32000, 131072, i % 5 == 0 ? 1u : 0u));
        if (i % 7 == 0 && i % 5 != 0) {
            fleet.back().gpus[0].memory_mib = 81920;
        }
    }
    const FleetKinds kinds = FleetKinds::of(fleet);
    CHECK(kinds.any_worker);
    CHECK(kinds.gpus.size() == 3);
    for (std::int64_t milli : {250, 500, 1000}) {
        JobRequest j = hour_job(1, milli);
        credits::Micro by_worker = 0;
        for (const auto& w : fleet) {
            by_worker = std::max(by_worker, hold_of(j, hourly_price(j, w, 0u, milli, a.prices)));
        }
        CHECK(largest_hold(j, kinds, a.prices) == by_worker);
        j.gpu_models = 1; // model 0 only
        CHECK(largest_hold(j, kinds, a.prices) < by_worker);
    }
    JobRequest cpu = cpu_job(2, 2000);
    cpu.max_runtime_s = 3600;
    CHECK(largest_hold(cpu, kinds, a.prices) == k_credit / 25);
    CHECK(largest_hold(cpu, FleetKinds::of({}), a.prices) == 0); // no worker: nothing to hold
}

} // namespace test_admission
} // namespace
