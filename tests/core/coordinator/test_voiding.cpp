// Owners' earnings settle before they are paid out; an admin who bans a lying worker voids its
// results: the teams get their credits back, the jobs run again (issue: security, "a worker is
// trusted for everything it reports"). A real coordinator on a SQLite file with a manual clock,
// then the CLI against a real server.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_voiding {

using namespace gpupool;
using namespace gpupool::test::credit_pool;
using store::AttemptState;
using store::JobState;

namespace {

constexpr std::int64_t k_hour_ms = 3600 * 1000;

// Runs `job` on the pool's worker for `minutes` and completes it with `exit_code`; returns the attempt.
AttemptId run_for(CreditPool& p, std::int64_t minutes, std::int64_t exit_code = 0) {
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(minutes * 60 * 1000);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, exit_code, ""));
    return *attempt;
}

std::int64_t settling(const CreditPool& p) {
    return p.coord->credit_desk().ledger().balance(Account::settling_of(2));
}

// A second worker for the owners, registered with a fresh enrollment token.
Principal second_worker(CreditPool& p) {
    auto enroll = create_token(*p.coord, p.admin, store::Role::enroll, "owners", "e2").value();
    auto reg =
        coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(), "l4-box-2", l4_box());
    REQUIRE(reg);
    return p.coord->authenticate(reg->secret).value();
}

} // namespace

