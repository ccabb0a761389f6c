// Credits on a real coordinator (SQLite file, manual clock): who earns, who pays, and when nothing
// is charged; budgets; restarts that rebuild and verify the balances.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <catch2/catch.hpp>

#include <random>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_credits_scenarios {

using namespace gpupool;
using namespace gpupool::coordinator;
using credits::Account;
using credits::k_micro_per_credit;
using store::AttemptState;
using store::JobState;

using namespace gpupool::test::credit_pool;

TEST_CASE("credits scenario: the owner earns for a finished job, the team without hardware spends its grant",
          "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, "fellowship"));
    auto job = p.submit(half_l4("train"));
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    // The hold: 1 credit/h x 0.5 GPU x 1h max_runtime.
    CHECK(p.balance("fellows") == 10 * k_credit - k_credit / 2);
    CHECK(p.coord->credit_desk().held_micro(job) == k_credit / 2);
    CHECK(p.coord->credit_desk().ledger().balance(Account::escrow()) == k_credit / 2);

    p.clock.advance_ms(30 * 60 * 1000);                                            // 30 minutes
    CHECK(p.coord->credit_desk().cost_micro(p.coord->job_book().attempts_of(job).front(), p.coord->now_ms()) ==
          k_credit / 4); // accrued so far
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, 0, ""));
    // 0.5 GPU x 0.5 h x 1 credit = 0.25 to the owners; 0.25 of the hold back to the fellows.
    CHECK(p.balance("owners") == k_credit / 4);
    CHECK(p.balance("fellows") == 10 * k_credit - k_credit / 4);
    CHECK(p.coord->credit_desk().held_micro(job) == 0);
    CHECK(p.coord->credit_desk().cost_micro(p.coord->job_book().attempts_of(job).front(), p.coord->now_ms()) ==
          k_credit / 4);
    CHECK(p.coord->credit_desk().ledger().balance(Account::escrow()) == 0);
    p.check_books();

    auto report = pool_report(*p.coord, p.admin, 0).value();
    REQUIRE(report.teams.size() == 2);
    CHECK(report.teams[0].granted_micro == 10 * k_credit);
    CHECK(report.teams[0].spent_micro == k_credit / 4);
    CHECK(report.teams[1].earned_micro == k_credit / 4);
    REQUIRE(report.workers.size() == 1);
    CHECK(report.workers[0].gpu_hours == Approx(0.25));
    CHECK(report.workers[0].failures == 0);

    // A restart rebuilds the same balances from the rows.
    REQUIRE(p.restart());
    CHECK(p.balance("owners") == k_credit / 4);
    CHECK(p.balance("fellows") == 10 * k_credit - k_credit / 4);
}

TEST_CASE("credits scenario: an estimate for a job no worker can ever run says so, as submit does",
          "[credits][coordinator]") {
    CreditPool p;
    auto big = half_l4("big");
    big.resources.gpu_milli = 0;
    big.resources.gpu_memory_mib = 80 * 1024; // the pool's only GPU is a 24 GiB L4
    auto est = estimate_cost(*p.coord, p.fellow, "big.toml", {half_l4("fits"), big}, std::nullopt);
    REQUIRE_FALSE(est);
    CHECK(est.error().field == "jobs[1].resources");
    CHECK_THAT(est.error().message, Catch::Contains("can never run on this pool"));
    CHECK(estimate_cost(*p.coord, p.fellow, "fits.toml", {half_l4("fits")}, std::nullopt));
}

TEST_CASE("credits scenario: a pool fee goes to the fee account, never on the owner's own jobs",
          "[credits][coordinator]") {
    CreditPool p(true, 100'000); // 10%
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    p.submit(half_l4("a"));
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(3600 * 1000);
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, 1, "")); // its own failure: charged
    CHECK(p.coord->credit_desk().ledger().balance(Account::pool_fee()) == k_credit / 20);
    CHECK(p.balance("owners") == k_credit / 2 - k_credit / 20);
    CHECK(p.balance("fellows") == 10 * k_credit - k_credit / 2);
    p.check_books();
}

