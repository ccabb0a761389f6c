// JobBook on its own: what absorb() keeps in each index as jobs and attempts move, the expiry key,
// the runtimes estimates read, the ended jobs handed to waiting clients, and first_difference.
#include "core/coordinator/job_book.hpp"

#include <catch2/catch.hpp>

namespace gpupool::coordinator::test_job_book {
namespace {

using store::AttemptRecord;
using store::AttemptState;
using store::JobRecord;
using store::JobState;

constexpr std::int64_t k_grace_ms = 30'000;

store::SweepRecord sweep(std::int64_t id, const std::string& key = "") {
    return {SweepId(id), TeamId(1), TokenId(5), "eval.toml", 1, 0, 0, key};
}

JobRecord job(std::int64_t id, JobState state = JobState::queued) {
    JobRecord j;
    j.id = JobId(id);
    j.sweep_id = SweepId(1);
    j.team = TeamId(1);
    j.spec.name = "j" + std::to_string(id);
    j.spec.resources.max_runtime_s = 60;
    j.state = state;
    return j;
}

AttemptRecord attempt(std::int64_t id, std::int64_t job_id, AttemptState state, std::int64_t lease = 10'000) {
    AttemptRecord a;
    a.id = AttemptId(id);
    a.job = JobId(job_id);
    a.worker = WorkerId(3);
    a.state = state;
    a.lease_expires_at = lease;
    return a;
}

// A sweep with jobs 1 and 2 queued.
JobBook two_jobs() {
    JobBook book(k_grace_ms);
    store::Changes c;
    c.sweeps = {sweep(1, "key-1")};
    c.jobs = {job(1), job(2)};
    book.absorb(c);
    return book;
}

} // namespace

TEST_CASE("job book: an attempt moves through the indexes as it is assigned, started and ended",
          "[coordinator][components][job_book]") {
    JobBook book = two_jobs();
    CHECK(book.queued() == std::set<JobId>{JobId(1), JobId(2)});
    CHECK(book.sweep_by_key().at({TeamId(1), "key-1"}) == SweepId(1));
    store::Changes placed;
    placed.jobs = {job(1, JobState::assigned)};
    placed.attempts = {attempt(10, 1, AttemptState::assigned, 5'000)};
    book.absorb(placed);
    CHECK(book.queued() == std::set<JobId>{JobId(2)});
    CHECK(book.active() == std::set<AttemptId>{AttemptId(10)});
    CHECK(book.assigned_by_worker().at(WorkerId(3)) == std::set<AttemptId>{AttemptId(10)});
    CHECK(book.expiry() == std::set<std::pair<std::int64_t, AttemptId>>{{5'000, AttemptId(10)}});
    CHECK(book.latest_attempt().at(JobId(1)) == AttemptId(10));
    // Started at 1 s: it expires at the earlier of its lease and max_runtime (60 s) plus grace.
    store::Changes started;
    AttemptRecord running = attempt(10, 1, AttemptState::running, 200'000);
    running.started_at = 1'000;
    started.attempts = {running};
    book.absorb(started);
    CHECK(book.assigned_by_worker().empty());
    CHECK(book.expiry_of(running) == 1'000 + 60'000 + k_grace_ms);
    CHECK(book.expiry() == std::set<std::pair<std::int64_t, AttemptId>>{{91'000, AttemptId(10)}});
    // Ended: out of the active set and the expiry index; the job is ended at 9 s.
    store::Changes ended;
    AttemptRecord done = running;
    done.state = AttemptState::succeeded;
    done.ended_at = 9'500;
    JobRecord finished = job(1, JobState::succeeded);
    finished.finished_at = 9'500;
    ended.attempts = {done};
    ended.jobs = {finished};
    book.absorb(ended);
    CHECK(book.active().empty());
    CHECK(book.expiry().empty());
    CHECK(book.ended() == std::set<std::pair<std::int64_t, JobId>>{{9'500, JobId(1)}});
    // One successful run of eval.toml for team 1: 8.5 s, counted as 9 (whole seconds, rounded up).
    CHECK(book.runtimes_by_source().at({TeamId(1), "eval.toml"}) == std::vector<std::int64_t>{9});
    CHECK(book.attempt_ids_of(JobId(1)) == std::vector<AttemptId>{AttemptId(10)});
    CHECK(book.attempt_ids_of(JobId(2)).empty());
}

TEST_CASE("job book: ended jobs are handed over once, only while tracking is on",
          "[coordinator][components][job_book]") {
    JobBook book = two_jobs();
    store::Changes cancel;
    cancel.jobs = {job(1, JobState::cancelled)};
    book.absorb(cancel);
    CHECK(book.take_ended().empty()); // not tracking
    book.track_ended(true);
    store::Changes more;
    more.jobs = {job(2, JobState::failed), job(1, JobState::cancelled)}; // job 1 had ended already
    book.absorb(more);
    CHECK(book.take_ended() == std::vector<JobId>{JobId(2)});
    CHECK(book.take_ended().empty());
}

TEST_CASE("job book: a book kept change by change is the book built from the records, indexes included",
          "[coordinator][components][job_book]") {
    JobBook kept = two_jobs();
    store::Changes c;
    c.jobs = {job(1, JobState::assigned)};
    c.attempts = {attempt(10, 1, AttemptState::assigned), attempt(11, 2, AttemptState::lost)};
    kept.absorb(c);
    // The store's view of the same records, absorbed at once (as start() does).
    JobBook rebuilt(k_grace_ms);
    store::Changes all;
    all.sweeps = {sweep(1, "key-1")};
    all.jobs = {job(1, JobState::assigned), job(2)};
    all.attempts = c.attempts;
    rebuilt.absorb(all);
    CHECK_FALSE(kept.first_difference(rebuilt).has_value());
    // A record the store has and the book lacks, and an index that was not kept.
    store::Changes extra;
    extra.attempts = {attempt(12, 2, AttemptState::assigned)};
    rebuilt.absorb(extra);
    CHECK(kept.first_difference(rebuilt) == "attempt 12 missing");
    JobBook other_grace(k_grace_ms + 1);
    AttemptRecord running = attempt(10, 1, AttemptState::running, 500'000);
    running.started_at = 0;
    store::Changes both = all;
    both.attempts = {running};
    JobBook a(k_grace_ms);
    a.absorb(both);
    other_grace.absorb(both);
    CHECK(a.first_difference(other_grace) == "expiry index differs");
}

TEST_CASE("job book: one job's attempts, those that used up its tries, its preemptions and whom it avoids",
          "[coordinator][components][job_book]") {
    JobBook book = two_jobs();
    const auto ended = [](std::int64_t id, AttemptState state, std::int64_t worker, std::int64_t at,
                          std::string reason = "", std::int64_t retry = 0) {
        AttemptRecord a = attempt(id, 1, state);
        a.worker = WorkerId(worker);
        a.ended_at = at;
        a.reason = std::move(reason);
        a.retry = retry;
        return a;
    };
    store::Changes c;
    // Job 1: failed, lost, preempted by the scheduler, twice by worker 7's owner, once by worker 8's,
    // then a voided success; after a retry (run 1), one more failure.
    c.attempts = {ended(10, AttemptState::failed, 3, 1'000),
                  ended(11, AttemptState::lost, 3, 2'000),
                  ended(12, AttemptState::preempted, 3, 3'000, "preempted for higher-priority job 9"),
                  ended(13, AttemptState::preempted, 7, 4'000, "preempted by the GPU's owner"),
                  ended(14, AttemptState::preempted, 7, 6'000, "preempted by the GPU's owner (reclaimed)"),
                  ended(15, AttemptState::preempted, 8, 5'000, "preempted by the GPU's owner"),
                  ended(16, AttemptState::succeeded, 3, 7'000),
                  ended(17, AttemptState::failed, 3, 9'000, "", 1)};
    c.attempts[6].voided_at = 8'000;
    book.absorb(c);

    CHECK(book.attempts_of(JobId(1)).size() == 8);
    CHECK(book.attempts_of(JobId(1)).front().id == AttemptId(10));
    CHECK(book.attempts_of(JobId(2)).empty());
    REQUIRE(book.job_of_attempt(AttemptId(12)) != nullptr);
    CHECK(book.job_of_attempt(AttemptId(12))->id == JobId(1));
    CHECK(book.job_of_attempt(AttemptId(99)) == nullptr);
    CHECK(book.times_preempted(JobId(1)) == 4);
    // Run 0 used: the failure and the loss (preempted and voided ones do not count); run 1: one.
    JobRecord run0 = job(1);
    CHECK(book.used_attempts(run0) == 2);
    JobRecord run1 = job(1);
    run1.retries = 1;
    CHECK(book.used_attempts(run1) == 1);
    // Two owner preemptions on worker 7 reach a limit of 2: kept off it until the last (6 s) plus
    // 60 s, in the scheduler's seconds; worker 8's one does not.
    const auto avoids = book.owner_avoids(JobId(1), 2, 60'000);
    REQUIRE(avoids.size() == 1);
    CHECK(avoids[0].worker == WorkerId(7));
    CHECK(avoids[0].until == 66);
    CHECK(book.owner_avoids(JobId(1), 1, 60'000).size() == 2);
    CHECK(book.owner_avoids(JobId(1), 0, 60'000).empty()); // 0: the rule is off
}

TEST_CASE("job book: ending an attempt stages it and its job's next state, changing nothing until absorbed",
          "[coordinator][components][job_book]") {
    JobBook book(k_grace_ms);
    JobRecord j = job(1, JobState::assigned);
    j.spec.retry.max_attempts = 3;
    j.spec.retry.on_exit_codes = {3};
    store::Changes setup;
    setup.sweeps = {sweep(1)};
    setup.jobs = {j};
    // Tries used: attempt 10 (failed) and 11 (running) of the job's 3.
    AttemptRecord earlier = attempt(10, 1, AttemptState::failed);
    earlier.ended_at = 500;
    AttemptRecord running = attempt(11, 1, AttemptState::running);
    running.started_at = 1'000;
    setup.attempts = {earlier, running};
    book.absorb(setup);

    // What ending attempt 11 as `state` (exit `code`) stages at t = 4 s: the job's state and reason.
    const auto end = [&](AttemptState state, std::optional<std::int64_t> code) {
        AttemptRecord a = book.attempts().at(AttemptId(11));
        store::Changes c;
        book.stage_attempt_end(a, state, code, "why", 4'000, c);
        REQUIRE(c.attempts.size() == 1);
        REQUIRE(c.jobs.size() == 1);
        CHECK(c.attempts[0].id == AttemptId(11));
        CHECK(c.attempts[0].state == state);
        CHECK(c.attempts[0].ended_at == 4'000);
        CHECK(c.attempts[0].exit_code == code);
        CHECK(c.attempts[0].reason == "why");
        CHECK(a.state == state); // the caller's copy is the staged one (its settlement reads it)
        CHECK(c.jobs[0].updated_at == 4'000);
        return c.jobs[0];
    };
    CHECK(end(AttemptState::succeeded, 0).state == JobState::succeeded);
    CHECK(end(AttemptState::succeeded, 0).finished_at == 4'000);
    CHECK(end(AttemptState::cancelled, std::nullopt).state == JobState::cancelled);
    // A failure on one of retry.on_exit_codes with tries left goes back to the queue; any other fails.
    CHECK(end(AttemptState::failed, 3).state == JobState::queued);
    CHECK_FALSE(end(AttemptState::failed, 3).finished_at.has_value());
    CHECK(end(AttemptState::failed, 4).state == JobState::failed);
    CHECK(end(AttemptState::failed, 4).exit_code == 4);
    // Lost with tries left: queued again; preempted: queued whatever is left.
    CHECK(end(AttemptState::lost, std::nullopt).state == JobState::queued);
    CHECK(end(AttemptState::preempted, std::nullopt).state == JobState::queued);
    // Nothing changed in the book itself.
    CHECK(book.jobs().at(JobId(1)).state == JobState::assigned);
    CHECK(book.attempts().at(AttemptId(11)).state == AttemptState::running);

    // With the third try used up (another loss absorbed), a loss of attempt 11 fails the job and says why; a
    // preemption still queues it.
    store::Changes more;
    AttemptRecord lost = attempt(12, 1, AttemptState::lost);
    lost.ended_at = 600;
    more.attempts = {lost};
    book.absorb(more);
    const JobRecord failed = end(AttemptState::lost, std::nullopt);
    CHECK(failed.state == JobState::failed);
    CHECK(failed.reason == "why; no attempts left (retry.max_attempts = 3)");
    CHECK(failed.finished_at == 4'000);
    CHECK(end(AttemptState::preempted, std::nullopt).state == JobState::queued);
    CHECK(end(AttemptState::failed, 3).state == JobState::failed);
}

} // namespace gpupool::coordinator::test_job_book
