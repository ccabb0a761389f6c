// The pool's overview (Coordinator::overview): its "ended lately" list holds the jobs that ended
// last, by when they ended, not the newest submissions that have ended; and the utilisation samples
// the coordinator keeps of it (Coordinator::samples). Real coordinator, SQLite file, manual clock.
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_overview {

using namespace gpupool;
using namespace gpupool::coordinator;
using namespace gpupool::test::credit_pool;

TEST_CASE("the overview lists the jobs that ended last, newest first, by end time", "[coordinator][overview]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId early = p.submit(half_l4("long-one"));
    REQUIRE(p.place_and_start()); // half of the L4, for a long time
    const auto attempt_of = [&](JobId job) { return p.coord->job_book().attempts_of(job).back().id; };
    // 21 short jobs, submitted after it, run one by one on the other half and end before it.
    std::vector<JobId> short_jobs;
    for (int i = 0; i < 21; ++i) {
        short_jobs.push_back(p.submit(half_l4("short-" + std::to_string(i))));
        REQUIRE(p.place_and_start());
        p.clock.advance_ms(1000);
        REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, attempt_of(short_jobs.back()), 0, ""));
    }
    p.clock.advance_ms(60'000);
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, attempt_of(early), 0, ""));

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

TEST_CASE("the coordinator samples the pool on its interval, keeps a day of samples, and members get capacity only",
          "[coordinator][overview][samples]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const std::int64_t t0 = p.clock.now_ms();
    p.submit(half_l4("sampled", 48 * 3600));
    auto attempt = p.place_and_start(); // the first tick samples: after its placement
    REQUIRE(attempt);
    const auto tick_at = [&](std::int64_t ms) {
        p.clock.set_ms(ms);
        REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt})); // online, the attempt's lease renewed
        p.coord->tick();
    };
    tick_at(t0 + 30'000); // not due yet
    tick_at(t0 + 59'999); // not yet
    tick_at(t0 + 60'000); // the second sample
    tick_at(t0 + 90'000);

    auto all = p.coord->samples(p.admin, 0);
    REQUIRE(all);
    CHECK(all->every_ms == 60'000);
    CHECK(all->job_counts);
    REQUIRE(all->samples.size() == 2);
    CHECK(all->samples[0].at_ms == t0);
    CHECK(all->samples[1].at_ms == t0 + 60'000);
    // one worker with one L4, half of it given out; one job running, none queued
    CHECK(all->samples[1] == store::Sample{t0 + 60'000, 1, 1, 1000, 500, 0, 1});
    // Since a time: only the later one.
    CHECK(p.coord->samples(p.admin, t0 + 1).value().samples.size() == 1);

    // A member gets the pool's capacity, not the pool-wide job counts; a worker token nothing.
    auto theirs = p.coord->samples(p.fellow, 0);
    REQUIRE(theirs);
    CHECK_FALSE(theirs->job_counts);
    REQUIRE(theirs->samples.size() == 2);
    CHECK(theirs->samples[1].gpu_milli_allocated == 500);
    CHECK(theirs->samples[1].jobs_running == 0);
    auto refused = p.coord->samples(p.owner_worker, 0);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::forbidden);

    // A day later the old samples are pruned from the store, not just hidden.
    tick_at(t0 + 24 * 3'600'000 + 60'001);
    auto day = p.coord->samples(p.admin, 0);
    REQUIRE(day);
    REQUIRE(day->samples.size() == 1);
    CHECK(day->samples[0].at_ms == t0 + 24 * 3'600'000 + 60'001);
    CHECK(p.db->read_samples(0, 100).value().size() == 1);
    // They survive a restart (the store keeps them; load() does not need them).
    REQUIRE(p.restart());
    CHECK(p.coord->samples(p.admin, 0).value().samples.size() == 1);

    const std::int64_t t_next = t0 + 24 * 3'600'000 + 120'001; // the next sample after the day's
    // A sample holds the admin overview's totals: a second half of the L4 given out (the GPU is
    // now shared by two jobs), a third job queued behind them.
    p.submit(half_l4("second half", 48 * 3600));
    auto second = p.place_and_start();
    REQUIRE(second);
    p.submit(half_l4("queued", 48 * 3600));
    p.clock.set_ms(t_next);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt, *second}));
    p.coord->tick();
    const auto o = p.coord->overview(p.admin).value();
    CHECK(o.totals.gpus_shared == 1);
    const OverviewTotals& t = o.totals;
    CHECK(p.coord->samples(p.admin, t_next).value().samples ==
          std::vector{store::Sample{t_next, t.workers_online, t.gpus_online, t.gpu_milli_online, t.gpu_milli_allocated,
                                    t.jobs_queued, t.jobs_running}});
    CHECK(t.gpu_milli_allocated == 1000);
    CHECK(t.jobs_queued == 1);
    CHECK(t.jobs_running == 2);
}

} // namespace test_overview
} // namespace
