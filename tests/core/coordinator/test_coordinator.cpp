// The Coordinator state machine on a real SQLite file and a manual clock.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/store/sqlite_store.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_coordinator {

using namespace gpupool;
using namespace gpupool::coordinator;
using store::AttemptState;
using store::JobState;

namespace {

recipe::JobSpec job_spec(const std::string& name, std::int64_t gpu_milli = 500) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"true"};
    if (gpu_milli > 0) {
        s.resources.gpus = 1;
        s.resources.gpu_milli = gpu_milli;
    }
    s.resources.cpu_milli = 1000;
    s.resources.memory_mib = 1024;
    s.resources.max_runtime_s = 600;
    return s;
}

api::Inventory inventory(int gpus = 1, std::int64_t gpu_mem = 24576) {
    api::Inventory inv;
    inv.cpu_milli = 8000;
    inv.memory_mib = 32768;
    for (int i = 0; i < gpus; ++i) {
        inv.gpus.push_back({i, "L4", gpu_mem, "", ""});
    }
    return inv;
}

// A pool with an admin, a team "fellows" with a member, and an owner team with one worker.
struct Pool {
    test::TempDir dir;
    util::ManualClock clock;
    std::unique_ptr<store::SqliteStore> db;
    std::unique_ptr<Coordinator> coord;
    CoordinatorOptions options;
    Principal admin;
    Principal member;
    Principal other_member;
    Principal worker;
    Principal worker2;

    Pool() {
        options.lease_ms = 10'000;
        options.worker_timeout_ms = 10'000;
        options.policy.placement.scorer = sched::ScorerKind::bestfit;
        open();
        auto tok = init_admin(*coord);
        REQUIRE(tok);
        admin = coord->authenticate(tok->secret).value();
        REQUIRE(create_team(*coord, admin, "fellows", 1));
        REQUIRE(create_team(*coord, admin, "owners", 1));
        REQUIRE(create_team(*coord, admin, "others", 1));
        member = coord->authenticate(create_token(*coord, admin, store::Role::member, "fellows", "m").value().secret)
                     .value();
        other_member =
            coord->authenticate(create_token(*coord, admin, store::Role::member, "others", "o").value().secret).value();
        worker = add_worker("box-1");
        worker2 = add_worker("box-2");
        // Credits are enforced: the teams that submit start with a grant (tests/core/credits cover
        // what happens without).
        REQUIRE(grant_credits(*coord, admin, "fellows", 1'000'000 * credits::k_micro_per_credit, std::nullopt, "test"));
        REQUIRE(grant_credits(*coord, admin, "others", 1'000'000 * credits::k_micro_per_credit, std::nullopt, "test"));
    }

    void open() {
        db = store::SqliteStore::open(dir.path() / "pool.db").value();
        coord = std::make_unique<Coordinator>(*db, clock, options);
        REQUIRE(coord->start());
    }

    // Simulates a coordinator crash and restart: a new Coordinator over the same file.
    void restart() {
        coord.reset();
        db.reset();
        open();
    }

    Principal add_worker(const std::string& name) {
        auto enroll = create_token(*coord, admin, store::Role::enroll, "owners", "enroll").value();
        auto reg = coordinator::register_worker(*coord, coord->authenticate(enroll.secret).value(), name, inventory());
        REQUIRE(reg);
        return coord->authenticate(reg->secret).value();
    }

    std::vector<JobId> submit(std::vector<recipe::JobSpec> specs, std::int64_t max_parallel = 0) {
        SubmitRequest r{"test.toml", max_parallel, std::move(specs), std::nullopt};
        auto res = coordinator::submit(*coord, member, std::move(r));
        REQUIRE(res);
        return res->jobs;
    }

    std::vector<Assignment> assigned(const Principal& w) { return coordinator::assignments(*coord, w).value(); }
    JobState state(JobId id) { return read_job(*coord, admin, id).value().state; }
};

} // namespace

TEST_CASE("coordinator: a job runs through queued, assigned, running, succeeded", "[coordinator]") {
    Pool p;
    auto ids = p.submit({job_spec("a")});
    CHECK(p.state(ids[0]) == JobState::queued);
    p.coord->tick();
    CHECK(p.state(ids[0]) == JobState::assigned);
    auto a1 = p.assigned(p.worker);
    auto a2 = p.assigned(p.worker2);
    REQUIRE(a1.size() + a2.size() == 1);
    const Principal& w = a1.empty() ? p.worker2 : p.worker;
    const Assignment& as = a1.empty() ? a2[0] : a1[0];
    CHECK(as.spec.name == "a");
    CHECK(as.gpu_milli == 500);
    CHECK(as.attempt_number == 1);
    REQUIRE(coordinator::start_attempt(*p.coord, w, as.attempt));
    CHECK(p.state(ids[0]) == JobState::running);
    CHECK(p.assigned(w).empty()); // started attempts are no longer offered
    REQUIRE(coordinator::append_log(*p.coord, w, as.attempt, 0, "hello\n"));
    REQUIRE(coordinator::complete_attempt(*p.coord, w, as.attempt, 0, ""));
    auto job = read_job(*p.coord, p.member, ids[0]).value();
    CHECK(job.state == JobState::succeeded);
    CHECK(job.exit_code == 0);
    auto logs = coordinator::read_logs(*p.coord, p.member, ids[0], 0).value();
    CHECK(logs.data == "hello\n");
    CHECK(logs.finished);
}