TEST_CASE("credits scenario: an attempt lost to the worker charges nothing and pays nothing",
          "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    auto job = p.submit(half_l4("lost"));
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(20'000); // the worker goes silent past its lease
    p.coord->tick();
    auto history = p.coord->job_book().attempts_of(job);
    REQUIRE(history.front().state == AttemptState::lost);
    CHECK(p.balance("fellows") == 10 * k_credit);
    CHECK(p.balance("owners") == 0);
    CHECK(p.coord->credit_desk().cost_micro(history.front(), p.coord->now_ms()) == 0);

    // A worker fault reported by the worker (container failed to start) is not charged either.
    auto again = p.place_and_start();
    REQUIRE(again);
    p.clock.advance_ms(5'000);
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *again, std::nullopt, "image pull failed",
                                          Outcome::worker_fault));
    CHECK(p.coord->job_book().attempts_of(job).back().state == AttemptState::lost);
    CHECK_THAT(p.coord->job_book().attempts_of(job).back().reason, Catch::Contains("worker fault: image pull failed"));
    CHECK(p.balance("fellows") == 10 * k_credit);
    CHECK(p.balance("owners") == 0);
    CHECK(read_job(*p.coord, p.admin, job).value().state == JobState::queued); // retried (max_attempts 3)
    auto report = pool_report(*p.coord, p.admin, 0).value();
    CHECK(report.workers[0].failures == 2);
    p.check_books();
}

TEST_CASE("credits scenario: an owner preemption charges nothing and does not use up an attempt",
          "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    auto spec = half_l4("preempted");
    spec.retry.max_attempts = 1;
    auto job = p.submit(spec);
    for (int round = 0; round < 3; ++round) {
        auto attempt = p.place_and_start();
        REQUIRE(attempt);
        p.clock.advance_ms(5 * 60 * 1000);
        REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
        REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, std::nullopt, "owner is gaming",
                                              Outcome::owner_preempted));
        CHECK(p.coord->job_book().attempts_of(job).back().state == AttemptState::preempted);
        CHECK(read_job(*p.coord, p.admin, job).value().state == JobState::queued); // again, despite max_attempts = 1
        CHECK(p.balance("fellows") == 10 * k_credit);
        CHECK(p.balance("owners") == 0);
    }
    // Three hand-backs keep the job off that worker for 10 minutes (test_owner_preemptions.cpp); then
    // it runs to the end and pays for that run only: 10 minutes x 0.5 GPU.
    p.clock.advance_ms(10 * 60 * 1000);
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(10 * 60 * 1000);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, 0, ""));
    CHECK(read_job(*p.coord, p.admin, job).value().state == JobState::succeeded);
    CHECK(p.balance("owners") == k_credit / 12);
    CHECK(p.balance("fellows") == 10 * k_credit - k_credit / 12);
    p.check_books();
}

TEST_CASE("credits scenario: a job preempted by the scheduler pays for the time it ran", "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    auto low = half_l4("low", 7200);
    low.resources.gpu_milli = 1000;
    low.priority = recipe::Priority::low;
    auto low_job = p.submit(low);
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    CHECK(p.balance("fellows") == 8 * k_credit); // a whole L4 for up to 2 hours
    for (int i = 0; i < 150; ++i) {              // 20 minutes, past the minimum runtime before preemption
        p.clock.advance_ms(8'000);
        REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
    }
    auto high = half_l4("urgent");
    high.resources.gpu_milli = 1000;
    high.priority = recipe::Priority::high;
    p.submit(high);
    p.coord->tick();
    REQUIRE(p.coord->job_book().attempts_of(low_job).back().state == AttemptState::preempted);
    // 20 minutes of a whole L4 at 1 credit per hour: 0.333333 to the owners, the rest released.
    CHECK(p.balance("owners") == k_credit / 3);
    CHECK(p.coord->credit_desk().cost_micro(p.coord->job_book().attempts_of(low_job).back(), p.coord->now_ms()) ==
          k_credit / 3);
    p.coord->tick(); // the urgent job takes the GPU: its hold of 1 credit
    CHECK(p.balance("fellows") == 10 * k_credit - k_credit / 3 - k_credit);
    p.check_books();
}

TEST_CASE("credits scenario: a team that cannot cover the hold stays queued with the numbers, until a grant",
          "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", k_credit / 10, std::nullopt, "")); // 0.1 credit
    auto refused =
        coordinator::submit(*p.coord, p.fellow, SubmitRequest{"train.toml", 0, {half_l4("big")}, std::nullopt, false});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::conflict);
    CHECK(refused.error().field == "credits");
    CHECK_THAT(refused.error().message, Catch::Contains("estimated at 0.5 credits") &&
                                            Catch::Contains("team `fellows` has 0.1 credits available") &&
                                            Catch::Contains("--allow-unfunded"));
    auto job = p.submit(half_l4("big"), true);
    CHECK_FALSE(p.place_and_start());
    CHECK_THAT(waiting_reason(*p.coord, job), Catch::Contains("waiting for credits") &&
                                                  Catch::Contains("0.1 credits") && Catch::Contains("0.5 credits"));
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", k_credit, std::nullopt, ""));
    CHECK(p.place_and_start());
    p.check_books();
}