TEST_CASE("voiding: an owner's earnings settle for the pool's period, survive a restart, then are paid out",
          "[credits][coordinator][security]") {
    CreditPool p(true, 100'000, 24 * k_hour_ms); // 10% fee, a day to settle
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    p.submit(half_l4("train"));
    run_for(p, 30); // 0.5 GPU x 0.5 h x 1 credit/h = 0.25: 0.225 to the owners, 0.025 fee
    CHECK(p.balance("fellows") == 10 * k_credit - k_credit / 4);
    CHECK(p.balance("owners") == 0);
    CHECK(settling(p) == k_credit / 4 - k_credit / 40);
    auto view = credits_of(*p.coord, p.admin, std::string("owners")).value();
    CHECK(view.settling_micro == settling(p));
    CHECK(view.balance_micro == 0);
    // The owner sees it with its worker's own token (`gpupool worker status`), and only its own team.
    auto own = credits_of(*p.coord, p.owner_worker, std::nullopt);
    REQUIRE(own);
    CHECK(own->name == "owners");
    CHECK(own->settling_micro == settling(p));
    CHECK(credits_of(*p.coord, p.owner_worker, std::string("fellows")).error().code == ErrorCode::forbidden);

    p.clock.advance_ms(24 * k_hour_ms - 1); // a millisecond short of the period (from the charge)
    p.coord->tick();
    CHECK(p.balance("owners") == 0);
    REQUIRE(p.restart()); // settling earnings are durable
    CHECK(settling(p) == k_credit / 4 - k_credit / 40);
    p.clock.advance_ms(1);
    p.coord->tick();
    CHECK(p.balance("owners") == k_credit / 4 - k_credit / 40);
    CHECK(settling(p) == 0);
    p.coord->tick(); // paid once
    CHECK(p.balance("owners") == k_credit / 4 - k_credit / 40);
    REQUIRE(p.restart());
    CHECK(p.balance("owners") == k_credit / 4 - k_credit / 40);
    auto report = pool_report(*p.coord, p.admin, 0).value();
    CHECK(report.settling_micro == 0);
    p.check_books();
}

TEST_CASE("voiding: a banned worker's results since T are refunded from settling and their jobs run again",
          "[credits][coordinator][security]") {
    CreditPool p(true, 100'000, 24 * k_hour_ms);
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    const JobId early = p.submit(half_l4("early"));
    const AttemptId early_attempt = run_for(p, 30);
    p.clock.advance_ms(k_hour_ms);
    const std::int64_t since = p.clock.now_ms();
    auto lying = half_l4("lying");
    lying.retry.max_attempts = 2;
    const JobId job = p.submit(lying);
    const AttemptId attempt = run_for(p, 30);
    const JobId running = p.submit(half_l4("running"));
    const AttemptId live = *p.place_and_start();
    p.clock.advance_ms(10 * 60 * 1000);
    const std::int64_t fellows_before = p.balance("fellows");

    // A member may not void; an admin bans and voids from `since`.
    CHECK(ban_worker(*p.coord, p.fellow, p.owner_worker.worker.value(), since).error().code == ErrorCode::forbidden);
    auto voided = ban_worker(*p.coord, p.admin, *p.owner_worker.worker, since);
    REQUIRE(voided);
    CHECK(voided->attempts == std::vector<AttemptId>{attempt}); // not the earlier one, not the live one
    CHECK(voided->requeued == std::vector<JobId>{job});
    CHECK(voided->refunded_micro == k_credit / 4);
    // The charge came back from settling, the fee from the pool fee; the live attempt was lost
    // (nothing charged) and its whole hold released.
    CHECK(p.balance("fellows") == fellows_before + k_credit / 4 + k_credit / 2);
    CHECK(settling(p) == k_credit / 4 - k_credit / 40); // the early job's earnings, still settling
    CHECK(p.coord->credit_desk().ledger().balance(Account::pool_fee()) == k_credit / 40);

    for (int round = 0; round < 2; ++round) { // and after a restart
        auto j = read_job(*p.coord, p.fellow, job).value();
        CHECK(j.state == JobState::queued);
        CHECK_THAT(j.reason, Catch::Contains("voided") && Catch::Contains("queued to run again"));
        CHECK_FALSE(j.finished_at);
        auto history = p.coord->job_book().attempts_of(job);
        REQUIRE(history.size() == 1);
        CHECK(history[0].voided_at == p.clock.now_ms());
        CHECK(history[0].state == AttemptState::succeeded); // what the worker said, kept
        CHECK(p.coord->credit_desk().cost_micro(history[0], p.coord->now_ms()) == 0);
        CHECK(read_job(*p.coord, p.fellow, early).value().state == JobState::succeeded);
        CHECK_FALSE(p.coord->job_book().attempts_of(early).front().voided_at);
        CHECK(p.coord->job_book().attempts_of(running).back().id == live);
        CHECK(p.coord->job_book().attempts_of(running).back().state == AttemptState::lost);
        auto out = coordinator::read_output(*p.coord, p.fellow, job);
        REQUIRE_FALSE(out);
        CHECK(out.error().code == ErrorCode::conflict);
        CHECK_THAT(out.error().message, Catch::Contains("voided"));
        REQUIRE(p.restart());
    }
    auto report = pool_report(*p.coord, p.admin, 0).value();
    CHECK(report.workers.front().voided == 1);
    const auto& fellows = report.teams.front();
    CHECK(fellows.refunded_micro == k_credit / 4);
    CHECK(fellows.spent_micro == k_credit / 4); // the early job only
    CHECK(p.coord->job_book().attempts_of(early).front().id == early_attempt);

    // The job runs again on an honest worker. The voided attempt did not use up one of its two
    // attempts: after one more lost to a worker fault it still gets a third.
    Principal honest = second_worker(p);
    REQUIRE(coordinator::heartbeat(*p.coord, honest, {}));
    p.coord->tick();
    auto assigned = coordinator::assignments(*p.coord, honest).value();
    REQUIRE(assigned.size() == 2); // the voided job and the one lost to the ban
    const auto again = std::find_if(assigned.begin(), assigned.end(), [&](const Assignment& a) { return a.job == job; });
    REQUIRE(again != assigned.end());
    REQUIRE(coordinator::start_attempt(*p.coord, honest, again->attempt));
    REQUIRE(coordinator::complete_attempt(*p.coord, honest, again->attempt, std::nullopt, "gpu fell off",
                                          Outcome::worker_fault));
    CHECK(read_job(*p.coord, p.fellow, job).value().state == JobState::queued);

    // Banning again with the same time voids nothing more.
    auto twice = ban_worker(*p.coord, p.admin, *p.owner_worker.worker, since);
    REQUIRE(twice);
    CHECK(twice->attempts.empty());
    p.check_books();
}

TEST_CASE("voiding: earnings already paid out are clawed back from the owner's balance",
          "[credits][coordinator][security]") {
    CreditPool p(true, 0, k_hour_ms);
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("train"));
    run_for(p, 30, 3); // failed, exit 3: charged all the same
    CHECK(read_job(*p.coord, p.fellow, job).value().state == JobState::failed);
    p.clock.advance_ms(2 * k_hour_ms);
    p.coord->tick();
    CHECK(p.balance("owners") == k_credit / 4);
    auto voided = ban_worker(*p.coord, p.admin, *p.owner_worker.worker, 0);
    REQUIRE(voided);
    CHECK(voided->refunded_micro == k_credit / 4);
    CHECK(voided->requeued == std::vector<JobId>{job}); // a failure it reported is not trusted either
    CHECK(p.balance("owners") == 0);
    CHECK(p.balance("fellows") == 10 * k_credit);
    auto movements = credits_of(*p.coord, p.admin, std::string("owners")).value().movements;
    REQUIRE_FALSE(movements.empty());
    CHECK(movements.front().reason == credits::EntryReason::refund);
    CHECK_THAT(movements.front().note, Catch::Contains("worker 1 was banned"));
    p.check_books();
}

TEST_CASE("voiding: without a settling period earnings are paid at once, and a plain ban voids nothing",
          "[credits][coordinator][security]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, ""));
    const JobId job = p.submit(half_l4("train"));
    run_for(p, 30);
    CHECK(p.balance("owners") == k_credit / 4);
    CHECK(settling(p) == 0);
    auto banned = ban_worker(*p.coord, p.admin, *p.owner_worker.worker, std::nullopt);
    REQUIRE(banned);
    CHECK(banned->attempts.empty());
    CHECK(read_job(*p.coord, p.fellow, job).value().state == JobState::succeeded);
    CHECK(p.balance("owners") == k_credit / 4);
    CHECK(ban_worker(*p.coord, p.admin, WorkerId(99), 0).error().code == ErrorCode::not_found);
}

TEST_CASE("voiding through the CLI: admin ban --void-since, then status shows the voided attempt",
          "[credits][service][security]") {
    using namespace gpupool::test::svc;
    Pool p;
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    const std::string job = std::to_string(p.submit({spec("lying")})["jobs"][0].get<std::int64_t>());
    json polled = json::object();
    for (int i = 0; i < 50 && polled.value("assignments", json::array()).empty(); ++i) {
        polled = call(w, "POST", "/v1/workers/poll?wait_ms=200", json::object());
    }
    REQUIRE(polled["assignments"].size() == 1);
    const std::string attempt = std::to_string(polled["assignments"][0]["attempt"].get<std::int64_t>());
    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    REQUIRE(w.request("PUT", "/v1/attempts/" + attempt + "/outputs", std::string("made-up results"))->status == 200);
    call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", 0}});

    const std::string worker = std::to_string(p.worker_id);
    auto as = [&](const std::string& token, std::vector<std::string> args) {
        args.insert(args.begin(), {"--url", p.server.url, "--token", token});
        return test::run_gpupool(args);
    };
    auto bad = as(p.server.admin_token, {"admin", "ban", worker, "--void-since", "last tuesday"});
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("--void-since"));
    CHECK(as(p.member, {"admin", "ban", worker, "--void-since", "1h"}).exit_code == 1); // admins only

    auto ban = as(p.server.admin_token, {"admin", "ban", worker, "--void-since", "1h"});
    INFO(ban.out << ban.err);
    REQUIRE(ban.exit_code == 0);
    CHECK_THAT(ban.out, Catch::Contains("worker " + worker + " is now banned") &&
                            Catch::Contains("voided 1 attempt(s)") && Catch::Contains("1 job(s) run again"));
    auto status = as(p.member, {"status", job});
    REQUIRE(status.exit_code == 0);
    CHECK_THAT(status.out, Catch::Contains("queued") && Catch::Contains("succeeded (voided)"));
    auto m = p.server.client(p.member);
    auto view = call(m, "GET", "/v1/jobs/" + job);
    CHECK(view["attempt_history"][0]["voided_at"].is_number_integer());
    CHECK(view["attempt_history"][0]["worker"] == p.worker_id); // which worker produced it
    CHECK(m.request("GET", "/v1/jobs/" + job + "/outputs")->status == 409);
    auto report = as(p.server.admin_token, {"--json", "admin", "report"});
    REQUIRE(report.exit_code == 0);
    CHECK(json::parse(report.out)["workers"][0]["voided"] == 1);
}

} // namespace test_voiding
} // namespace
