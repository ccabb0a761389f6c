// The pool's overview (Coordinator::overview): its "ended lately" list holds the jobs that ended
// last, by when they ended, not the newest submissions that have ended (real coordinator, SQLite file, manual clock).
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

using namespace gpupool;
using namespace gpupool::coordinator;
using namespace gpupool::test::credit_pool;

TEST_CASE("the overview lists the jobs that ended last, newest first, by end time", "[coordinator][overview]") {
    CreditPool p;
    REQUIRE(p.coord->grant(p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId early = p.submit(half_l4("long-one"));
    REQUIRE(p.place_and_start()); // half of the L4, for a long time
    const auto attempt_of = [&](JobId job) { return p.coord->attempts_of(job).back().id; };
    // 21 short jobs, submitted after it, run one by one on the other half and end before it.
    std::vector<JobId> short_jobs;
    for (int i = 0; i < 21; ++i) {
        short_jobs.push_back(p.submit(half_l4("short-" + std::to_string(i))));
        REQUIRE(p.place_and_start());
        p.clock.advance_ms(1000);
        REQUIRE(p.coord->complete_attempt(p.owner_worker, attempt_of(short_jobs.back()), 0, ""));
    }
    p.clock.advance_ms(60'000);
    REQUIRE(p.coord->complete_attempt(p.owner_worker, attempt_of(early), 0, ""));

    auto o = p.coord->overview(p.fellow);
    REQUIRE(o);
    REQUIRE(o->recent.size() == k_overview_recent); // 20 of the 22
    // The lowest job id ended last: it comes first, then the short ones newest first; the oldest
    // short job fell off.
    CHECK(o->recent[0].id == early);
    CHECK(o->recent[1].id == short_jobs[20]);
    CHECK(o->recent[19].id == short_jobs[2]);
    for (std::size_t i = 1; i < o->recent.size(); ++i) {
        CHECK(o->recent[i - 1].since_ms > o->recent[i].since_ms);
    }
    CHECK(o->running.empty());
    // An enrollment or worker token sees nothing.
    CHECK_FALSE(p.coord->overview(p.owner_worker));
}
