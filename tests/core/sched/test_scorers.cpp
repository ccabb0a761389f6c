#include "core/sched/placement.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

#include <set>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_scorers {

using namespace gpupool::sched;
using namespace gpupool::sched::test;

namespace {

Workload half_and_whole() {
    Workload w;
    w.types = {WorkloadType{1000, 1, 500, 0, 1}, WorkloadType{1000, 1, 1000, 0, 1}};
    w.total_count = 2;
    return w;
}

PlacementPolicy policy_of(ScorerKind kind) {
    PlacementPolicy p;
    p.scorer = kind;
    p.workload = half_and_whole();
    p.weights = ScoreWeights{0.0, 0.0, 0.0};
    return p;
}

std::size_t place_index(const std::vector<Worker>& ws, const JobRequest& j, const PlacementPolicy& p,
                        std::uint64_t seed = 1) {
    Rng rng(seed);
    ModelCatalog models;
    Placement pl = place(ws, models, j, p, rng);
    REQUIRE(pl.outcome == PlaceOutcome::placed);
    return pl.worker;
}

} // namespace

TEST_CASE("bestfit prefers the worker left with the least CPU and GPU") {
    // scale: 32 CPUs, 4 GPUs (largest worker)
    std::vector<Worker> ws{worker(1, {1000, 1000}, 8000), worker(2, {1000, 1000, 1000, 1000}, 30000)};
    JobRequest j = share_job(1, 500, 2000);
    const ScoreScale scale = scale_of(ws);
    // left-over: a = .5 x 6/32 + .5 x 1.5/4 = .28 -> 71 points; b = .5 x 28/32 + .5 x 3.5/4 = .875 -> 12
    CHECK(bestfit_points(ws[0], j, scale) == 71);
    CHECK(bestfit_points(ws[1], j, scale) == 12);
    CHECK(place_index(ws, j, policy_of(ScorerKind::bestfit)) == 0);
}

TEST_CASE("bestfit puts a share on the tightest GPU of the worker") {
    Worker w = worker(1, {1000, 700, 400});
    Rng rng(1);
    auto c = choose_on_worker(w, share_job(1, 300), ScorerKind::bestfit, {}, scale_of({w}), rng);
    REQUIRE(c);
    CHECK(c->gpus == std::vector<std::uint32_t>{2}); // 0.4 free is the tightest that fits 0.3
}

TEST_CASE("packing prefers shared GPUs, then used nodes, then empty nodes") {
    Worker shared = worker(1, {400, 1000}); // a 0.3 job fits on the shared GPU
    Worker used = worker(2, {100, 1000});   // only the free GPU fits
    Worker empty = worker(3, {1000, 1000});
    // points: shared = 100 - 40/10 = 96; used = 50 - 1 = 49; empty = max(33 - 2, 2) = 31
    CHECK(packing_points(shared, {0}) == 96);
    CHECK(packing_points(used, {1}) == 49);
    CHECK(packing_points(empty, {0}) == 31);
    std::vector<Worker> ws{empty, used, shared};
    CHECK(place_index(ws, share_job(1, 300), policy_of(ScorerKind::packing)) == 2);
    std::vector<Worker> ws2{empty, used};
    CHECK(place_index(ws2, share_job(1, 300), policy_of(ScorerKind::packing)) == 1);
}

TEST_CASE("fgd places where fragmentation grows least") {
    // workload: half the tasks want 0.5 GPU, half a whole GPU
    Worker a = worker(1, {600});
    Worker b = worker(2, {1000});
    JobRequest j = share_job(1, 500);
    Rng rng(1);
    // a: before (0 + 600) / 2 = 300, after (100 + 100) / 2 = 100 -> delta -200 milli (weighted -400)
    auto ca = choose_on_worker(a, j, ScorerKind::fgd, half_and_whole(), scale_of({a, b}), rng);
    // b: before 0, after (0 + 500) / 2 = 250 -> delta +250 milli (weighted +500)
    auto cb = choose_on_worker(b, j, ScorerKind::fgd, half_and_whole(), scale_of({a, b}), rng);
    REQUIRE(ca);
    REQUIRE(cb);
    CHECK(ca->frag_delta == -400);
    CHECK(cb->frag_delta == 500);
    CHECK(ca->score > cb->score);
    CHECK(place_index({b, a}, j, policy_of(ScorerKind::fgd)) == 1);
    CHECK(place_index({b, a}, j, policy_of(ScorerKind::fgd_k8s)) == 1);
}