TEST_CASE("credits scenario: budget refusal names the numbers", "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    REQUIRE(set_budget(*p.coord, p.admin, "fellows", k_credit, std::nullopt)); // 1 credit a day
    // Three quarter-GPU jobs of up to 2 hours: a hold of 0.5 each, 1.5 credits in all.
    std::vector<recipe::JobSpec> sweep{half_l4("a", 7200), half_l4("b", 7200), half_l4("c", 7200)};
    for (auto& s : sweep) {
        s.resources.gpu_milli = 250;
    }
    auto refused = coordinator::submit(*p.coord, p.fellow, SubmitRequest{"sweep.toml", 0, sweep, std::nullopt, false});
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("3 jobs) is estimated at 1.5 credits") &&
                                            Catch::Contains("team `fellows`'s budget allows 1 credit more now"));
    auto ok = coordinator::submit(*p.coord, p.fellow, SubmitRequest{"sweep.toml", 0, sweep, std::nullopt, true});
    REQUIRE(ok);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    // Two holds of 0.5 fit the daily budget; the third waits for it.
    CHECK(coordinator::assignments(*p.coord, p.owner_worker).value().size() == 2);
    CHECK_THAT(waiting_reason(*p.coord, ok->jobs[2]),
               Catch::Contains("waiting for credits") && Catch::Contains("budget"));
    auto view = credits_of(*p.coord, p.fellow, std::nullopt).value();
    CHECK(view.held_micro == k_credit);
    CHECK(view.budget_day_micro == k_credit);
}

TEST_CASE("credits scenario: with enforcement off (local mode) jobs run without a grant and the cost is recorded",
          "[credits][coordinator]") {
    CreditPool p(false);
    auto job = p.submit(half_l4("local"));
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(60 * 60 * 1000);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, 0, ""));
    CHECK(p.balance("fellows") == -k_credit / 2);
    CHECK(p.coord->credit_desk().cost_micro(p.coord->job_book().attempts_of(job).front(), p.coord->now_ms()) ==
          k_credit / 2);
    p.check_books();
}

TEST_CASE("credits scenario: grants expire back to the issuer, adjustments need a note", "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 5 * k_credit, p.clock.now_ms() + 1000, "trial"));
    CHECK_FALSE(grant_credits(*p.coord, p.admin, "fellows", 5 * k_credit, p.clock.now_ms() - 1, "past"));
    CHECK_FALSE(grant_credits(*p.coord, p.fellow, "fellows", 5 * k_credit, std::nullopt, "self-service"));
    CHECK_FALSE(adjust_credits(*p.coord, p.admin, "fellows", -k_credit, ""));
    REQUIRE(adjust_credits(*p.coord, p.admin, "fellows", -k_credit, "double grant by mistake"));
    CHECK(p.balance("fellows") == 4 * k_credit);
    p.clock.advance_ms(2000);
    p.coord->tick();
    CHECK(p.balance("fellows") == 0);
    CHECK(p.coord->credit_desk().ledger().balance(Account::issuer()) == 0);
    REQUIRE(p.restart());
    p.coord->tick(); // expired once, not again
    CHECK(p.coord->credit_desk().ledger().entries().size() == 3);
}

TEST_CASE("credits scenario: an unknown GPU model gets the default rate and a registration warning",
          "[credits][coordinator]") {
    CreditPool p;
    CHECK(p.warnings.empty()); // "NVIDIA L4" is in the catalog
    auto enroll = create_token(*p.coord, p.admin, store::Role::enroll, "owners", "e2").value();
    auto inv = l4_box();
    inv.gpus[0].model = "Quantum Accelerator 9000";
    auto reg =
        coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(), "odd-box", inv).value();
    REQUIRE(reg.warnings.size() == 1);
    CHECK_THAT(reg.warnings[0],
               Catch::Contains("Quantum Accelerator 9000") && Catch::Contains("default rate of 1 credit"));
}

