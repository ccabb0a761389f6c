// `gpupool retry` in the coordinator: failed or cancelled jobs queued again as the same jobs, with a
// new run of attempts, refused as a submission would be (real coordinator, SQLite file, manual clock).
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/util/sha256.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_retry {

using namespace gpupool;
using namespace gpupool::coordinator;
using namespace gpupool::test::credit_pool;
using store::AttemptState;
using store::JobState;

namespace {

api::RetryRequest jobs_retry(std::vector<JobId> ids, std::string key = {}) {
    api::RetryRequest r;
    r.jobs = std::move(ids);
    r.idempotency_key = std::move(key);
    return r;
}

api::RetryRequest sweep_retry(SweepId sweep, std::vector<std::string> states = {}) {
    api::RetryRequest r;
    r.sweep = sweep;
    r.states = std::move(states);
    return r;
}

// Places the job's next attempt and ends it with `exit_code`.
AttemptId run_once(CreditPool& p, std::int64_t exit_code) {
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(1000);
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, exit_code, ""));
    return *attempt;
}

JobState state_of(CreditPool& p, JobId id) {
    return read_job(*p.coord, p.admin, id).value().state;
}

} // namespace

TEST_CASE("retry: a failed job runs again as the same job, its first attempt kept", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("flaky"));
    const AttemptId first = run_once(p, 1);
    REQUIRE(state_of(p, job) == JobState::failed);

    auto r = coordinator::retry(*p.coord, p.fellow, jobs_retry({job}));
    REQUIRE(r);
    REQUIRE(r->jobs.size() == 1);
    CHECK(r->jobs[0].id == job);
    CHECK(r->jobs[0].retry == 1);
    auto queued = read_job(*p.coord, p.fellow, job).value();
    CHECK(queued.state == JobState::queued);
    CHECK(queued.retries == 1);
    CHECK_FALSE(queued.finished_at);
    CHECK_FALSE(queued.exit_code);
    CHECK(queued.reason == "queued again (retry 1)");

    const AttemptId second = run_once(p, 0);
    CHECK(state_of(p, job) == JobState::succeeded);
    auto attempts = p.coord->job_book().attempts_of(job);
    REQUIRE(attempts.size() == 2);
    CHECK(attempts[0].id == first);
    CHECK(attempts[0].state == AttemptState::failed);
    CHECK(attempts[0].retry == 0);
    CHECK(attempts[1].id == second);
    CHECK(attempts[1].state == AttemptState::succeeded);
    CHECK(attempts[1].retry == 1);
    p.check_books();

    // Durable: the retry count and each attempt's run come back after a restart.
    REQUIRE(p.restart());
    CHECK(read_job(*p.coord, p.fellow, job).value().retries == 1);
    CHECK(p.coord->job_book().attempts_of(job).at(1).retry == 1);
    CHECK_FALSE(p.coord->pool_view_drift().has_value());
}

TEST_CASE("retry: a retried job has retry.max_attempts again for its new run", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    auto spec = half_l4("lossy");
    spec.retry.max_attempts = 2;
    const JobId job = p.submit(spec);
    auto lose = [&] {
        auto attempt = p.place_and_start();
        REQUIRE(attempt);
        REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, std::nullopt, "gpu fell off",
                                              Outcome::worker_fault));
    };
    lose();
    CHECK(state_of(p, job) == JobState::queued); // 1 of 2
    lose();
    REQUIRE(state_of(p, job) == JobState::failed); // 2 of 2
    REQUIRE(coordinator::retry(*p.coord, p.fellow, jobs_retry({job})));
    lose();
    // One attempt of the new run: it goes on (counting the first run's two, it would fail here).
    CHECK(state_of(p, job) == JobState::queued);
    lose();
    CHECK(state_of(p, job) == JobState::failed);
    CHECK(read_job(*p.coord, p.fellow, job).value().attempts == 4);
}

