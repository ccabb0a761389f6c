// One behaviour for the ends that are nobody's fault but the job's or nobody's at all (issue 41): a
// worker that leaves cleanly (worker_left, worker_ops.hpp) and an image that cannot be had
// (api::Outcome::image_unavailable). On a real coordinator (SQLite file, manual clock).
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_worker_leave {

using namespace gpupool;
using namespace gpupool::coordinator;
using store::AttemptState;
using store::JobState;

using namespace gpupool::test::credit_pool;

namespace {

// A second L4 worker of team "owners".
Principal second_worker(CreditPool& p) {
    auto enroll = create_token(*p.coord, p.admin, store::Role::enroll, "owners", "e2").value();
    auto reg = coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(), "l4-two", l4_box());
    REQUIRE(reg);
    return p.coord->authenticate(reg->secret).value();
}

} // namespace

TEST_CASE("worker leaves: offline at once, its unstarted attempt queued again without using an attempt",
          "[coordinator][leave]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    auto spec = half_l4("placed on a worker that goes");
    spec.retry.max_attempts = 1; // a lost attempt would fail the job
    const auto job = p.submit(spec);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    const auto assigned = coordinator::assignments(*p.coord, p.owner_worker).value();
    REQUIRE(assigned.size() == 1); // assigned, never started
    const WorkerId gone = *p.owner_worker.worker;
    CHECK(p.coord->roster().presence(gone, p.coord->now_ms()) == "online");

    const auto back = coordinator::worker_left(*p.coord, p.owner_worker);
    REQUIRE(back);
    CHECK(*back == std::vector<AttemptId>{assigned.front().attempt});
    CHECK(p.coord->roster().presence(gone, p.coord->now_ms()) == "offline");
    const auto first = p.coord->job_book().attempts_of(job).back();
    CHECK(first.state == AttemptState::preempted);
    CHECK_THAT(first.reason, Catch::Contains("handed back unstarted") && Catch::Contains("left the pool"));
    CHECK(read_job(*p.coord, p.admin, job).value().state == JobState::queued);
    CHECK(p.balance("fellows") == 10 * k_credit); // the hold went back

    // Nothing more is placed on the worker that left; the job goes to the next worker and still has
    // its one attempt.
    p.coord->tick();
    CHECK(coordinator::assignments(*p.coord, p.owner_worker).value().empty());
    const Principal other = second_worker(p);
    REQUIRE(coordinator::heartbeat(*p.coord, other, {}));
    p.coord->tick();
    auto moved = coordinator::assignments(*p.coord, other).value();
    REQUIRE(moved.size() == 1);
    CHECK(coordinator::assignments(*p.coord, p.owner_worker).value().empty());
    REQUIRE(coordinator::start_attempt(*p.coord, other, moved.front().attempt));
    p.clock.advance_ms(60'000);
    REQUIRE(coordinator::complete_attempt(*p.coord, other, moved.front().attempt, 0, ""));
    CHECK(read_job(*p.coord, p.admin, job).value().state == JobState::succeeded);

    // Not on the owner's record: neither a failure nor an owner's preemption.
    const auto report = pool_report(*p.coord, p.admin, 0).value();
    for (const auto& w : report.workers) {
        CHECK(w.failures == 0);
        CHECK(w.owner_preempted == 0);
    }
    // Its next heartbeat brings it back.
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    CHECK(p.coord->roster().presence(gone, p.coord->now_ms()) == "online");
    p.check_books();
}

TEST_CASE("worker leaves: a running attempt keeps its lease, only workers may leave", "[coordinator][leave]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    const auto job = p.submit(half_l4("running"));
    const auto attempt = p.place_and_start();
    REQUIRE(attempt);
    const auto back = coordinator::worker_left(*p.coord, p.owner_worker);
    REQUIRE(back);
    CHECK(back->empty());
    CHECK(p.coord->job_book().attempts_of(job).back().state == AttemptState::running);
    CHECK(coordinator::worker_left(*p.coord, p.fellow).error().code == ErrorCode::forbidden);
}

TEST_CASE("image unavailable: the job fails after one attempt with the engine's words, nobody is charged",
          "[coordinator][image]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    auto spec = half_l4("no such image"); // retry.max_attempts 3
    const auto job = p.submit(spec);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    const auto assigned = coordinator::assignments(*p.coord, p.owner_worker).value();
    REQUIRE(assigned.size() == 1);
    const std::string engine = "reading manifest 1 in 127.0.0.1:5999/x: manifest unknown: manifest unknown";
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, assigned.front().attempt, std::nullopt, engine,
                                          Outcome::image_unavailable));
    const auto attempts = p.coord->job_book().attempts_of(job);
    REQUIRE(attempts.size() == 1);
    CHECK(attempts.front().state == AttemptState::failed);
    CHECK(attempts.front().reason == "image unavailable: " + engine);
    const auto j = read_job(*p.coord, p.admin, job).value();
    CHECK(j.state == JobState::failed); // not queued again: the same image fails everywhere
    CHECK_THAT(j.reason, Catch::Contains("manifest unknown"));
    p.coord->tick();
    CHECK(coordinator::assignments(*p.coord, p.owner_worker).value().empty());
    CHECK(p.balance("fellows") == 10 * k_credit);
    CHECK(p.balance("owners") == 0);
    const auto report = pool_report(*p.coord, p.admin, 0).value();
    REQUIRE(report.workers.size() == 1);
    CHECK(report.workers[0].attempts == 1);
    CHECK(report.workers[0].failures == 0);
    CHECK(report.workers[0].owner_preempted == 0);
    p.check_books();
    CHECK(api::outcome_from_string("image_unavailable") == Outcome::image_unavailable);
}

} // namespace test_worker_leave
} // namespace