TEST_CASE("credits scenario: a cached balance that disagrees with the rows stops the coordinator from starting",
          "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    p.coord.reset();
    p.db.reset();
    {
        SQLite::Database raw((p.dir.path() / "pool.db").string(), SQLite::OPEN_READWRITE);
        raw.exec("UPDATE account_balances SET balance = balance + 1 WHERE account = 'team:1'");
    }
    auto st = p.open();
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message,
               Catch::Contains("credits ledger: account team:1") && Catch::Contains("refusing to start"));
}

// Random operation sequences on a real coordinator: grants, submits, placements, completions of
// every outcome, lease losses, cancellations, scheduler ticks and restarts in between. After every
// step the books balance, every balance equals the sum of its rows, and no attempt is settled
// twice (an ended attempt's escrow entries add up to exactly its hold).
TEST_CASE("credits property: random coordinator histories with restarts keep the books balanced",
          "[credits][property]") {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        INFO("seed " << seed);
        CreditPool p(seed % 3 != 0);
        std::mt19937_64 rng(seed);
        auto pick = [&](std::int64_t lo, std::int64_t hi) {
            return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
        };
        std::vector<JobId> jobs;
        for (int op = 0; op < 60; ++op) {
            p.clock.advance_ms(pick(0, 8'000));
            switch (pick(0, 7)) {
            case 0:
                REQUIRE(grant_credits(*p.coord, p.admin, "fellows", pick(1, 3 * k_credit), std::nullopt, ""));
                break;
            case 1: {
                auto r = coordinator::submit(
                    *p.coord, p.fellow,
                    SubmitRequest{"r.toml", 0, {half_l4("j", pick(60, 7200))}, std::nullopt, pick(0, 1) == 1});
                if (r) {
                    jobs.push_back(r->jobs.front());
                }
                break;
            }
            case 2:
            case 3: {
                auto running = coordinator::assignments(*p.coord, p.owner_worker).value();
                for (const auto& a : running) {
                    (void)coordinator::start_attempt(*p.coord, p.owner_worker, a.attempt);
                }
                std::vector<AttemptId> live;
                for (JobId j : jobs) {
                    auto h = p.coord->job_book().attempts_of(j);
                    if (!h.empty() && !store::is_terminal(h.back().state)) {
                        live.push_back(h.back().id);
                    }
                }
                if (pick(0, 4) != 0) {
                    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, live));
                }
                if (!live.empty()) {
                    const AttemptId a =
                        live[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(live.size()) - 1))];
                    const auto outcome = static_cast<Outcome>(pick(0, 2));
                    (void)coordinator::complete_attempt(*p.coord, p.owner_worker, a, pick(0, 2), "", outcome);
                    // A duplicate completion is fenced and settles nothing.
                    CHECK_FALSE(coordinator::complete_attempt(*p.coord, p.owner_worker, a, 0, ""));
                }
                break;
            }
            case 4:
                if (!jobs.empty()) {
                    (void)cancel_job(
                        *p.coord, p.fellow,
                        jobs[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(jobs.size()) - 1))]);
                }
                break;
            case 5:
                REQUIRE(p.restart());
                break;
            default:
                if (pick(0, 2) != 0) {
                    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
                }
                p.coord->tick();
                break;
            }
            const auto& l = p.coord->credit_desk().ledger();
            REQUIRE(l.total() == 0);
        }
        p.check_books();
        // Escrow holds exactly what the live attempts hold; every ended attempt is closed.
        std::int64_t live_held = 0;
        for (JobId j : jobs) {
            for (const auto& a : p.coord->job_book().attempts_of(j)) {
                if (store::is_terminal(a.state)) {
                    CHECK(p.coord->credit_desk().ledger().held(a.id.value()) == 0);
                } else {
                    live_held += p.coord->credit_desk().ledger().held(a.id.value());
                }
            }
        }
        CHECK(p.coord->credit_desk().ledger().balance(Account::escrow()) == live_held);
        std::map<std::int64_t, std::int64_t> hold_of;
        std::map<std::int64_t, std::int64_t> settled_of;
        for (const auto& e : p.coord->credit_desk().ledger().entries()) {
            if (e.reason == credits::EntryReason::hold) {
                hold_of[e.attempt] += e.amount;
            } else if (e.attempt != 0) {
                settled_of[e.attempt] += e.amount;
            }
        }
        for (const auto& [a, s] : settled_of) {
            CHECK(s == hold_of[a]); // never settled twice, never more than held
        }
    }
}

} // namespace test_credits_scenarios
} // namespace
