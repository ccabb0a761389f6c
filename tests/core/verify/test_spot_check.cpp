// The spot-check policy (core/verify/spot_check.hpp): sampling that falls as a worker earns trust,
// the reliability score, the quarantine rule, and the simulated detection curve the targets
// are stated against (a worker forging 20 % of its results, --verify-fraction 0.1).
#include "core/verify/spot_check.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_spot_check {

using namespace gpupool::verify;

TEST_CASE("spot checks: a new worker is sampled more, falling to the pool's fraction as it earns trust",
          "[verify][evidence]") {
    SpotCheckPolicy p;
    CHECK(sample_probability(p, {}) == 0.0); // fraction 0: off
    p.fraction = 0.1;
    CHECK(sample_probability(p, {}) == Approx(0.5));
    CHECK(sample_probability(p, {10, 0}) == Approx(0.3));
    CHECK(sample_probability(p, {20, 0}) == Approx(0.1));
    CHECK(sample_probability(p, {500, 3}) == Approx(0.1));
    p.fraction = 0.5;
    CHECK(sample_probability(p, {}) == 1.0); // never above 1
}

TEST_CASE("spot checks: reliability is the posterior mean of agreeing", "[verify][evidence]") {
    CHECK(reliability({}) == Approx(0.5));
    CHECK(reliability({8, 0}) == Approx(0.9));
    CHECK(reliability({98, 0}) == Approx(0.99));
    CHECK(reliability({3, 3}) == Approx(0.5));
}

TEST_CASE("spot checks: one disagreement quarantines a new worker, not a long-trusted one, and none never does",
          "[verify][evidence]") {
    SpotCheckPolicy p;
    p.fraction = 0.1;
    CHECK_FALSE(quarantined(p, {}));
    CHECK_FALSE(quarantined(p, {10'000, 0}));
    CHECK(quarantined(p, {0, 1}));
    CHECK(quarantined(p, {5, 1}));
    CHECK_FALSE(quarantined(p, {200, 1})); // a glitch after 200 agreements
    CHECK(quarantined(p, {200, 12}));      // 6 %: above the 2 % a glitch explains
    // The probability behind it: P(rate > 2 %) under Beta(1 + d, 1 + a).
    CHECK(forging_probability(p, {0, 0}) == Approx(0.98));
    CHECK(forging_probability(p, {200, 1}) < 0.5);
}

TEST_CASE("spot checks: at fraction 0.1 a worker forging 20 % is quarantined within 100 jobs, honest ones never",
          "[verify][evidence]") {
    DetectionCase forger;
    forger.fraction = 0.1;
    forger.forge_rate = 0.2;
    forger.runs = 2000;
    const auto caught = simulate_detection(forger);
    CHECK(caught.quarantined_within_100 >= 0.95);
    CHECK(caught.median_jobs > 0);
    CHECK(caught.median_jobs <= 30);

    DetectionCase honest = forger;
    honest.forge_rate = 0;
    const auto clean = simulate_detection(honest);
    CHECK(clean.quarantined_ever == 0.0);
    CHECK(clean.checks_per_job < 0.15); // the warm-up's extra checks, then the fraction

    // One glitch in 1,000 results: rarely taken for forging.
    honest.glitch_rate = 0.001;
    CHECK(simulate_detection(honest).quarantined_ever < 0.05);
    // A rarer forger, close to the 2 % a glitch explains, takes many more checks but is caught: within
    // 1,000 jobs in most runs (about 87 % with this seed), within 3,000 in nearly all.
    forger.forge_rate = 0.05;
    forger.max_jobs = 3000;
    forger.runs = 1000;
    const auto slow = simulate_detection(forger);
    CHECK(slow.quarantined_ever > 0.95);
    CHECK(slow.quarantined_within_100 < caught.quarantined_within_100);
    CHECK(slow.median_jobs > caught.median_jobs);
}

} // namespace test_spot_check
} // namespace
