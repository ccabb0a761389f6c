// Spot checks in the coordinator (spot_checks.hpp): sampling, check jobs kept off the checked owner,
// verdicts, tie-breaks, quarantine and the pool's pay, on a real coordinator over a SQLite file with
// a manual clock. Every result is sampled here (fraction 1); the sampling odds are
// verify::sample_probability's, tested in tests/core/verify/test_spot_check.cpp.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/evidence.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/spot_checks.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/store/sqlite_store.hpp"
#include "core/util/sha256.hpp"
#include "tests/core/coordinator/credit_pool.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_spot_checks {

using namespace gpupool;
using namespace gpupool::coordinator;
using credits::Account;
using store::JobState;
using store::WorkerState;
using test::credit_pool::half_l4;
using test::credit_pool::k_credit;
using test::credit_pool::l4_box;

// fellows (researchers, 10 credits) and owner teams a, b, c with one L4 worker each; every
// succeeded result is checked; a 10 % pool fee.
struct CheckPool {
    test::TempDir dir;
    util::ManualClock clock;
    std::unique_ptr<store::SqliteStore> db;
    std::unique_ptr<Coordinator> coord;
    CoordinatorOptions options;
    Principal admin;
    Principal fellow;
    std::map<std::string, Principal> workers; // by owner team: "a", "b", "c"
    std::map<std::string, WorkerId> ids;
    int uploads = 0;

    explicit CheckPool(double fraction = 1.0) {
        options.lease_ms = 10'000;
        options.worker_timeout_ms = 10'000;
        options.credits.pool_fee_ppm = 100'000;
        options.spot_checks.fraction = fraction;
        options.spot_check_seed = 1;
        REQUIRE(open());
        admin = coord->authenticate(init_admin(*coord).value().secret).value();
        REQUIRE(create_team(*coord, admin, "fellows", 1));
        fellow = coord->authenticate(create_token(*coord, admin, store::Role::member, "fellows", "f").value().secret)
                     .value();
        REQUIRE(grant_credits(*coord, admin, "fellows", 10 * k_credit, std::nullopt, ""));
        for (const std::string team : {"a", "b", "c"}) {
            REQUIRE(create_team(*coord, admin, team, 1));
            auto enroll = create_token(*coord, admin, store::Role::enroll, team, "e").value();
            auto reg = register_worker(*coord, coord->authenticate(enroll.secret).value(), "box-" + team, l4_box());
            REQUIRE(reg);
            workers[team] = coord->authenticate(reg->secret).value();
            ids[team] = *workers[team].worker;
        }
    }

    Status open() {
        db = store::SqliteStore::open(dir.path() / "pool.db").value();
        coord = std::make_unique<Coordinator>(*db, clock, options);
        return coord->start();
    }

    JobId submit(recipe::JobSpec spec) {
        auto r =
            coordinator::submit(*coord, fellow, SubmitRequest{"eval.toml", 0, {std::move(spec)}, std::nullopt, false});
        REQUIRE(r);
        return r->jobs.front();
    }

