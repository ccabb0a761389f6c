// Large pools: placement scores a sample of the workers (placement.hpp, Sampling), and a pass can
// decide on the caller's own workers instead of a copy (scheduler.hpp, schedule_in_place).
#include "core/sched/scheduler.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_large_pools {

using namespace gpupool;
using namespace gpupool::sched;
using namespace gpupool::sched::test;

namespace {

std::vector<Worker> pool(std::size_t n) {
    std::vector<Worker> out;
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(worker(static_cast<std::int64_t>(i + 1), {1000}));
    }
    return out;
}

// The indices of the workers placement asked the owners about, in the order asked: every worker
// that passed the other filters, so the ones scored when all of them fit.
struct Asked {
    std::vector<std::size_t> order;
    OwnerPolicy policy() {
        return [this](const Worker& w, const JobRequest&) {
            order.push_back(static_cast<std::size_t>(w.id.value() - 1));
            return true;
        };
    }
};

} // namespace

TEST_CASE("a large pool scores each job on a run of workers from a random place, a small one on all", "[sched]") {
    const std::size_t n = 3000;
    const auto workers = pool(n);
    ModelCatalog models;
    Asked asked;
    PlacementPolicy policy;
    policy.sampling = {2048, 100};
    policy.owner_allows = asked.policy();
    std::set<std::size_t> starts;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        asked.order.clear();
        Rng rng(seed);
        const Placement p = place(workers, models, cpu_job(1, 1000), policy, rng);
        REQUIRE(p.outcome == PlaceOutcome::placed);
        REQUIRE(asked.order.size() == 100);
        for (std::size_t k = 1; k < asked.order.size(); ++k) {
            CHECK(asked.order[k] == (asked.order[k - 1] + 1) % n); // consecutive, wrapping around
        }
        CHECK(std::find(asked.order.begin(), asked.order.end(), p.worker) != asked.order.end());
        starts.insert(asked.order.front());
    }
    CHECK(starts.size() >= 15); // a new place each time

    // At the threshold, and with sampling off, every worker is scored.
    for (const Sampling s : {Sampling{3000, 100}, Sampling{2048, 0}}) {
        asked.order.clear();
        policy.sampling = s;
        Rng rng(7);
        REQUIRE(place(workers, models, cpu_job(1, 1000), policy, rng).outcome == PlaceOutcome::placed);
        CHECK(asked.order.size() == n);
        CHECK(asked.order.front() == 0);
    }
}

TEST_CASE("a sampled placement goes on past workers that do not fit, to one that alone does", "[sched]") {
    auto workers = pool(3000);
    for (auto& w : workers) {
        w.gpus[0].milli_free = 0;
    }
    workers[2500].gpus[0].milli_free = 600; // the only GPU with room
    ModelCatalog models;
    PlacementPolicy policy;
    policy.sampling = {2048, 10};
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        Rng rng(seed);
        const Placement p = place(workers, models, share_job(1, 500), policy, rng);
        REQUIRE(p.outcome == PlaceOutcome::placed);
        CHECK(p.worker == 2500);
    }
    Rng rng(1);
    const Placement none = place(workers, models, share_job(2, 700), policy, rng);
    CHECK(none.outcome == PlaceOutcome::not_now);
    CHECK(none.reason == "no worker has 0.7 of a GPU free (largest free share: 0.6)");
}

TEST_CASE("a sampled placement takes the best score among the workers it scored", "[sched]") {
    // Bestfit prefers the least CPU left: the free CPUs differ from worker to worker.
    auto workers = pool(2500);
    for (std::size_t i = 0; i < workers.size(); ++i) {
        workers[i].cpu_milli_free = 2000 + static_cast<std::int64_t>((i * 7919) % 2500) * 12;
    }
    ModelCatalog models;
    Asked asked;
    PlacementPolicy policy;
    policy.scorer = ScorerKind::bestfit;
    policy.weights = {0, 0, 0};
    policy.sampling = {2048, 10};
    policy.owner_allows = asked.policy();
    const ScoreScale scale = scale_of(workers);
    const JobRequest job = cpu_job(1, 1000);
    const auto points = [&](std::size_t i) { return bestfit_points(workers[i], job, scale); };
    std::int64_t global_best = 0;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        global_best = std::max(global_best, points(i));
    }
    std::size_t below_global_best = 0;
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        asked.order.clear();
        Rng rng(seed);
        const Placement p = place(workers, models, job, policy, rng);
        REQUIRE(p.outcome == PlaceOutcome::placed);
        REQUIRE(asked.order.size() == 10);
        std::int64_t best = 0;
        for (auto i : asked.order) {
            best = std::max(best, points(i));
        }
        CHECK(points(p.worker) == best);
        below_global_best += best < global_best ? 1 : 0;
    }
    CHECK(below_global_best > 0); // it did not look at every worker
}