TEST_CASE("coordinator: a sweep is stored whole and survives a restart", "[coordinator]") {
    Pool p;
    std::vector<recipe::JobSpec> specs;
    for (int i = 0; i < 100; ++i) {
        specs.push_back(job_spec("s-" + std::to_string(i), 100));
    }
    auto ids = p.submit(specs);
    REQUIRE(ids.size() == 100);
    p.restart();
    auto jobs = list_jobs(*p.coord, p.member, {}).value().jobs;
    CHECK(jobs.size() == 100);
    CHECK(jobs.front().spec.name == "s-0");
    CHECK(jobs.back().spec.name == "s-99");
    // New ids continue after the old ones.
    auto more = p.submit({job_spec("after")});
    CHECK(more[0].value() == ids.back().value() + 1);
}

TEST_CASE("coordinator: a lost lease re-queues the job, and the old attempt is fenced", "[coordinator]") {
    Pool p;
    auto ids = p.submit({job_spec("a", 1000)});
    p.coord->tick();
    auto on1 = p.assigned(p.worker);
    const Principal& first = on1.empty() ? p.worker2 : p.worker;
    const Principal& second = on1.empty() ? p.worker : p.worker2;
    AttemptId old = (on1.empty() ? p.assigned(p.worker2) : on1)[0].attempt;
    REQUIRE(coordinator::start_attempt(*p.coord, first, old));

    // The second worker keeps heartbeating; the first goes silent past its lease.
    p.clock.advance_ms(6'000);
    REQUIRE(coordinator::heartbeat(*p.coord, second, {}));
    p.clock.advance_ms(6'000);
    REQUIRE(coordinator::heartbeat(*p.coord, second, {}));
    p.coord->tick();
    auto history = p.coord->job_book().attempts_of(ids[0]);
    REQUIRE(history.size() == 2);
    CHECK(history[0].state == AttemptState::lost);
    CHECK(history[1].worker == *second.worker); // placed again, on the live worker
    CHECK(p.state(ids[0]) == JobState::assigned);

    // The first worker comes back: everything about its old attempt is refused.
    auto late = coordinator::complete_attempt(*p.coord, first, old, 0, "");
    REQUIRE_FALSE(late);
    CHECK(late.error().code == ErrorCode::conflict);
    CHECK_FALSE(coordinator::append_log(*p.coord, first, old, 0, "late\n"));
    auto hb = coordinator::heartbeat(*p.coord, first, {old});
    REQUIRE(hb);
    CHECK(hb->stop == std::vector<AttemptId>{old}); // told to stop it
    CHECK(p.state(ids[0]) == JobState::assigned);
}

TEST_CASE("coordinator: leases renewed by heartbeats or by a restart run out on time, no sooner",
          "[coordinator]") {
    Pool p;
    auto ids = p.submit({job_spec("a", 1000), job_spec("b", 1000)});
    p.coord->tick();
    std::map<std::string, std::pair<const Principal*, AttemptId>> on; // job name -> (worker, attempt)
    for (const Principal* w : {&p.worker, &p.worker2}) {
        for (const auto& a : p.assigned(*w)) {
            REQUIRE(coordinator::start_attempt(*p.coord, *w, a.attempt));
            on[read_job(*p.coord, p.admin, a.job).value().spec.name] = {w, a.attempt};
        }
    }
    REQUIRE(on.size() == 2);
    auto state_of = [&](const std::string& name) {
        for (const auto& a : p.coord->job_book().attempts_of(ids[name == "a" ? 0 : 1])) {
            if (a.id == on[name].second) {
                return a.state;
            }
        }
        return AttemptState::lost;
    };
    for (int i = 0; i < 4; ++i) { // 32 s, three times the lease: only the renewals keep them
        p.clock.advance_ms(8'000);
        for (const auto& [name, where] : on) {
            REQUIRE(coordinator::heartbeat(*p.coord, *where.first, {where.second}));
        }
        p.coord->tick();
    }
    CHECK(state_of("a") == AttemptState::running);
    CHECK(state_of("b") == AttemptState::running);
    p.restart(); // every live attempt gets a fresh lease
    p.clock.advance_ms(8'000);
    REQUIRE(coordinator::heartbeat(*p.coord, *on["a"].first, {on["a"].second}));
    p.coord->tick();
    CHECK(state_of("a") == AttemptState::running);
    CHECK(state_of("b") == AttemptState::running); // 8 s into its 10 s lease
    p.clock.advance_ms(3'000);
    REQUIRE(coordinator::heartbeat(*p.coord, *on["a"].first, {on["a"].second}));
    p.coord->tick();
    CHECK(state_of("a") == AttemptState::running);
    CHECK(state_of("b") == AttemptState::lost);
}

TEST_CASE("coordinator: lost attempts count against max_attempts", "[coordinator]") {
    Pool p;
    auto spec = job_spec("flaky", 1000);
    spec.retry.max_attempts = 2;
    auto ids = p.submit({spec});
    for (int round = 0; round < 2; ++round) {
        p.coord->tick();
        p.clock.advance_ms(61'000); // both workers silent: leases lapse and workers time out
        p.coord->tick();
        // Bring the workers back for the next round.
        REQUIRE(coordinator::heartbeat(*p.coord, p.worker, {}));
        REQUIRE(coordinator::heartbeat(*p.coord, p.worker2, {}));
    }
    auto job = read_job(*p.coord, p.admin, ids[0]).value();
    CHECK(job.state == JobState::failed);
    CHECK(job.attempts == 2);
    CHECK_THAT(job.reason, Catch::Contains("no attempts left"));
}

TEST_CASE("coordinator: retry on listed exit codes only", "[coordinator]") {
    Pool p;
    auto spec = job_spec("r", 1000);
    spec.retry.on_exit_codes = {75};
    auto ids = p.submit({spec, job_spec("plain-fail", 1000)});
    p.coord->tick();
    for (const Principal* w : {&p.worker, &p.worker2}) {
        for (const auto& a : p.assigned(*w)) {
            REQUIRE(coordinator::start_attempt(*p.coord, *w, a.attempt));
            REQUIRE(coordinator::complete_attempt(*p.coord, *w, a.attempt, a.job == ids[0] ? 75 : 1, ""));
        }
    }
    CHECK(p.state(ids[0]) == JobState::queued); // 75 is retried
    CHECK(p.state(ids[1]) == JobState::failed); // 1 is not
}

TEST_CASE("coordinator: cancellation stops queued and running jobs", "[coordinator]") {
    Pool p;
    auto ids = p.submit({job_spec("run", 1000), job_spec("run2", 1000), job_spec("wait", 1000)});
    p.coord->tick(); // two whole-GPU jobs fill both workers; the third waits
    CHECK(p.state(ids[2]) == JobState::queued);
    CHECK_THAT(waiting_reason(*p.coord, ids[2]), !Catch::Equals(""));
    REQUIRE(cancel_job(*p.coord, p.member, ids[2]));
    CHECK(p.state(ids[2]) == JobState::cancelled);

    const Principal& w = p.assigned(p.worker).empty() ? p.worker2 : p.worker;
    auto a = p.assigned(w)[0];
    REQUIRE(coordinator::start_attempt(*p.coord, w, a.attempt));
    REQUIRE(cancel_job(*p.coord, p.member, a.job));
    CHECK(p.state(a.job) == JobState::cancelled);
    auto hb = coordinator::heartbeat(*p.coord, w, {a.attempt});
    REQUIRE(hb);
    CHECK(hb->stop == std::vector<AttemptId>{a.attempt});
    CHECK_FALSE(coordinator::complete_attempt(*p.coord, w, a.attempt, 0, "")); // fenced
    CHECK(cancel_job(*p.coord, p.member, a.job).error().code == ErrorCode::conflict);
}

TEST_CASE("coordinator: cancelling a sweep cancels all of its unfinished jobs", "[coordinator]") {
    Pool p;
    auto ids = p.submit({job_spec("a"), job_spec("b"), job_spec("c")});
    auto sweep = read_job(*p.coord, p.member, ids[0]).value().sweep_id;
    auto n = cancel_sweep(*p.coord, p.member, sweep);
    REQUIRE(n);
    CHECK(*n == 3);
    for (auto id : ids) {
        CHECK(p.state(id) == JobState::cancelled);
    }
    CHECK(cancel_sweep(*p.coord, p.other_member, sweep).error().code == ErrorCode::not_found);
}

TEST_CASE("coordinator: max_parallel caps a sweep's running jobs", "[coordinator]") {
    Pool p;
    std::vector<recipe::JobSpec> specs;
    for (int i = 0; i < 6; ++i) {
        specs.push_back(job_spec("p" + std::to_string(i), 100));
    }
    auto ids = p.submit(specs, 2);
    p.coord->tick();
    CHECK(p.assigned(p.worker).size() + p.assigned(p.worker2).size() == 2);
    CHECK_THAT(waiting_reason(*p.coord, ids[5]), Catch::Contains("max_parallel"));
}

TEST_CASE("coordinator: a job bigger than every worker is rejected at submit", "[coordinator]") {
    Pool p;
    auto spec = job_spec("huge", 0);
    spec.resources.gpus = 1;
    spec.resources.gpu_memory_mib = 80 * 1024;
    auto res = coordinator::submit(*p.coord, p.member, {"t.toml", 0, {job_spec("fine"), spec}, std::nullopt});
    REQUIRE_FALSE(res);
    CHECK(res.error().field == "jobs[1].resources");
    CHECK_THAT(res.error().message, Catch::Contains("80GiB of GPU memory; the largest GPU has 24GiB"));
    CHECK(list_jobs(*p.coord, p.member, {}).value().jobs.empty()); // nothing of the sweep was stored
}

TEST_CASE("coordinator: what can never run follows the largest worker through registrations, bans and restarts",
          "[coordinator]") {
    Pool p;
    api::Inventory big;
    big.cpu_milli = 16'000;
    big.memory_mib = 65'536;
    big.gpus.push_back({0, "A100", 81'920, "", ""});
    auto enroll = create_token(*p.coord, p.admin, store::Role::enroll, "owners", "enroll").value();
    auto reg = coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(), "big", big);
    REQUIRE(reg);
    auto many_cpus = job_spec("many-cpus", 0);
    many_cpus.resources.cpu_milli = 12'000;
    auto big_gpu = job_spec("big-gpu", 0);
    big_gpu.resources.gpus = 1;
    big_gpu.resources.gpu_memory_mib = 40 * 1024;
    auto a100 = job_spec("a100-only", 0);
    a100.resources.gpus = 1;
    a100.resources.gpu_memory_mib = 8 * 1024;
    a100.resources.gpu_models = {"A100"};
    auto refusal = [&](const recipe::JobSpec& spec) -> std::string {
        auto res = coordinator::submit(*p.coord, p.member, {"t.toml", 0, {spec}, std::nullopt});
        return res ? std::string() : res.error().message;
    };
    CHECK(refusal(many_cpus).empty());
    CHECK(refusal(big_gpu).empty());
    CHECK(refusal(a100).empty());
    REQUIRE(set_worker_state(*p.coord, p.admin, reg->worker, store::WorkerState::banned));
    for (int round = 0; round < 2; ++round) { // then the same from the store, after a restart
        INFO("round " << round);
        CHECK_THAT(refusal(many_cpus), Catch::Contains("needs 12 CPUs; the largest worker has 8"));
        CHECK_THAT(refusal(big_gpu), Catch::Contains("of GPU memory; the largest GPU has 24GiB"));
        CHECK_THAT(refusal(a100), Catch::Contains("no worker has a GPU of the models it accepts"));
        p.restart();
    }
    // Back from the ban: it counts again.
    REQUIRE(set_worker_state(*p.coord, p.admin, reg->worker, store::WorkerState::active));
    CHECK(refusal(many_cpus).empty());
    CHECK(refusal(a100).empty());
}

TEST_CASE("coordinator: max_runtime is enforced by the coordinator too", "[coordinator]") {
    Pool p;
    auto spec = job_spec("slow", 1000);
    spec.resources.max_runtime_s = 60;
    auto ids = p.submit({spec});
    p.coord->tick();
    const Principal& w = p.assigned(p.worker).empty() ? p.worker2 : p.worker;
    auto a = p.assigned(w)[0];
    REQUIRE(coordinator::start_attempt(*p.coord, w, a.attempt));
    for (int i = 0; i < 12; ++i) { // keep the lease alive for 96 s
        p.clock.advance_ms(8'000);
        REQUIRE(coordinator::heartbeat(*p.coord, w, {a.attempt}));
        p.coord->tick();
    }
    auto job = read_job(*p.coord, p.member, ids[0]).value();
    CHECK(job.state == JobState::failed);
    CHECK_THAT(job.reason, Catch::Contains("max_runtime"));
    CHECK(coordinator::heartbeat(*p.coord, w, {a.attempt}).value().stop == std::vector<AttemptId>{a.attempt});
}

TEST_CASE("coordinator: roles and teams bound what a token can do", "[coordinator]") {
    Pool p;
    auto ids = p.submit({job_spec("mine")});
    // Another team's member cannot see, cancel or read the job.
    CHECK(read_job(*p.coord, p.other_member, ids[0]).error().code == ErrorCode::not_found);
    CHECK(cancel_job(*p.coord, p.other_member, ids[0]).error().code == ErrorCode::not_found);
    CHECK(coordinator::read_logs(*p.coord, p.other_member, ids[0], 0).error().code == ErrorCode::not_found);
    CHECK(list_jobs(*p.coord, p.other_member, {}).value().jobs.empty());
    JobQuery all_teams;
    all_teams.all_teams = true;
    CHECK(list_jobs(*p.coord, p.member, all_teams).error().code == ErrorCode::forbidden);
    CHECK(list_jobs(*p.coord, p.admin, all_teams).value().jobs.size() == 1);
    // Workers cannot submit or read jobs; members cannot act as workers or admins.
    CHECK(coordinator::submit(*p.coord, p.worker, {"x", 0, {job_spec("w")}, std::nullopt}).error().code ==
          ErrorCode::forbidden);
    CHECK(read_job(*p.coord, p.worker, ids[0]).error().code == ErrorCode::forbidden);
    CHECK(coordinator::heartbeat(*p.coord, p.member, {}).error().code == ErrorCode::forbidden);
    CHECK(create_team(*p.coord, p.member, "x", 1).error().code == ErrorCode::forbidden);
    CHECK(coordinator::register_worker(*p.coord, p.member, "x", inventory()).error().code == ErrorCode::forbidden);
    // Tokens: unknown and revoked are refused.
    CHECK(p.coord->authenticate("gpp_nope").error().code == ErrorCode::unauthorized);
    CHECK(p.coord->authenticate("").error().code == ErrorCode::unauthorized);
    auto tok = create_token(*p.coord, p.admin, store::Role::member, "fellows", "temp").value();
    REQUIRE(p.coord->authenticate(tok.secret));
    REQUIRE(revoke_token(*p.coord, p.admin, tok.id));
    CHECK(p.coord->authenticate(tok.secret).error().code == ErrorCode::unauthorized);
    // Only one first admin.
    CHECK(init_admin(*p.coord).error().code == ErrorCode::conflict);
}

TEST_CASE("coordinator: tokens are stored as hashes and survive a restart", "[coordinator]") {
    Pool p;
    auto tok = create_token(*p.coord, p.admin, store::Role::member, "fellows", "kept").value();
    p.restart();
    auto who = p.coord->authenticate(tok.secret);
    REQUIRE(who);
    CHECK(who->role == store::Role::member);
    auto snap = p.db->load().value();
    for (const auto& t : snap.tokens) {
        CHECK(t.hash.find(tok.secret) == std::string::npos);
        CHECK(t.hash.size() == 64);
    }
}

TEST_CASE("coordinator: a banned worker loses its attempts and its token", "[coordinator]") {
    Pool p;
    auto ids = p.submit({job_spec("a", 1000), job_spec("b", 1000)});
    p.coord->tick();
    REQUIRE(set_worker_state(*p.coord, p.admin, *p.worker.worker, store::WorkerState::banned));
    CHECK(coordinator::heartbeat(*p.coord, p.worker, {}).has_value()); // principal resolved before the ban
    auto token_check = list_workers(*p.coord, p.admin).value();
    CHECK(std::any_of(token_check.begin(), token_check.end(),
                      [](const auto& w) { return w.state == store::WorkerState::banned; }));
    std::int64_t queued_again = 0;
    for (auto id : ids) {
        queued_again += p.state(id) == JobState::queued ? 1 : 0;
    }
    CHECK(queued_again == 1);
}

TEST_CASE("coordinator: a high-priority job preempts low-priority work that has run long enough", "[coordinator]") {
    Pool p;
    auto low = job_spec("low", 1000);
    low.priority = recipe::Priority::low;
    low.resources.max_runtime_s = 7200;
    auto lows = p.submit({low, low});
    p.coord->tick();
    std::vector<std::pair<const Principal*, AttemptId>> running;
    for (const Principal* w : {&p.worker, &p.worker2}) {
        for (const auto& a : p.assigned(*w)) {
            REQUIRE(coordinator::start_attempt(*p.coord, *w, a.attempt));
            running.emplace_back(w, a.attempt);
        }
    }
    REQUIRE(running.size() == 2);
    // 20 minutes later (past the minimum runtime), heartbeats keeping the leases alive.
    for (int i = 0; i < 150; ++i) {
        p.clock.advance_ms(8'000);
        for (const auto& [w, a] : running) {
            REQUIRE(coordinator::heartbeat(*p.coord, *w, {a}));
        }
    }
    auto high = job_spec("urgent", 1000);
    high.priority = recipe::Priority::high;
    auto urgent = p.submit({high})[0];
    p.coord->tick();
    int preempted = 0;
    for (auto id : lows) {
        auto h = p.coord->job_book().attempts_of(id);
        if (h.back().state == AttemptState::preempted) {
            ++preempted;
            CHECK(p.state(id) == JobState::queued); // back in the queue
            CHECK_THAT(h.back().reason, Catch::Contains("preempted for higher-priority job"));
        }
    }
    CHECK(preempted == 1); // the smallest set of victims: one GPU's worth
    std::vector<AttemptId> stopped;
    for (const auto& [w, a] : running) {
        auto hb = coordinator::heartbeat(*p.coord, *w, {a}).value();
        stopped.insert(stopped.end(), hb.stop.begin(), hb.stop.end());
    }
    CHECK(stopped.size() == 1);
    p.coord->tick();
    CHECK(p.state(urgent) == JobState::assigned);
}

TEST_CASE("coordinator: the preemption cap counts a job's preemptions, not its lost attempts", "[coordinator]") {
    Pool p;
    // A high job holds one GPU for good (never a victim); the low job gets the other.
    auto keep = job_spec("keep", 1000);
    keep.priority = recipe::Priority::high;
    keep.resources.max_runtime_s = 7200;
    p.submit({keep});
    auto low = job_spec("low", 1000);
    low.priority = recipe::Priority::low;
    low.resources.max_runtime_s = 7200;
    low.retry.max_attempts = 3;
    const JobId victim = p.submit({low})[0];
    std::map<AttemptId, const Principal*> live; // every attempt running, on its worker
    auto start_new = [&] {
        p.coord->tick();
        for (const Principal* w : {&p.worker, &p.worker2}) {
            for (const auto& a : p.assigned(*w)) {
                REQUIRE(coordinator::start_attempt(*p.coord, *w, a.attempt));
                live[a.attempt] = w;
            }
        }
    };
    auto run_20_minutes = [&] {
        for (int i = 0; i < 150; ++i) {
            p.clock.advance_ms(8'000);
            for (const Principal* w : {&p.worker, &p.worker2}) {
                std::vector<AttemptId> mine;
                for (const auto& [a, on] : live) {
                    if (on == w) {
                        mine.push_back(a);
                    }
                }
                REQUIRE(coordinator::heartbeat(*p.coord, *w, mine));
            }
        }
    };
    auto victim_attempt = [&] { return p.coord->job_book().attempts_of(victim).back(); };
    start_new();
    REQUIRE(live.size() == 2);
    // The low job's first attempt is lost to a worker fault: it runs again, not yet preempted.
    const auto first = victim_attempt();
    REQUIRE(coordinator::complete_attempt(*p.coord, *live.at(first.id), first.id, std::nullopt, "disk full",
                                          Outcome::worker_fault));
    live.erase(first.id);
    start_new();
    REQUIRE(victim_attempt().state == AttemptState::running);
    run_20_minutes();
    // An urgent job: the low job's second attempt is the only victim, and a lost attempt does not
    // protect it.
    auto urgent = job_spec("urgent", 1000);
    urgent.priority = recipe::Priority::high;
    urgent.resources.max_runtime_s = 60;
    const JobId first_urgent = p.submit({urgent})[0];
    p.coord->tick();
    REQUIRE(victim_attempt().state == AttemptState::preempted);
    const Principal* on = live.at(victim_attempt().id);
    live.erase(victim_attempt().id);
    REQUIRE(coordinator::heartbeat(*p.coord, *on, {}));
    start_new(); // the urgent job takes the freed GPU
    REQUIRE(p.state(first_urgent) == JobState::running);
    for (auto it = live.begin(); it != live.end(); ++it) {
        if (p.coord->job_book().attempts_of(first_urgent).back().id == it->first) {
            REQUIRE(coordinator::complete_attempt(*p.coord, *it->second, it->first, 0, ""));
            live.erase(it);
            break;
        }
    }
    start_new(); // the low job runs a third time
    REQUIRE(victim_attempt().state == AttemptState::running);
    run_20_minutes();
    // Preempted once already: the next urgent job waits instead.
    const JobId second_urgent = p.submit({urgent})[0];
    p.coord->tick();
    CHECK(victim_attempt().state == AttemptState::running);
    CHECK(p.state(second_urgent) == JobState::queued);
}

TEST_CASE("coordinator: a GPU reported unhealthy takes no new work", "[coordinator]") {
    Pool p;
    REQUIRE(coordinator::heartbeat(*p.coord, p.worker, {}, {0}));
    REQUIRE(coordinator::heartbeat(*p.coord, p.worker2, {}));
    p.submit({job_spec("a", 500)});
    p.coord->tick();
    CHECK(p.assigned(p.worker).empty());
    CHECK(p.assigned(p.worker2).size() == 1);
}

TEST_CASE("coordinator: fair share favours the team that has used less", "[coordinator]") {
    Pool p;
    // "others" runs a whole GPU for an hour first.
    auto heavy = job_spec("heavy", 1000);
    heavy.resources.max_runtime_s = 7200;
    auto res = coordinator::submit(*p.coord, p.other_member, {"h.toml", 0, {heavy}, std::nullopt});
    REQUIRE(res);
    p.coord->tick();
    const Principal& w = p.assigned(p.worker).empty() ? p.worker2 : p.worker;
    auto a = p.assigned(w)[0];
    REQUIRE(coordinator::start_attempt(*p.coord, w, a.attempt));
    for (int i = 0; i < 450; ++i) {
        p.clock.advance_ms(8'000);
        REQUIRE(coordinator::heartbeat(
            *p.coord, p.worker, w.worker == p.worker.worker ? std::vector{a.attempt} : std::vector<AttemptId>{}));
        REQUIRE(coordinator::heartbeat(
            *p.coord, p.worker2, w.worker == p.worker2.worker ? std::vector{a.attempt} : std::vector<AttemptId>{}));
    }
    REQUIRE(coordinator::complete_attempt(*p.coord, w, a.attempt, 0, ""));
    // Both teams now queue one whole-GPU job; "others" submitted first, and only one GPU is free
    // after a second heavy job takes the other one.
    auto blocker = job_spec("blocker", 1000);
    blocker.resources.max_runtime_s = 7200;
    REQUIRE(coordinator::submit(*p.coord, p.member, {"b.toml", 0, {blocker}, std::nullopt}));
    p.coord->tick();
    auto theirs = coordinator::submit(*p.coord, p.other_member, {"o.toml", 0, {job_spec("theirs", 1000)}, std::nullopt})
                      .value()
                      .jobs[0];
    p.clock.advance_ms(1'000);
    auto ours = p.submit({job_spec("ours", 1000)})[0];
    p.coord->tick();
    // shares: others = 1 GPU-hour used, fellows = ~0 -> fellows go first despite submitting later
    CHECK(p.state(ours) == JobState::assigned);
    CHECK(p.state(theirs) == JobState::queued);
}

TEST_CASE("coordinator: a heartbeat's inventory replaces the registered one, and --slots caps jobs per worker",
          "[coordinator]") {
    Pool p;
    // Only box-1 is online; its owner restarts it with --slots 1 and a second GPU.
    p.clock.advance_ms(20'000); // box-2 has not been seen since registration
    api::Inventory inv = inventory(2);
    inv.slots = 1;
    auto hb = coordinator::heartbeat(*p.coord, p.worker, {}, {}, false, &inv);
    REQUIRE(hb);
    auto ids = p.submit({job_spec("a", 0), job_spec("b", 0), job_spec("c", 0)});
    p.coord->tick();
    CHECK(p.assigned(p.worker).size() == 1);
    CHECK_THAT(waiting_reason(*p.coord, ids[2]), Catch::Contains("as many jobs as their owners allow"));

    // Durable: a restarted coordinator still knows both GPUs and the cap.
    p.restart();
    REQUIRE(coordinator::heartbeat(*p.coord, p.worker, {}));
    auto workers = list_workers(*p.coord, p.admin).value();
    auto box1 = std::find_if(workers.begin(), workers.end(), [](const auto& w) { return w.name == "box-1"; });
    REQUIRE(box1 != workers.end());
    auto stored = nlohmann::json::parse(box1->inventory_json);
    CHECK(stored["slots"] == 1);
    CHECK(stored["gpus"].size() == 2);
    p.coord->tick();
    CHECK(p.assigned(p.worker).size() == 1);

    // Lifting the cap lets the other two run.
    inv.slots = 0;
    REQUIRE(coordinator::heartbeat(*p.coord, p.worker, {}, {}, false, &inv));
    p.coord->tick();
    CHECK(p.assigned(p.worker).size() == 3);
}

namespace {

api::Heartbeat beat_with(std::optional<api::OwnerTerms> terms,
                         api::SharingState sharing = api::SharingState::sharing,
                         std::optional<std::int64_t> changes_at = std::nullopt) {
    api::Heartbeat b;
    b.terms = std::move(terms);
    b.sharing = sharing;
    b.sharing_changes_at_ms = changes_at;
    return b;
}

} // namespace

TEST_CASE("coordinator: an owner's terms decide which jobs its worker gets, and a job none takes says why",
          "[coordinator]") {
    Pool p;
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker, beat_with(api::OwnerTerms{0, {"others"}, {}})));
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(api::OwnerTerms{0, {}, {"ghcr.io/"}})));
    const JobId fellows_job = p.submit({job_spec("f")})[0]; // team fellows, image busybox
    p.coord->tick();
    CHECK(p.state(fellows_job) == JobState::queued);
    CHECK(waiting_reason(*p.coord, fellows_job) ==
          "the owners of the 2 worker(s) that could run it do not take it: 1 take only other teams' jobs, 1 take no "
          "images from `docker.io/library/busybox:latest`'s registry");

    auto others =
        coordinator::submit(*p.coord, p.other_member, SubmitRequest{"o.toml", 0, {job_spec("o")}, std::nullopt});
    REQUIRE(others);
    p.coord->tick();
    REQUIRE(p.assigned(p.worker).size() == 1); // box-1 takes team others only
    CHECK(p.assigned(p.worker)[0].job == others->jobs[0]);
    CHECK(p.assigned(p.worker2).empty());
    CHECK_FALSE(p.coord->pool_view_drift().has_value());

    // The owner of box-2 drops its terms (a worker from before terms sends none): any job.
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(std::nullopt)));
    p.coord->tick();
    REQUIRE(p.assigned(p.worker2).size() == 1);
    CHECK(p.assigned(p.worker2)[0].job == fellows_job);
    CHECK_FALSE(p.coord->pool_view_drift().has_value());
}

TEST_CASE("coordinator: after a restart a worker offers nothing until its heartbeat says its owner's terms and state",
          "[coordinator]") {
    // The soak found it (simulated workers taking only their team's jobs, a coordinator killed): a
    // restarted coordinator knew the workers from the store but not their terms, and placed jobs the
    // owners had refused on them before their first heartbeat arrived.
    Pool p;
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker, beat_with(api::OwnerTerms{0, {"others"}, {}})));
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(std::nullopt, api::SharingState::paused)));
    p.restart();
    const JobId fellows_job = p.submit({job_spec("f")})[0];
    p.coord->tick();
    CHECK(p.state(fellows_job) == JobState::queued); // neither is heard yet: neither offers
    CHECK(p.assigned(p.worker).empty());
    CHECK(p.assigned(p.worker2).empty());
    CHECK_FALSE(p.coord->pool_view_drift().has_value());

    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker, beat_with(api::OwnerTerms{0, {"others"}, {}})));
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(std::nullopt, api::SharingState::paused)));
    p.coord->tick();
    CHECK(p.state(fellows_job) == JobState::queued); // heard: one takes other teams' jobs, one is paused
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(std::nullopt)));
    p.coord->tick();
    REQUIRE(p.assigned(p.worker2).size() == 1); // its owner resumed
    CHECK(p.assigned(p.worker2)[0].job == fellows_job);
    CHECK(p.assigned(p.worker).empty());
    CHECK_FALSE(p.coord->pool_view_drift().has_value());
}

