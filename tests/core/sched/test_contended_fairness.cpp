#include "core/sim/fairness.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_contended_fairness {

using namespace gpupool::sim;

TEST_CASE("water-filling: a claimant wanting less than its part gets its demand, the rest goes by weight",
          "[sim][fairness]") {
    // level 10 / 4 = 2.5 covers the first demand (2); the 8 left split 1 : 2 between the others
    auto fair = water_fill(10.0, {2.0, 100.0, 100.0}, {1.0, 1.0, 2.0});
    REQUIRE(fair.size() == 3);
    CHECK(fair[0] == Approx(2.0));
    CHECK(fair[1] == Approx(8.0 / 3.0));
    CHECK(fair[2] == Approx(16.0 / 3.0));
    // every demand met: nobody gets more than it asked for
    auto met = water_fill(10.0, {1.0, 2.0}, {1.0, 1.0});
    CHECK(met[0] == Approx(1.0));
    CHECK(met[1] == Approx(2.0));
    // a weight of 0 counts as 1
    auto zero = water_fill(4.0, {10.0, 10.0}, {0.0, 1.0});
    CHECK(zero[0] == Approx(2.0));
}

TEST_CASE("contended fairness: weights 1 and 3, both saturating, are due 25% and 75%", "[sim][fairness]") {
    ContendedFairness even_split;
    // the GPUs split evenly while both teams queue: shares .5 / .5 against .25 / .75
    CHECK(even_split.add(100.0, {TeamSample{1, 1.0, 5.0, 10.0}, TeamSample{2, 3.0, 5.0, 10.0}}));
    ContendedResult r = even_split.result();
    REQUIRE(r.teams.size() == 2);
    CHECK(r.contended_s == Approx(100.0));
    CHECK(r.gpu_seconds == Approx(1000.0));
    CHECK(r.teams[0].share == Approx(0.5));
    CHECK(r.teams[0].fair_share == Approx(0.25));
    CHECK(r.teams[0].deviation == Approx(1.0));       // |.5 - .25| / .25
    CHECK(r.teams[1].deviation == Approx(1.0 / 3.0)); // |.5 - .75| / .75
    CHECK(r.worst_deviation == Approx(1.0));
    CHECK(r.jain_index < 0.9);

    ContendedFairness weighted;
    weighted.add(100.0, {TeamSample{1, 1.0, 2.5, 10.0}, TeamSample{2, 3.0, 7.5, 10.0}});
    r = weighted.result();
    CHECK(r.teams[0].share == Approx(0.25));
    CHECK(r.teams[1].share == Approx(0.75));
    CHECK(r.worst_deviation == Approx(0.0).margin(1e-12));
    CHECK(r.jain_index == Approx(1.0));
}

TEST_CASE("contended fairness: a team demanding less than its share is due its demand", "[sim][fairness]") {
    ContendedFairness f;
    // 14 GPUs held; team 1 wants only the 2 it runs (nothing queued); teams 2 and 3 (weights 1, 2)
    // queue more. Water-filling: level 14 / 4 = 3.5 covers team 1's 2; 12 left split 1 : 2 = 4 : 8.
    CHECK(f.add(10.0, {TeamSample{1, 1.0, 2.0, 0.0}, TeamSample{2, 1.0, 4.0, 10.0}, TeamSample{3, 2.0, 8.0, 10.0}}));
    ContendedResult r = f.result();
    REQUIRE(r.teams.size() == 3);
    CHECK(r.teams[0].fair_share == Approx(2.0 / 14.0));
    CHECK(r.teams[1].fair_share == Approx(4.0 / 14.0));
    CHECK(r.teams[2].fair_share == Approx(8.0 / 14.0));
    CHECK(r.worst_deviation == Approx(0.0).margin(1e-12));
}

TEST_CASE("contended fairness: only time with two or more teams queued counts, weighted by duration",
          "[sim][fairness]") {
    ContendedFairness f;
    // one team queued: no contention, whatever the split
    CHECK_FALSE(f.add(1000.0, {TeamSample{1, 1.0, 9.0, 5.0}, TeamSample{2, 1.0, 1.0, 0.0}}));
    CHECK(f.result().contended_s == 0.0);
    // 10 s at 1 : 3, then 30 s at 3 : 1; equal weights, both saturating
    CHECK(f.add(10.0, {TeamSample{1, 1.0, 1.0, 5.0}, TeamSample{2, 1.0, 3.0, 5.0}}));
    CHECK(f.add(30.0, {TeamSample{1, 1.0, 3.0, 5.0}, TeamSample{2, 1.0, 1.0, 5.0}}));
    ContendedResult r = f.result();
    CHECK(r.contended_s == Approx(40.0));
    // team 1: (10 + 90) / (40 + 120) GPU-seconds = .625, fair .5
    CHECK(r.teams[0].share == Approx(0.625));
    CHECK(r.teams[0].fair_share == Approx(0.5));
    CHECK(r.teams[0].deviation == Approx(0.25));
}

} // namespace test_contended_fairness
} // namespace
