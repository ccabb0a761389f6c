// A worker whose owner hands the same job back (owner_preempted: never charged, never using up an
// attempt) again and again: after CoordinatorOptions::owner_preempt_limit times the job is kept off
// that worker for owner_avoid_ms, goes to another worker meanwhile, and the report counts them.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_owner_preemptions {

using namespace gpupool;
using namespace gpupool::coordinator;
using namespace gpupool::test::credit_pool;
using store::JobState;

namespace {

constexpr std::int64_t k_minute_ms = 60'000;

// The job is placed on the pool's worker, runs a minute and is handed back by the owner.
void hand_back(CreditPool& p) {
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(k_minute_ms);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, std::nullopt, "my turn",
                                          Outcome::owner_preempted));
}

std::int64_t owner_preempted_on(const CreditPool& p, WorkerId worker) {
    const Report report = pool_report(*p.coord, p.admin, 0).value();
    for (const auto& w : report.workers) {
        if (w.worker == worker) {
            return w.owner_preempted;
        }
    }
    FAIL("no worker " << worker.value() << " in the report");
    return -1;
}

} // namespace

TEST_CASE("owner preemptions: after 3 hand-backs a worker gets that job no more for 10 minutes, another worker does, "
          "and the report counts them",
          "[coordinator][owner-preemption][security]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("gamed"));
    const WorkerId box = *p.owner_worker.worker;
    for (int round = 0; round < 3; ++round) {
        hand_back(p);
    }
    CHECK(owner_preempted_on(p, box) == 3);
    CHECK(read_job(*p.coord, p.admin, job).value().state == JobState::queued);
    CHECK(p.balance("fellows") == 10 * k_credit); // never charged

    // The only worker that could run it handed it back three times: it is not offered the job again
    // while the period runs, and the job says why it waits.
    CHECK_FALSE(p.place_and_start());
    CHECK_THAT(waiting_reason(*p.coord, job), Catch::Contains("handed it back too often"));
    p.clock.advance_ms(9 * k_minute_ms);
    CHECK_FALSE(p.place_and_start());
    CHECK(p.coord->pool_view_drift().value_or("") == "");
    // Ten minutes after the last hand-back it may go there again; a fourth hand-back starts the
    // period again.
    p.clock.advance_ms(k_minute_ms);
    hand_back(p);
    CHECK(owner_preempted_on(p, box) == 4);
    CHECK_FALSE(p.place_and_start());

    // Another worker joins: the job goes there, not back to the worker that keeps handing it back.
    auto enroll = create_token(*p.coord, p.admin, store::Role::enroll, "owners", "spare").value();
    auto spare =
        coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(), "spare-l4", l4_box());
    REQUIRE(spare);
    const Principal spare_worker = p.coord->authenticate(spare->secret).value();
    REQUIRE(coordinator::heartbeat(*p.coord, spare_worker, {}));
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    CHECK(coordinator::assignments(*p.coord, p.owner_worker).value().empty());
    auto on_spare = coordinator::assignments(*p.coord, spare_worker).value();
    REQUIRE(on_spare.size() == 1);
    CHECK(on_spare.front().job == job);
    CHECK(owner_preempted_on(p, spare->worker) == 0);
    CHECK(p.coord->pool_view_drift().value_or("") == "");

    // The rule and the counts come from the stored attempts: a restart keeps both.
    REQUIRE(p.restart());
    CHECK(owner_preempted_on(p, box) == 4);
}

TEST_CASE("owner preemptions: hand-backs spread over several workers keep the job off none of them",
          "[coordinator][owner-preemption]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("unlucky"));
    hand_back(p);
    hand_back(p);
    // Two on this worker, under the limit: it is offered the job again at once.
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    CHECK(p.coord->job_book().attempts_of(job).size() == 3);
    CHECK(owner_preempted_on(p, *p.owner_worker.worker) == 2);
}

} // namespace test_owner_preemptions
} // namespace
