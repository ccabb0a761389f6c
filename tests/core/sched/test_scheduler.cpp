#include "core/sched/scheduler.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

#include <map>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_scheduler {

using namespace gpupool::sched;
using namespace gpupool::sched::test;

TEST_CASE("a job bigger than every worker is infeasible, with the reason") {
    ClusterView v;
    v.workers = {worker(1, {1000, 1000}), worker(2, {1000})};
    Decisions d = schedule(v, {whole_job(1, 4)}, Policy{}, 0);
    REQUIRE(d.waiting.size() == 1);
    CHECK(d.waiting[0].outcome == PlaceOutcome::infeasible);
    CHECK(d.waiting[0].reason == "no worker has 4 GPU(s) (most on one worker: 2)");

    Decisions cpu = schedule(v, {share_job(2, 100, 64000)}, Policy{}, 0);
    CHECK(cpu.waiting[0].outcome == PlaceOutcome::infeasible);
    CHECK(cpu.waiting[0].reason == "no worker has 64 CPUs (largest: 32 CPUs)");

    JobRequest big = share_job(3, 0);
    big.gpu_memory_mib = 80 * 1024;
    Decisions mem = schedule(v, {big}, Policy{}, 0);
    CHECK(mem.waiting[0].outcome == PlaceOutcome::infeasible);
    CHECK(mem.waiting[0].reason == "no GPU has 80GiB of memory (largest: 16GiB)");
}

TEST_CASE("a job that fits a worker's total but not now stays queued, with the reason") {
    ClusterView v;
    // a 48 GiB GPU with half of it in use: 24 GiB free
    v.workers = {worker(1, {500}, 32000, 131072, 0, 48 * 1024)};
    JobRequest j = share_job(1, 0);
    j.gpu_memory_mib = 40 * 1024;
    Decisions d = schedule(v, {j}, Policy{}, 0);
    REQUIRE(d.waiting.size() == 1);
    CHECK(d.waiting[0].outcome == PlaceOutcome::not_now);
    CHECK(d.waiting[0].reason == "no worker has 40GiB of free GPU memory (largest free: 24GiB)");

    ClusterView busy;
    busy.workers = {worker(1, {1000}, 2000)};
    Decisions c = schedule(busy, {share_job(2, 500, 4000)}, Policy{}, 0);
    CHECK(c.waiting[0].outcome == PlaceOutcome::not_now);
    CHECK(c.waiting[0].reason == "no worker with the GPU free also has 4 CPUs free (largest free: 2 CPUs)");

    ClusterView draining;
    draining.workers = {worker(1, {1000})};
    draining.workers[0].draining = true;
    Decisions dr = schedule(draining, {share_job(3, 500)}, Policy{}, 0);
    CHECK(dr.waiting[0].outcome == PlaceOutcome::not_now);
    CHECK_THAT(dr.waiting[0].reason, Catch::Contains("no worker is available"));
}

TEST_CASE("placements within one call see each other") {
    ClusterView v;
    v.workers = {worker(1, {1000})};
    Decisions d = schedule(v, {share_job(1, 600), share_job(2, 600), share_job(3, 400)}, Policy{}, 0);
    REQUIRE(d.placements.size() == 2);
    CHECK(d.placements[0].job == JobId(1));
    CHECK(d.placements[1].job == JobId(3));
    REQUIRE(d.waiting.size() == 1);
    CHECK(d.waiting[0].job == JobId(2));
    CHECK_THAT(d.waiting[0].reason, Catch::Contains("largest free share: 0"));
}