TEST_CASE("retry: only failed or cancelled jobs, each refused with the reason", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId failed = p.submit(half_l4("failed"));
    run_once(p, 3);
    const JobId done = p.submit(half_l4("done"));
    run_once(p, 0);
    const JobId running = p.submit(half_l4("running"));
    REQUIRE(p.place_and_start());
    const JobId queued = p.submit(half_l4("queued"));

    auto r = coordinator::retry(*p.coord, p.fellow, jobs_retry({failed, running}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::conflict);
    CHECK_THAT(r.error().message, Catch::Contains("job " + std::to_string(running.value()) +
                                                  " is running: only failed or cancelled jobs are retried"));
    CHECK(state_of(p, failed) == JobState::failed); // all or nothing
    r = coordinator::retry(*p.coord, p.fellow, jobs_retry({queued}));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("is queued"));
    r = coordinator::retry(*p.coord, p.fellow, jobs_retry({done}));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("succeeded: only failed or cancelled jobs are retried"));

    // A cancelled job is retried too.
    REQUIRE(cancel_job(*p.coord, p.fellow, queued));
    r = coordinator::retry(*p.coord, p.fellow, jobs_retry({queued, failed}));
    REQUIRE(r);
    CHECK(r->jobs.size() == 2);
    CHECK(state_of(p, queued) == JobState::queued);
    CHECK(state_of(p, failed) == JobState::queued);
}

TEST_CASE("retry: only the job's own team and admins", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("mine"));
    run_once(p, 1);
    const Principal owner =
        p.coord->authenticate(create_token(*p.coord, p.admin, store::Role::member, "owners", "o").value().secret)
            .value();

    // Another team's job is not found (ids are not a side channel), nor its sweep.
    auto r = coordinator::retry(*p.coord, owner, jobs_retry({job}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::not_found);
    CHECK_THAT(r.error().message, Catch::Contains("no job " + std::to_string(job.value())));
    const SweepId sweep = read_job(*p.coord, p.admin, job).value().sweep_id;
    r = coordinator::retry(*p.coord, owner, sweep_retry(sweep));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::not_found);
    // A worker's token may not retry anything.
    r = coordinator::retry(*p.coord, p.owner_worker, jobs_retry({job}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::forbidden);
    CHECK(state_of(p, job) == JobState::failed);
    // An admin may.
    REQUIRE(coordinator::retry(*p.coord, p.admin, jobs_retry({job})));
    CHECK(state_of(p, job) == JobState::queued);
}

TEST_CASE("retry: priced and held to the budgets as a submission of the same jobs", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("costly"));
    run_once(p, 1);
    // The team may spend 0.1 credits a day; the job is estimated at 0.5 (half an L4 for an hour).
    BudgetChange change{"fellows", "", CapChange::set(k_credit / 10), CapChange::keep()};
    REQUIRE(change_budget(*p.coord, p.admin, change));
    auto submitted = coordinator::submit(*p.coord, p.fellow,
                                         SubmitRequest{"train.toml", 0, {half_l4("costly")}, std::nullopt, false});
    REQUIRE_FALSE(submitted);

    auto r = coordinator::retry(*p.coord, p.fellow, jobs_retry({job}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == submitted.error().code);
    CHECK(r.error().field == "credits");
    CHECK_THAT(r.error().message, Catch::StartsWith("this retry (1 job) is estimated at 0.5 credits"));
    CHECK_THAT(r.error().message, Catch::Contains("`fellows`'s budget allows"));
    CHECK_THAT(r.error().message, Catch::Contains("or retry with --allow-unfunded"));
    CHECK(state_of(p, job) == JobState::failed);

    // --allow-unfunded queues it all the same; it waits for room, as a submitted job would.
    auto unfunded = jobs_retry({job});
    unfunded.allow_unfunded = true;
    REQUIRE(coordinator::retry(*p.coord, p.fellow, unfunded));
    CHECK(state_of(p, job) == JobState::queued);
    CHECK_FALSE(p.place_and_start());
    CHECK_THAT(waiting_reason(*p.coord, job), Catch::Contains("budget"));
}

