// Coordinator::metrics() and the events it reports (metrics.hpp): a real coordinator on a SQLite
// file with a manual clock, driven through every way an attempt ends, restarted, and read back.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/metrics.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_metrics {

using namespace gpupool;
using namespace gpupool::coordinator;
using namespace gpupool::test::credit_pool;

namespace {

// Records what the coordinator reports (the fake beside CoordinatorEvents).
struct RecordedEvents final : CoordinatorEvents {
    int commits = 0;
    int failed_commits = 0;
    int passes = 0;
    std::size_t placed_in_passes = 0;
    std::size_t preempted_in_passes = 0;
    std::vector<std::pair<std::string, std::int64_t>> placed;
    std::vector<std::tuple<std::string, AttemptOutcome, std::int64_t>> ended;

    void store_committed(std::chrono::nanoseconds, bool ok) override { ++(ok ? commits : failed_commits); }
    void scheduling_pass(std::chrono::nanoseconds, std::size_t p, std::size_t pre) override {
        ++passes;
        placed_in_passes += p;
        preempted_in_passes += pre;
    }
    void attempt_placed(const std::string& team, std::int64_t queued_ms) override {
        placed.emplace_back(team, queued_ms);
    }
    void attempt_ended(const std::string& team, AttemptOutcome outcome, std::int64_t ran_ms) override {
        ended.emplace_back(team, outcome, ran_ms);
    }
};

std::int64_t count(const PoolMetrics& m, AttemptOutcome o) {
    return m.attempts[static_cast<std::size_t>(o)];
}

const PoolMetrics::Jobs* live(const PoolMetrics& m, const std::string& state) {
    auto it = std::find_if(m.live_jobs.begin(), m.live_jobs.end(), [&](const auto& j) { return j.state == state; });
    return it == m.live_jobs.end() ? nullptr : &*it;
}

} // namespace