TEST_CASE("coordinator: terms that name a team created later take its jobs once it exists", "[coordinator]") {
    Pool p;
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker, beat_with(api::OwnerTerms{0, {"late"}, {}})));
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(api::OwnerTerms{0, {"late"}, {}})));
    const JobId early = p.submit({job_spec("early")})[0];
    p.coord->tick();
    CHECK(p.state(early) == JobState::queued);
    REQUIRE(create_team(*p.coord, p.admin, "late", 1));
    REQUIRE(grant_credits(*p.coord, p.admin, "late", 1'000 * credits::k_micro_per_credit, std::nullopt, "test"));
    const Principal late =
        p.coord->authenticate(create_token(*p.coord, p.admin, store::Role::member, "late", "l").value().secret).value();
    auto res = coordinator::submit(*p.coord, late, SubmitRequest{"l.toml", 0, {job_spec("l")}, std::nullopt});
    REQUIRE(res);
    p.coord->tick();
    CHECK(p.state(res->jobs[0]) == JobState::assigned);
    CHECK(p.state(early) == JobState::queued);
    CHECK_FALSE(p.coord->pool_view_drift().has_value());
}

TEST_CASE("coordinator: workers not sharing take no work, and the queue says why and until when", "[coordinator]") {
    Pool p;
    const std::int64_t opens = p.clock.now_ms() + 3 * 3600 * 1000;
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker,
                                           beat_with(std::nullopt, api::SharingState::outside_window, opens)));
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2,
                                           beat_with(std::nullopt, api::SharingState::outside_window, opens + 60'000)));
    CHECK(p.coord->roster().presence(p.worker.worker.value(), p.coord->now_ms()) == "off-hours");
    const JobId id = p.submit({job_spec("a")})[0];
    p.coord->tick();
    CHECK(p.state(id) == JobState::queued);
    CHECK(waiting_reason(*p.coord, id) ==
          "no worker is taking work: 2 are outside their owners' sharing hours (the first shares again in 3h)");

    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker, beat_with(std::nullopt, api::SharingState::paused)));
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(std::nullopt, api::SharingState::reclaimed)));
    CHECK(p.coord->roster().presence(p.worker2.worker.value(), p.coord->now_ms()) == "reclaimed");
    p.coord->tick();
    CHECK(waiting_reason(*p.coord, id) ==
          "no worker is taking work: 1 is paused by its owner, 1 is in use by its owner");

    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(std::nullopt)));
    p.coord->tick();
    CHECK(p.assigned(p.worker2).size() == 1);
    CHECK_FALSE(p.coord->pool_view_drift().has_value());
}

TEST_CASE("coordinator: a GPU its owner reclaimed takes no new work, the worker's other GPUs do", "[coordinator]") {
    Pool p;
    api::Inventory two = inventory(2);
    api::Heartbeat b;
    b.inventory = two;
    b.reclaimed_gpus = {0};
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker, b));
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.worker2, beat_with(std::nullopt, api::SharingState::paused)));
    p.submit({job_spec("a", 1000), job_spec("b", 1000)});
    p.coord->tick();
    const auto got = p.assigned(p.worker);
    REQUIRE(got.size() == 1); // GPU 1 only
    CHECK(got[0].gpu_index == 1);
}

} // namespace test_coordinator
} // namespace