TEST_CASE("fgd picks the GPU inside a worker that fragments least") {
    Worker w = worker(1, {1000, 600});
    Rng rng(1);
    // GPU 1 (0.6 -> 0.1): after {1000, 100}: half 100, whole 100 -> 200 weighted (before 600)
    // GPU 0 (1 -> 0.5):  after {500, 600}: half 0, whole 1100 -> 1100 weighted
    auto c = choose_on_worker(w, share_job(1, 500), ScorerKind::fgd, half_and_whole(), scale_of({w}), rng);
    REQUIRE(c);
    CHECK(c->gpus == std::vector<std::uint32_t>{1});
    CHECK(c->frag_delta == 200 - 600);
}

TEST_CASE("random spreads over feasible workers and is reproducible with a seed") {
    std::vector<Worker> ws{worker(1, {1000}), worker(2, {1000}), worker(3, {1000}), worker(4, {100})};
    std::set<std::size_t> chosen;
    for (std::uint64_t seed = 0; seed < 64; ++seed) {
        std::size_t i = place_index(ws, share_job(1, 500), policy_of(ScorerKind::random), seed);
        CHECK(i != 3); // infeasible worker never chosen
        chosen.insert(i);
        CHECK(place_index(ws, share_job(1, 500), policy_of(ScorerKind::random), seed) == i);
    }
    CHECK(chosen.size() == 3);
}

TEST_CASE("ties go to the first worker in first mode") {
    std::vector<Worker> ws{worker(1, {1000}), worker(2, {1000}), worker(3, {1000})};
    PlacementPolicy p = policy_of(ScorerKind::bestfit);
    p.tie_break = TieBreak::first;
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
        CHECK(place_index(ws, share_job(1, 500), p, seed) == 0);
    }
}

TEST_CASE("image and cache affinity break ties towards warm workers") {
    Worker cold = worker(1, {1000});
    Worker warm = worker(2, {1000});
    warm.cached_images = {"pytorch:2.3"};
    warm.cached_models = {"llama-8b"};
    JobRequest j = share_job(1, 500);
    j.image = "pytorch:2.3";
    j.cache_models = {"llama-8b", "other"};
    ScoreWeights weights;
    // warm: image .05 + one cached model .05 + reliability .1; cold: reliability .1
    CHECK(affinity_score(warm, j, weights) == Approx(0.2));
    CHECK(affinity_score(cold, j, weights) == Approx(0.1));
    PlacementPolicy p = policy_of(ScorerKind::bestfit);
    p.weights = weights;
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
        CHECK(place_index({cold, warm}, j, p, seed) == 1);
    }
}

TEST_CASE("reliability steers jobs away from flaky workers") {
    Worker flaky = worker(1, {1000});
    flaky.reliability = 0.5;
    Worker solid = worker(2, {1000});
    PlacementPolicy p = policy_of(ScorerKind::bestfit);
    p.weights = ScoreWeights{};
    // reliability term: flaky .05, solid .10; the bestfit scores are equal
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
        CHECK(place_index({flaky, solid}, share_job(1, 500), p, seed) == 1);
    }
}

TEST_CASE("scorers are selectable by name") {
    for (const auto& n : scorer_names()) {
        auto k = parse_scorer(n);
        REQUIRE(k.has_value());
        CHECK(to_string(*k) == n);
    }
    CHECK_FALSE(parse_scorer("dotprod").has_value());
}

} // namespace test_scorers
} // namespace