TEST_CASE("metrics count every way an attempt ends, report each as it happens, and survive a restart",
          "[coordinator][metrics]") {
    CreditPool p;
    RecordedEvents events;
    p.coord->set_events(&events);
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const auto attempt_of = [&](JobId job) { return p.coord->job_book().attempts_of(job).back().id; };

    // Succeeded after 5 s, having waited 30 s in the queue.
    const JobId ok = p.submit(half_l4("ok"));
    p.clock.advance_ms(30'000);
    REQUIRE(p.place_and_start());
    p.clock.advance_ms(5'000);
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, attempt_of(ok), 0, ""));
    REQUIRE(events.placed.size() == 1);
    CHECK(events.placed[0] == std::pair<std::string, std::int64_t>{"fellows", 30'000});
    REQUIRE(events.ended.size() == 1);
    CHECK(events.ended[0] ==
          std::tuple<std::string, AttemptOutcome, std::int64_t>{"fellows", AttemptOutcome::succeeded, 5'000});

    // Failed, cancelled, the worker's fault, the owner's preemption.
    const JobId bad = p.submit(half_l4("bad"));
    REQUIRE(p.place_and_start());
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, attempt_of(bad), 3, ""));
    const JobId stop = p.submit(half_l4("stop"));
    REQUIRE(p.place_and_start());
    REQUIRE(cancel_job(*p.coord, p.fellow, stop));
    const JobId fault = p.submit(half_l4("fault"));
    REQUIRE(p.place_and_start());
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, attempt_of(fault), std::nullopt,
                                          "image pull failed", Outcome::worker_fault));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *p.place_and_start(), std::nullopt,
                                          "owner is gaming", Outcome::owner_preempted));
    // The fault and the owner's preemption re-queued their jobs; drain the queue with clean exits.
    while (auto a = p.place_and_start()) {
        REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *a, 0, ""));
    }

    // Lost: the worker stops renewing the lease.
    const JobId gone = p.submit(half_l4("gone"));
    REQUIRE(p.place_and_start());
    p.clock.advance_ms(p.options.lease_ms + 1);
    p.coord->tick();
    CHECK(p.coord->job_book().attempts_of(gone).back().state == store::AttemptState::lost);
    while (auto a = p.place_and_start()) {
        REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *a, 0, ""));
    }

    // Preempted by the scheduler: a high-priority job after low-priority work ran 20 minutes.
    auto low = half_l4("low", 7200);
    low.priority = recipe::Priority::low;
    low.resources.gpu_milli = 1000;
    const JobId lowly = p.submit(low);
    const auto low_attempt = p.place_and_start();
    REQUIRE(low_attempt);
    for (int i = 0; i < 150; ++i) {
        p.clock.advance_ms(8'000);
        REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*low_attempt}));
    }
    auto high = half_l4("urgent");
    high.priority = recipe::Priority::high;
    high.resources.gpu_milli = 1000;
    p.submit(high);
    p.coord->tick();
    CHECK(p.coord->job_book().attempts_of(lowly).back().state == store::AttemptState::preempted);
    CHECK(events.preempted_in_passes == 1);

    // Banned: its running attempt is lost to the ban.
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    for (const auto& a : coordinator::assignments(*p.coord, p.owner_worker).value()) {
        REQUIRE(coordinator::start_attempt(*p.coord, p.owner_worker, a.attempt));
    }
    REQUIRE(ban_worker(*p.coord, p.admin, *p.owner_worker.worker, std::nullopt));

    const PoolMetrics m = p.coord->metrics();
    CHECK(count(m, AttemptOutcome::succeeded) >= 3);
    CHECK(count(m, AttemptOutcome::failed) == 1);
    CHECK(count(m, AttemptOutcome::cancelled) == 1);
    CHECK(count(m, AttemptOutcome::worker_fault) == 1);
    CHECK(count(m, AttemptOutcome::preempted_owner) == 1);
    CHECK(count(m, AttemptOutcome::lost) == 1);
    CHECK(count(m, AttemptOutcome::preempted_scheduler) == 1);
    CHECK(count(m, AttemptOutcome::banned) == 1);
    // GPU time by outcome: the preempted job held a whole GPU for 20 minutes, all of it lost work;
    // the first success held half a GPU for 5 s.
    const auto gpu_s = [&](const PoolMetrics& pm, AttemptOutcome o) {
        return pm.attempt_gpu_seconds[static_cast<std::size_t>(o)];
    };
    CHECK(gpu_s(m, AttemptOutcome::preempted_scheduler) == Approx(1'200.0));
    CHECK(gpu_s(m, AttemptOutcome::succeeded) >= Approx(2.5));
    CHECK(gpu_s(m, AttemptOutcome::cancelled) == Approx(0.0));
    // Every ended attempt was reported once, as what it is counted as.
    std::int64_t total = 0;
    for (auto n : m.attempts) {
        total += n;
    }
    CHECK(static_cast<std::int64_t>(events.ended.size()) == total);
    CHECK(events.placed.size() == events.placed_in_passes);
    CHECK(events.passes > 0);
    CHECK(events.commits > 0);
    CHECK(events.failed_commits == 0);

    // The counts come back from the store's rows after a restart.
    p.coord->set_events(nullptr);
    REQUIRE(p.restart());
    const PoolMetrics again = p.coord->metrics();
    CHECK(again.attempts == m.attempts);
    for (std::size_t i = 0; i < k_attempt_outcomes; ++i) {
        CHECK(again.attempt_gpu_seconds[i] == Approx(m.attempt_gpu_seconds[i]));
    }
    std::map<std::string, std::int64_t> ended_before;
    std::map<std::string, std::int64_t> ended_after;
    for (const auto& j : m.ended_jobs) {
        ended_before[j.state + "/" + j.team] = j.count;
    }
    for (const auto& j : again.ended_jobs) {
        ended_after[j.state + "/" + j.team] = j.count;
    }
    CHECK(ended_before == ended_after);
    CHECK(ended_after["cancelled/fellows"] == 1);
    CHECK(ended_after["failed/fellows"] == 1);
}

TEST_CASE("metrics show live jobs, workers, GPU memory given out and in use, and credits that match the report",
          "[coordinator][metrics]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, ""));
    const JobId a = p.submit(half_l4("a"));
    const JobId b = p.submit(half_l4("b"));
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    for (const auto& as : coordinator::assignments(*p.coord, p.owner_worker).value()) {
        REQUIRE(coordinator::start_attempt(*p.coord, p.owner_worker, as.attempt));
    }
    auto c = half_l4("c");
    c.priority = recipe::Priority::high;
    c.resources.gpu_milli = 1000;
    p.submit(c);
    p.coord->tick();
    api::Heartbeat beat;
    beat.running = {p.coord->job_book().attempts_of(a).back().id, p.coord->job_book().attempts_of(b).back().id};
    beat.gpu_memory_used_mib = {9000};
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.owner_worker, beat));

    PoolMetrics m = p.coord->metrics();
    // The high-priority whole-GPU job does not fit beside the two halves (too young to preempt): it waits.
    const auto* running = live(m, "running");
    REQUIRE(running != nullptr);
    CHECK(running->count == 2);
    CHECK(running->team == "fellows");
    CHECK(running->priority == "normal");
    const auto* queued = live(m, "queued");
    REQUIRE(queued != nullptr);
    CHECK(queued->count == 1);
    CHECK(queued->priority == "high");
    CHECK(m.oldest_queued_s.at("fellows") == 0.0);
    REQUIRE(m.workers.size() == 1);
    CHECK(m.workers[0].gpu_model == "NVIDIA L4");
    CHECK(m.workers[0].state == "online");
    REQUIRE(m.memory.size() == 1);
    CHECK(m.memory[0].offered_mib == 24576);
    CHECK(m.memory[0].allocated_mib == 24576);
    CHECK(m.memory[0].used_mib == 9000);
    CHECK(m.memory[0].gpus_reporting_use == 1);
    CHECK(m.memory[0].busy_gpus == 1);
    CHECK(m.memory[0].gpu_attempts == 2);
    REQUIRE(m.heartbeats.size() == 1);
    CHECK(m.heartbeats[0].name == "l4-box");
    CHECK(m.heartbeats[0].age_s == 0.0);

    // A memory list that does not line up with the worker's GPUs is dropped, not misread.
    beat.gpu_memory_used_mib = {9000, 100};
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.owner_worker, beat));
    m = p.coord->metrics();
    CHECK(m.memory[0].used_mib == 0);
    CHECK(m.memory[0].gpus_reporting_use == 0);

    // An hour on, both halves end; the worker, silent since, is offline and offers nothing.
    p.clock.advance_ms(9'000);
    REQUIRE(coordinator::receive_heartbeat(*p.coord, p.owner_worker, beat));
    REQUIRE(
        coordinator::complete_attempt(*p.coord, p.owner_worker, p.coord->job_book().attempts_of(a).back().id, 0, ""));
    REQUIRE(
        coordinator::complete_attempt(*p.coord, p.owner_worker, p.coord->job_book().attempts_of(b).back().id, 0, ""));
    p.clock.advance_ms(p.options.worker_timeout_ms + 5'000);
    m = p.coord->metrics();
    REQUIRE(m.workers.size() == 1);
    CHECK(m.workers[0].state == "offline");
    CHECK(m.memory.empty());
    REQUIRE(m.heartbeats.size() == 1);
    CHECK(m.heartbeats[0].age_s == Approx(static_cast<double>(p.options.worker_timeout_ms + 5'000) / 1000.0));
    REQUIRE(m.gpus.size() == 1);
    CHECK(m.gpus[0].state == "offline");
    // The whole-GPU job still waits (nothing ticked since): its wait grows with the clock.
    CHECK(m.oldest_queued_s.at("fellows") ==
          Approx(static_cast<double>(9'000 + p.options.worker_timeout_ms + 5'000) / 1000.0));

    // Credits: the same totals as the pool report, and books that balance.
    const Report report = pool_report(*p.coord, p.admin, 0).value();
    REQUIRE(m.credits.size() == 2);
    for (const auto& team : report.teams) {
        auto it =
            std::find_if(m.credits.begin(), m.credits.end(), [&](const auto& c2) { return c2.team == team.name; });
        REQUIRE(it != m.credits.end());
        CHECK(it->totals.granted == team.granted_micro);
        CHECK(it->totals.earned == team.earned_micro);
        CHECK(it->totals.spent == team.spent_micro);
        CHECK(it->balance == team.balance_micro);
    }
    const auto fellows =
        std::find_if(m.credits.begin(), m.credits.end(), [](const auto& c2) { return c2.team == "fellows"; });
    CHECK(fellows->totals.granted == 100 * k_credit);
    CHECK(fellows->totals.spent > 0);
    CHECK(m.ledger_total == 0);
    CHECK(m.escrow_unaccounted == 0);
}

TEST_CASE("attempt outcomes are read from the coordinator's own reasons", "[coordinator][metrics]") {
    store::AttemptRecord a;
    a.state = store::AttemptState::running;
    CHECK_FALSE(outcome_of(a));
    a.state = store::AttemptState::lost;
    a.reason = "lease expired: worker stopped renewing";
    CHECK(outcome_of(a) == AttemptOutcome::lost);
    a.reason = "worker fault: no such image";
    CHECK(outcome_of(a) == AttemptOutcome::worker_fault);
    a.reason = "worker banned";
    CHECK(outcome_of(a) == AttemptOutcome::banned);
    a.state = store::AttemptState::preempted;
    a.reason = "preempted by the GPU's owner";
    CHECK(outcome_of(a) == AttemptOutcome::preempted_owner);
    a.reason = "preempted for higher-priority job 7";
    CHECK(outcome_of(a) == AttemptOutcome::preempted_scheduler);
    for (std::size_t i = 0; i < k_attempt_outcomes; ++i) {
        CHECK(std::string(to_string(static_cast<AttemptOutcome>(i))) != "unknown");
    }
}

} // namespace test_metrics
} // namespace