TEST_CASE("retry: a sweep's failed jobs by default, its cancelled ones when asked", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    auto sub = coordinator::submit(
        *p.coord, p.fellow,
        SubmitRequest{"sweep.toml", 0, {half_l4("s0"), half_l4("s1"), half_l4("s2")}, std::nullopt, false});
    REQUIRE(sub);
    const auto& ids = sub->jobs;
    REQUIRE(cancel_job(*p.coord, p.fellow, ids[2]));
    run_once(p, 0); // s0 succeeds
    run_once(p, 1); // s1 fails

    auto r = coordinator::retry(*p.coord, p.fellow, sweep_retry(sub->sweep_id));
    REQUIRE(r);
    REQUIRE(r->jobs.size() == 1);
    CHECK(r->jobs[0].id == ids[1]);
    CHECK(state_of(p, ids[0]) == JobState::succeeded);
    CHECK(state_of(p, ids[2]) == JobState::cancelled);

    r = coordinator::retry(*p.coord, p.fellow, sweep_retry(sub->sweep_id, {"failed"}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::conflict);
    CHECK_THAT(r.error().message,
               Catch::Contains("sweep " + std::to_string(sub->sweep_id.value()) + " has no failed jobs to retry"));
    r = coordinator::retry(*p.coord, p.fellow, sweep_retry(sub->sweep_id, {"failed", "cancelled"}));
    REQUIRE(r);
    REQUIRE(r->jobs.size() == 1);
    CHECK(r->jobs[0].id == ids[2]);
    CHECK(state_of(p, ids[2]) == JobState::queued);
}

TEST_CASE("retry: the same idempotency key again gets the same retry back", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("once"));
    run_once(p, 1);
    auto first = coordinator::retry(*p.coord, p.fellow, jobs_retry({job}, "retry-abc"));
    REQUIRE(first);
    auto again = coordinator::retry(*p.coord, p.fellow, jobs_retry({job}, "retry-abc"));
    REQUIRE(again);
    CHECK(*again == *first);
    CHECK(read_job(*p.coord, p.fellow, job).value().retries == 1);
    // A new key is a new retry: refused, the job is queued.
    CHECK_FALSE(coordinator::retry(*p.coord, p.fellow, jobs_retry({job}, "retry-def")));
    // The key survives a restart.
    REQUIRE(p.restart());
    again = coordinator::retry(*p.coord, p.fellow, jobs_retry({job}, "retry-abc"));
    REQUIRE(again);
    CHECK(*again == *first);
    CHECK_FALSE(coordinator::retry(*p.coord, p.fellow, jobs_retry({job}, "bad key!")));
}

TEST_CASE("retry: a job whose inputs archive is gone is refused, naming it", "[coordinator][retry]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const auto file = p.dir.path() / "inputs.tar";
    std::ofstream(file) << "inputs";
    const std::string sha = util::sha256_hex("inputs");
    REQUIRE(coordinator::put_inputs(*p.coord, p.fellow, sha, UploadedFile{file, 6, sha}));
    auto spec = half_l4("with-inputs");
    spec.inputs.archive = sha;
    const JobId job = p.submit(spec);
    run_once(p, 1);
    // The archive's row removed from the file behind the coordinator's back.
    {
        SQLite::Database db((p.dir.path() / "pool.db").string(), SQLite::OPEN_READWRITE);
        db.exec("DELETE FROM team_input_blobs");
    }
    auto r = coordinator::retry(*p.coord, p.fellow, jobs_retry({job}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::conflict);
    CHECK_THAT(r.error().message, Catch::Contains("job " + std::to_string(job.value()) + "'s inputs archive (" + sha +
                                                  ") is no longer on the coordinator"));
    CHECK(state_of(p, job) == JobState::failed);
}

} // namespace test_retry
} // namespace