TEST_CASE("the same view, jobs and seed give the same decisions") {
    ClusterView v;
    for (int i = 0; i < 20; ++i) {
        v.workers.push_back(worker(i + 1, {1000, 1000, 1000, 1000}));
    }
    std::vector<JobRequest> pending;
    for (int i = 0; i < 30; ++i) {
        pending.push_back(share_job(i + 1, 100 + 37 * i % 900));
    }
    Policy p;
    p.placement.scorer = ScorerKind::random;
    p.seed = 42;
    auto key = [](const Decisions& d) {
        std::vector<std::pair<std::int64_t, std::int64_t>> k;
        for (const auto& pl : d.placements) {
            k.emplace_back(pl.job.value(), pl.worker.value() * 100 + pl.gpus.at(0));
        }
        return k;
    };
    const auto first = key(schedule(v, pending, p, 1000));
    CHECK(first == key(schedule(v, pending, p, 1000)));
    p.seed = 43;
    CHECK(first != key(schedule(v, pending, p, 1000)));
}

TEST_CASE("property: random clusters and requests never over-allocate") {
    Rng rng(7);
    for (int round = 0; round < 40; ++round) {
        ClusterView v;
        const auto n_workers = 1 + rng.uniform(6);
        for (std::uint64_t w = 0; w < n_workers; ++w) {
            Worker wk = worker(static_cast<std::int64_t>(w + 1), {});
            const auto gpus = rng.uniform(5);
            for (std::uint64_t g = 0; g < gpus; ++g) {
                wk.gpus.push_back(Gpu{0, 16384, static_cast<std::int64_t>(rng.uniform(1001))});
            }
            wk.cpu_milli_free = static_cast<std::int64_t>(rng.uniform(32001));
            wk.memory_mib_free = static_cast<std::int64_t>(rng.uniform(131073));
            v.workers.push_back(wk);
        }
        std::vector<JobRequest> pending;
        const auto n_jobs = rng.uniform(30);
        for (std::uint64_t j = 0; j < n_jobs; ++j) {
            const auto kind = rng.uniform(4);
            const auto id = static_cast<std::int64_t>(j + 1);
            const auto cpu = static_cast<std::int64_t>(rng.uniform(8000));
            JobRequest r = kind == 0   ? cpu_job(id, cpu)
                           : kind == 1 ? whole_job(id, 1 + static_cast<std::int64_t>(rng.uniform(3)), cpu)
                                       : share_job(id, 1 + static_cast<std::int64_t>(rng.uniform(1000)), cpu);
            if (kind == 3) {
                r.gpu_milli = 0;
                r.gpu_memory_mib = 1 + static_cast<std::int64_t>(rng.uniform(16384));
            }
            r.team = TeamId(1 + static_cast<std::int64_t>(rng.uniform(3)));
            pending.push_back(r);
        }
        for (auto scorer : {ScorerKind::fgd, ScorerKind::bestfit, ScorerKind::packing, ScorerKind::random}) {
            Policy p;
            p.placement.scorer = scorer;
            p.placement.workload = typical_workload(pending);
            p.seed = static_cast<std::uint64_t>(round);
            Decisions d = schedule(v, pending, p, 0);
            CHECK(d.placements.size() + d.waiting.size() == pending.size());
            std::map<std::int64_t, Worker> after;
            for (const auto& w : v.workers) {
                after[w.id.value()] = w;
            }
            for (const auto& pl : d.placements) {
                Worker& w = after.at(pl.worker.value());
                w.cpu_milli_free -= pl.cpu_milli;
                w.memory_mib_free -= pl.memory_mib;
                for (auto g : pl.gpus) {
                    w.gpus.at(g).milli_free -= pl.gpu_milli;
                }
            }
            for (const auto& [id, w] : after) {
                CHECK(w.cpu_milli_free >= 0);
                CHECK(w.memory_mib_free >= 0);
                for (const auto& g : w.gpus) {
                    CHECK(g.milli_free >= 0);
                    CHECK(g.milli_free <= k_milli_per_gpu);
                }
            }
        }
    }
}