    // Only `team`'s worker is heard (the others fall silent): what a pass places goes there, if
    // anything may. Returns the attempt it started.
    std::optional<AttemptId> place_on(const std::string& team) {
        clock.advance_ms(options.worker_timeout_ms + 1'000);
        REQUIRE(coordinator::heartbeat(*coord, workers.at(team), {}));
        coord->tick();
        auto a = coordinator::assignments(*coord, workers.at(team)).value();
        if (a.empty()) {
            return std::nullopt;
        }
        REQUIRE(coordinator::start_attempt(*coord, workers.at(team), a.front().attempt));
        return a.front().attempt;
    }

    // The attempt runs `minutes`, uploads outputs whose tree digest is `tree`, and exits 0.
    void finish(const std::string& team, AttemptId attempt, const std::string& tree, std::int64_t minutes = 30) {
        clock.advance_ms(minutes * 60'000);
        REQUIRE(coordinator::heartbeat(*coord, workers.at(team), {attempt}));
        const auto path = dir.path() / ("outputs-" + std::to_string(++uploads));
        std::ofstream(path) << tree;
        UploadedFile f{path, static_cast<std::int64_t>(tree.size()), util::sha256_hex(tree), archive::Listing{}, {}};
        f.listing->entry_count = 1;
        f.listing->tree_sha256 = util::sha256_hex(tree);
        f.listing->entries.push_back({"results.txt", "file", 1, util::sha256_hex(tree), ""});
        REQUIRE(coordinator::upload_output(*coord, workers.at(team), attempt, f));
        REQUIRE(coordinator::complete_attempt(*coord, workers.at(team), attempt, 0, ""));
    }

    std::vector<const store::JobRecord*> checks() const {
        std::vector<const store::JobRecord*> out;
        for (const auto& [id, j] : coord->job_book().jobs()) {
            if (j.is_check()) {
                out.push_back(&j);
            }
        }
        return out;
    }

    const store::WorkerRecord& worker(const std::string& team) const { return coord->roster().at(ids.at(team)).record; }

    nlohmann::json check_evidence(JobId job) {
        auto m = job_manifest(*coord, admin, job);
        REQUIRE(m);
        return m->value("check", nlohmann::json());
    }

    std::int64_t check_pay_to(const std::string& team) const {
        std::int64_t sum = 0;
        const TeamId id = coord->tokens().team_ids({team}).front();
        for (const auto& e : coord->credit_desk().ledger().entries()) {
            if (e.reason == credits::EntryReason::check_pay && e.credit == Account::of_team(id.value())) {
                CHECK(e.debit == Account::pool_fee());
                sum += e.amount;
            }
        }
        return sum;
    }
};

recipe::JobSpec eval(const std::string& name) {
    return half_l4(name);
}

// A job run on a's worker with outputs `original`, then its check on b's worker with `replica`.
struct Checked {
    JobId job;
    AttemptId original;
    AttemptId replica;
};
Checked run_and_check(CheckPool& p, const std::string& original, const std::string& replica) {
    const JobId job = p.submit(eval("eval"));
    const auto first = p.place_on("a");
    REQUIRE(first);
    p.finish("a", *first, original);
    const auto second = p.place_on("b");
    REQUIRE(second);
    p.finish("b", *second, replica);
    return {job, *first, *second};
}

TEST_CASE("spot checks: an agreeing check runs on another owner's worker, counts for both and is paid by the pool",
          "[spot-checks][coordinator][evidence]") {
    CheckPool p;
    const std::int64_t before = p.coord->credit_desk().ledger().balance(Account::of_team(1));
    const JobId job = p.submit(eval("eval"));
    const auto original = p.place_on("a");
    REQUIRE(original);
    p.finish("a", *original, "score 0.71");
    const std::int64_t charged = before - p.coord->credit_desk().ledger().balance(Account::of_team(1));
    CHECK(charged == k_credit / 4); // half an L4 for half an hour: the team's own job

    auto checks = p.checks();
    REQUIRE(checks.size() == 1);
    const JobId check = checks.front()->id;
    CHECK(checks.front()->check_of == *original);
    CHECK(checks.front()->team == p.coord->job_book().jobs().at(job).team);
    CHECK(p.check_evidence(job)["status"] == "pending");

    // Never on the checked owner's worker: it waits while only a's is there.
    CHECK_FALSE(p.place_on("a"));
    CHECK(p.coord->job_book().jobs().at(check).state == JobState::queued);
    const auto replica = p.place_on("b");
    REQUIRE(replica);
    CHECK(p.coord->credit_desk().ledger().held(replica->value()) == 0); // no hold: the team pays nothing
    p.finish("b", *replica, "score 0.71");

    CHECK(p.worker("a").checks_agreed == 1);
    CHECK(p.worker("b").checks_agreed == 1);
    CHECK(p.worker("a").checks_disagreed == 0);
    CHECK(p.check_evidence(job)["status"] == "agreed");
    CHECK(p.check_evidence(check)["status"] == "agreed");
    // The team paid for its own job only; the pool fee paid b's run (half an L4, half an hour).
    CHECK(before - p.coord->credit_desk().ledger().balance(Account::of_team(1)) == charged);
    CHECK(p.check_pay_to("b") == k_credit / 4);
    CHECK(p.coord->credit_desk().ledger().balance(Account::pool_fee()) == k_credit / 40 - k_credit / 4);
    // The pool's overview (the dashboard's workers table) shows the score of checked workers only.
    auto overview = p.coord->overview(p.admin);
    REQUIRE(overview);
    for (const auto& w : overview->workers) {
        INFO(w.name);
        if (w.name == "box-c") {
            CHECK_FALSE(w.reliability);
        } else {
            REQUIRE(w.reliability);
            CHECK(*w.reliability == Approx(2.0 / 3.0)); // (1 + 1) / (2 + 1)
        }
    }
    CHECK_FALSE(p.coord->drift());
    CHECK_FALSE(p.coord->pool_view_drift());

    // The records survive a restart; a check job is never sampled in its turn.
    REQUIRE(p.coord->job_book().jobs().size() == 2);
    p.coord.reset();
    p.db.reset();
    REQUIRE(p.open());
    CHECK(p.worker("a").checks_agreed == 1);
    CHECK(p.coord->job_book().jobs().at(check).check_of == *original);
    CHECK_FALSE(p.coord->drift());
}

TEST_CASE("spot checks: a disagreement goes to a third owner and the forger is quarantined, audited and idle",
          "[spot-checks][coordinator][evidence][security]") {
    CheckPool p;
    const auto [job, original, replica] = run_and_check(p, "forged", "score 0.71");
    CHECK(p.check_evidence(job)["status"] == "disputed");
    auto checks = p.checks();
    REQUIRE(checks.size() == 2); // the check and its tie-break
    const store::JobRecord* tie = checks.back();
    CHECK(tie->check_of == original);
    CHECK(tie->check_against == replica);
    CHECK(p.worker("a").checks_agreed + p.worker("a").checks_disagreed == 0);

    // Kept off both owners: only c's worker takes it.
    CHECK_FALSE(p.place_on("a"));
    CHECK_FALSE(p.place_on("b"));
    const auto third = p.place_on("c");
    REQUIRE(third);
    p.finish("c", *third, "score 0.71");

    CHECK(p.worker("a").checks_disagreed == 1);
    CHECK(p.worker("a").checks_agreed == 0);
    CHECK(p.worker("b").checks_agreed == 1);
    CHECK(p.worker("c").checks_agreed == 1);
    CHECK(p.worker("b").checks_disagreed == 0);
    CHECK(p.check_evidence(job)["status"] == "disagreed");
    CHECK(p.check_evidence(job)["jobs"].size() == 2);

    // One disagreement and no agreement condemn a new worker: quarantined, with an audit entry.
    CHECK(p.worker("a").state == WorkerState::quarantined);
    CHECK(p.coord->roster().presence(p.ids.at("a"), p.clock.now_ms()) == "quarantined");
    auto audit = p.coord->audit_log(p.admin, {});
    REQUIRE(audit);
    REQUIRE_FALSE(audit->empty());
    CHECK(audit->front().action == "worker.quarantine");
    CHECK_THAT(audit->front().target, Catch::Contains("box-a"));
    CHECK(p.coord->metrics().workers_quarantined == 1);
    // It gets no new work; an admin's activate lifts the quarantine.
    p.submit(eval("next"));
    CHECK_FALSE(p.place_on("a"));
    REQUIRE(set_worker_state(*p.coord, p.admin, p.ids.at("a"), WorkerState::active));
    CHECK(p.place_on("a"));
    CHECK_FALSE(p.coord->drift());
}

TEST_CASE("spot checks: when the checking worker lies the tie-break condemns it, not the worker it checked",
          "[spot-checks][coordinator][evidence][security]") {
    CheckPool p;
    const JobId job = run_and_check(p, "score 0.71", "forged").job;
    const auto third = p.place_on("c");
    REQUIRE(third);
    p.finish("c", *third, "score 0.71");
    CHECK(p.worker("a").checks_agreed == 1);
    CHECK(p.worker("a").checks_disagreed == 0);
    CHECK(p.worker("b").checks_disagreed == 1);
    CHECK(p.worker("b").state == WorkerState::quarantined);
    CHECK(p.worker("a").state == WorkerState::active);
    CHECK(p.check_evidence(job)["status"] == "agreed");
    // Each run of a check was paid by the pool, the liar's too (voiding it is the admin's ban).
    CHECK(p.check_pay_to("b") == k_credit / 4);
    CHECK(p.check_pay_to("c") == k_credit / 4);
}

TEST_CASE("spot checks: what is never sampled, and what members may not do to a check", "[spot-checks][coordinator]") {
    SECTION("compare = none") {
        CheckPool p;
        auto spec = eval("eval");
        spec.verify.compare = recipe::CompareMode::none;
        p.submit(spec);
        const auto a = p.place_on("a");
        REQUIRE(a);
        p.finish("a", *a, "x");
        CHECK(p.checks().empty());
    }
    SECTION("the pool does not check (fraction 0)") {
        CheckPool p(0.0);
        p.submit(eval("eval"));
        const auto a = p.place_on("a");
        REQUIRE(a);
        p.finish("a", *a, "x");
        CHECK(p.checks().empty());
    }
    SECTION("a failed job") {
        CheckPool p;
        p.submit(eval("eval"));
        const auto a = p.place_on("a");
        REQUIRE(a);
        REQUIRE(coordinator::complete_attempt(*p.coord, p.workers.at("a"), *a, 3, ""));
        CHECK(p.checks().empty());
    }
    SECTION("a member can neither cancel nor retry a check; an admin can cancel it") {
        CheckPool p;
        p.submit(eval("eval"));
        const auto a = p.place_on("a");
        REQUIRE(a);
        p.finish("a", *a, "x");
        REQUIRE(p.checks().size() == 1);
        const JobId check = p.checks().front()->id;
        auto refused = cancel_job(*p.coord, p.fellow, check);
        REQUIRE_FALSE(refused);
        CHECK(refused.error().code == ErrorCode::forbidden);
        CHECK(cancel_sweep(*p.coord, p.fellow, p.coord->job_book().jobs().at(check).sweep_id).error().code ==
              ErrorCode::forbidden);
        REQUIRE(cancel_job(*p.coord, p.admin, check));
        api::RetryRequest again;
        again.jobs = {check};
        auto retried = retry(*p.coord, p.fellow, again);
        REQUIRE_FALSE(retried);
        CHECK_THAT(retried.error().message, Catch::Contains("spot check"));
    }
}

} // namespace test_spot_checks
} // namespace