namespace {

// A random pool with attempts running (some stopping for a preemptor) and a queue that places,
// preempts, reserves workers for multi-GPU jobs and waits.
struct Scenario {
    ClusterView view;
    std::vector<JobRequest> queued;
};

Scenario scenario(std::uint64_t seed) {
    Rng rng(seed);
    Scenario s;
    const std::size_t workers = 3 + rng.uniform(12);
    std::int64_t attempt = 1;
    for (std::size_t i = 0; i < workers; ++i) {
        Worker w = worker(static_cast<std::int64_t>(i + 1), {});
        const std::size_t gpus = 1 + rng.uniform(4);
        for (std::size_t g = 0; g < gpus; ++g) {
            const std::int64_t used = static_cast<std::int64_t>(rng.uniform(5)) * 250;
            w.gpus.push_back(Gpu{0, 16384, k_milli_per_gpu - used});
            if (used > 0) {
                RunningJob r;
                r.job = JobId(1000 + attempt);
                r.attempt = AttemptId(attempt++);
                r.team = TeamId(1 + static_cast<std::int64_t>(rng.uniform(3)));
                r.priority = rng.uniform(2) == 0 ? Priority::low : Priority::normal;
                r.worker = w.id;
                r.gpu_indices = {static_cast<std::uint32_t>(g)};
                r.gpu_milli = used;
                r.cpu_milli = 1000;
                r.memory_mib = 1024;
                r.stopping = rng.uniform(8) == 0;
                r.preempted_for = JobId(1 + static_cast<std::int64_t>(rng.uniform(20)));
                w.cpu_milli_free -= 1000;
                w.memory_mib_free -= 1024;
                s.view.running.push_back(r);
            }
        }
        if (rng.uniform(4) == 0) {
            w.slots_free = static_cast<std::int64_t>(rng.uniform(3));
        }
        w.draining = rng.uniform(10) == 0;
        s.view.workers.push_back(std::move(w));
    }
    for (std::int64_t j = 1; j <= 20; ++j) {
        JobRequest r = rng.uniform(3) == 0 ? whole_job(j, 1 + static_cast<std::int64_t>(rng.uniform(3)))
                                           : share_job(j, 250 * (1 + static_cast<std::int64_t>(rng.uniform(4))));
        r.team = TeamId(1 + static_cast<std::int64_t>(rng.uniform(3)));
        r.priority = rng.uniform(4) == 0 ? Priority::high : Priority::normal;
        r.submitted_at = j;
        s.queued.push_back(r);
    }
    return s;
}

} // namespace

TEST_CASE("a pass on the caller's own workers decides as one on a copy and gives them back as they were", "[sched]") {
    Policy policy;
    policy.preemption.min_runtime_s = 0;
    std::size_t placed = 0;
    std::size_t preempted = 0;
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        Scenario s = scenario(seed);
        const std::vector<Worker> before = s.view.workers;
        const Decisions copy = schedule(s.view, s.queued, Admission{}, policy, 5000);
        const Decisions own = schedule_in_place(s.view, s.queued, Admission{}, policy, 5000);
        INFO("seed " << seed);
        REQUIRE(own.placements.size() == copy.placements.size());
        for (std::size_t i = 0; i < own.placements.size(); ++i) {
            CHECK(own.placements[i].job == copy.placements[i].job);
            CHECK(own.placements[i].worker == copy.placements[i].worker);
            CHECK(own.placements[i].gpus == copy.placements[i].gpus);
            CHECK(own.placements[i].gpu_milli == copy.placements[i].gpu_milli);
        }
        REQUIRE(own.preemptions.size() == copy.preemptions.size());
        for (std::size_t i = 0; i < own.preemptions.size(); ++i) {
            CHECK(own.preemptions[i].attempt == copy.preemptions[i].attempt);
            CHECK(own.preemptions[i].for_job == copy.preemptions[i].for_job);
        }
        REQUIRE(own.waiting.size() == copy.waiting.size());
        for (std::size_t i = 0; i < own.waiting.size(); ++i) {
            CHECK(own.waiting[i].job == copy.waiting[i].job);
            CHECK(own.waiting[i].reason == copy.waiting[i].reason);
        }
        CHECK(s.view.workers == before);
        placed += own.placements.size();
        preempted += own.preemptions.size();
    }
    // The scenarios exercised what changes workers during a pass.
    CHECK(placed > 300);
    CHECK(preempted > 10);
}

} // namespace test_large_pools
} // namespace