TEST_CASE("a worker's job slots cap how many jobs it runs, within one call too") {
    ClusterView v;
    v.workers = {worker(1, {1000}), worker(2, {1000})};
    v.workers[0].slots_free = 1; // its owner runs `gpupool worker --slots 1`
    v.workers[1].slots_free = 0; // already full
    Decisions d = schedule(v, {cpu_job(1, 100), cpu_job(2, 100), cpu_job(3, 100)}, Policy{}, 0);
    REQUIRE(d.placements.size() == 1);
    CHECK(d.placements[0].worker == WorkerId(1));
    REQUIRE(d.waiting.size() == 2);
    CHECK(d.waiting[0].outcome == PlaceOutcome::not_now);
    CHECK(d.waiting[0].reason ==
          "the 2 worker(s) that could run it already run as many jobs as their owners allow (--slots)");

    // No cap: all three fit on either worker.
    v.workers[0].slots_free.reset();
    v.workers[1].slots_free.reset();
    CHECK(schedule(v, {cpu_job(1, 100), cpu_job(2, 100), cpu_job(3, 100)}, Policy{}, 0).placements.size() == 3);
}

TEST_CASE("a job goes only where the owners' terms allow it, and waits with their reasons when none does") {
    ClusterView v;
    v.workers = {worker(1, {1000}), worker(2, {1000}), worker(3, {1000})};
    v.workers[0].terms = WorkerTerms{0, std::vector<TeamId>{TeamId(9)}, {}};
    v.workers[1].terms = WorkerTerms{0, std::nullopt, {"ghcr.io/"}};
    v.workers[2].terms = WorkerTerms{600, std::nullopt, {}};
    JobRequest j = share_job(1, 500);
    j.qualified_image = "docker.io/library/python:3.12";
    j.max_runtime_s = 3600;
    Decisions d = schedule(v, {j}, Policy{}, 0);
    REQUIRE(d.placements.empty());
    REQUIRE(d.waiting.size() == 1);
    CHECK(d.waiting[0].outcome == PlaceOutcome::not_now); // owners change their terms: never rejected
    CHECK(d.waiting[0].reason ==
          "the owners of the 3 worker(s) that could run it do not take it: 1 take only other teams' jobs, 1 take no "
          "images from `docker.io/library/python:3.12`'s registry, 1 take no job that may run for 1h");

    j.max_runtime_s = 600; // now worker 3's owner takes it, and only that worker may run it
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
        Policy p;
        p.seed = seed;
        Decisions ok = schedule(v, {j}, p, 0);
        REQUIRE(ok.placements.size() == 1);
        CHECK(ok.placements[0].worker == WorkerId(3));
    }
}

TEST_CASE("a GPU job that fits nowhere holds the worker nearest to fitting it", "[sched][reservation]") {
    ClusterView v;
    v.workers = {worker(1, {1000, 1000, 1000, 0}), worker(2, {1000, 1000, 0, 0})};
    // team 1 has used nothing, so its 4-GPU job comes first; team 2's 1-GPU jobs follow
    v.teams = {TeamShare{TeamId(1), 1.0, 0.0}, TeamShare{TeamId(2), 1.0, 1e6}};
    JobRequest big = whole_job(1, 4);
    std::vector<JobRequest> pending{big};
    for (std::int64_t i = 0; i < 3; ++i) {
        JobRequest small = whole_job(10 + i, 1);
        small.team = TeamId(2);
        small.submitted_at = i;
        pending.push_back(small);
    }
    Policy p;
    p.placement.scorer = ScorerKind::bestfit;
    CHECK(p.reservations == 3); // the default
    Decisions d = schedule(v, pending, p, 100);
    // worker 1 (3 GPUs free of 4) is held for the big job: the small ones get worker 2's two
    REQUIRE(d.placements.size() == 2);
    for (const auto& placed : d.placements) {
        CHECK(placed.worker == WorkerId(2));
    }
    // without reservations the third small job takes a GPU the big job waits for
    p.reservations = 0;
    Decisions before = schedule(v, pending, p, 100);
    CHECK(before.placements.size() == 3);
}

} // namespace test_scheduler
} // namespace
