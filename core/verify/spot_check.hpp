// Spot checks (issue 43, part 2): the policy that decides how often a worker's result is run again
// on another owner's worker, how much a worker is trusted from its record of agreeing, and when it is
// quarantined; and a simulation of that policy against workers that forge a share of their results,
// which gives the detection curve docs/evidence.md quotes.
//
// The policy (docs/evidence.md, "Spot-check replication"):
// - Sampling. A succeeded job is checked with probability `fraction` (the pool's --verify-fraction),
//   raised for a worker with few checks behind it: a worker earns trust, as BOINC replicates less for
//   hosts with a good record. Its first `warmup_checks` checks are sampled at up to
//   `warmup_boost` x fraction, falling linearly to `fraction`.
// - Agreement. A check that agrees counts for both workers; one that disagrees is settled by a third
//   owner's worker, and the side the majority is against gets the disagreement (no majority: nobody).
// - Score. A worker's disagreement rate r has the posterior Beta(1 + disagreed, 1 + agreed) (a uniform
//   prior); its reliability is the posterior mean of 1 - r.
// - Quarantine. When P(r > max_rate | record) > confidence: the worker is more likely than not to
//   forge more than max_rate of its results, beyond reasonable doubt. One disagreement quarantines a
//   new worker; a worker with hundreds of agreements survives a single one (a glitch).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::verify {

struct CheckRecord {
    std::int64_t agreed = 0;
    std::int64_t disagreed = 0;
    std::int64_t checks() const { return agreed + disagreed; }
    bool operator==(const CheckRecord&) const = default;
};

struct SpotCheckPolicy {
    double fraction = 0.0;          // 0: off
    double warmup_boost = 5.0;      // a new worker's first results are sampled up to this x more often
    std::int64_t warmup_checks = 20; // over this many checks the boost falls to none
    double max_rate = 0.02;         // a disagreement rate above this is forging, not noise
    double confidence = 0.95;       // how sure the record must make that before quarantine
};

// The probability that a succeeded job run on a worker with this record is checked, in [0, 1].
double sample_probability(const SpotCheckPolicy& policy, const CheckRecord& record);
// The posterior mean of the agreement rate: (1 + agreed) / (2 + checks).
double reliability(const CheckRecord& record);
// P(disagreement rate > policy.max_rate | record), under the Beta(1 + disagreed, 1 + agreed) posterior.
double forging_probability(const SpotCheckPolicy& policy, const CheckRecord& record);
bool quarantined(const SpotCheckPolicy& policy, const CheckRecord& record);

// ---- the simulation ------------------------------------------------------------------------------
// One worker that forges each result with probability `forge_rate` runs jobs among honest workers
// (each honest result agrees with every other honest one; honest workers glitch, disagreeing with
// probability `glitch_rate`, to show what noise costs). Each sampled job of the worker is checked
// by an honest worker; a disagreement is settled by a third, honest, worker. The run ends when the
// worker is quarantined or after `max_jobs` jobs.
struct DetectionCase {
    double fraction = 0.1;
    double forge_rate = 0.2;
    double glitch_rate = 0.0;
    std::int64_t max_jobs = 1000;
    int runs = 2000;
    std::uint64_t seed = 1;
};
struct DetectionResult {
    DetectionCase input;
    double quarantined_within_100 = 0; // share of runs quarantined by its 100th job
    double quarantined_ever = 0;       // within max_jobs
    std::int64_t median_jobs = -1;     // jobs run until quarantine, median over runs (-1: most never)
    std::int64_t p90_jobs = -1;
    double checks_per_job = 0;         // the checks' cost, replicas per job (tie-breaks included)
    std::int64_t forged_accepted_median = 0; // forged results that passed unchecked before quarantine
};
DetectionResult simulate_detection(const DetectionCase& c);

} // namespace gpupool::verify
