// Fairness under contention: how the GPUs were split between teams while at least two of them had
// work waiting, against the split their weights entitle them to.
//
// Whole-run GPU-time / weight cannot see contention: when every team eventually runs everything it
// submitted, each gets what it asked for whatever its weight. What a weight promises is the split of
// the pool while teams compete for it, so the time simulation feeds ContendedFairness one sample per
// interval in which the pool's state is constant, and only intervals in which two or more teams
// have GPU work queued count. In such an interval the GPUs allocated (to all teams) are divided by
// weighted max-min fairness (water-filling): a team that wants less than its weighted part (what it
// runs plus what it has queued) gets what it wants, and the rest is split among the others by
// weight. Summed over the contended intervals, each team's share of the allocated GPU-time is set
// against its fair share.
// Plain value types; not thread-safe for concurrent mutation.
#pragma once

#include <cstdint>
#include <vector>

namespace gpupool::sim {

// Weighted max-min split of `capacity` between claimants with `demands` and `weights` (same size;
// a weight <= 0 counts as 1): each gets min(demand, level x weight), with the level at which the
// whole capacity is given out, or every demand is met.
std::vector<double> water_fill(double capacity, const std::vector<double>& demands, const std::vector<double>& weights);

// One team in one interval.
struct TeamSample {
    std::int64_t team = 0;
    double weight = 1.0;
    double allocated = 0.0; // GPUs its running attempts hold
    double queued = 0.0;    // GPUs its queued jobs ask for
};

struct TeamFairness {
    std::int64_t team = 0;
    double weight = 1.0;
    double share = 0.0;      // its part of the GPU-time allocated in contended intervals
    double fair_share = 0.0; // its part of the water-filled GPU-time in the same intervals
    // |share - fair_share| / fair_share (0 when both are 0)
    double deviation = 0.0;
};

struct ContendedResult {
    double contended_s = 0.0; // time with two or more teams queued
    double gpu_seconds = 0.0; // GPU-time allocated during it
    std::vector<TeamFairness> teams;
    double worst_deviation = 0.0; // the largest TeamFairness::deviation
    double jain_index = 1.0;      // Jain's index over share / fair_share of the teams with a fair share
};

class ContendedFairness {
public:
    // The state that held for `duration_s` seconds (teams in any order; a team absent from a sample
    // had nothing running or queued). Returns whether the interval was contended.
    bool add(double duration_s, const std::vector<TeamSample>& teams);
    ContendedResult result() const;

private:
    struct Sums {
        double weight = 1.0;
        double allocated = 0.0; // GPU-seconds
        double fair = 0.0;      // GPU-seconds
    };
    double m_contended_s = 0.0;
    std::vector<std::pair<std::int64_t, Sums>> m_teams; // by team id
};

} // namespace gpupool::sim
