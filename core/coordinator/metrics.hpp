// The coordinator's numbers for monitoring, in plain data: no metrics library in here.
//
// Two kinds:
// - PoolMetrics, the state now (pool_metrics(), over the coordinator's components): jobs by state, team and priority;
// ended
//   attempts by outcome and credits by team since the pool began (counted from the store's rows at
//   start, then change by change, so they survive restarts); workers and GPUs by model and state;
//   GPU memory offered, allocated and in use; heartbeat ages. Built on the coordinator thread on
//   each scrape, in time proportional to the live pool (jobs, workers), not to its history.
// - CoordinatorEvents, durations as they happen (a store commit, a scheduling pass, how long an
//   attempt queued and ran), for histograms; the coordinator calls the observer it was given.
// core/coordinator/prometheus_metrics.hpp turns both into the Prometheus text format.
#pragma once

#include "core/credits/ledger.hpp"
#include "core/store/records.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::coordinator {

// How an attempt ended, as monitoring counts it.
enum class AttemptOutcome : std::uint8_t {
    succeeded,
    failed, // the job's process failed, or it ran past max_runtime
    cancelled,
    lost,                // its worker stopped renewing the lease
    worker_fault,        // the worker could not run it (start failure, lost on a restart)
    banned,              // an admin banned its worker
    preempted_scheduler, // made room for a higher-priority job
    preempted_owner,     // the GPU's owner took the machine back
};
inline constexpr std::size_t k_attempt_outcomes = 8;
const char* to_string(AttemptOutcome o);
// nullopt while the attempt is still assigned or running.
std::optional<AttemptOutcome> outcome_of(const store::AttemptRecord& attempt);

// A team's credits since the pool began (micro-credits): grants and adjustments net of expiries,
// what its workers earned, what its jobs spent (charges and fees), what was given back for voided
// attempts (already taken off `spent` and the provider's `earned`).
struct CreditTotals {
    std::int64_t granted = 0;
    std::int64_t earned = 0;
    std::int64_t spent = 0;
    std::int64_t refunded = 0;
};
// Adds one ledger entry to the teams' totals (by team id). The one reading of the ledger's
// reasons that the pool report and the metrics share.
void tally_entry(const credits::Entry& entry, std::map<std::int64_t, CreditTotals>& teams);

// What the coordinator counts as it goes, rebuilt from the store's rows at start.
struct PoolCounters {
    std::array<std::int64_t, k_attempt_outcomes> attempts{};                       // ended attempts, by AttemptOutcome
    std::array<double, k_attempt_outcomes> gpu_seconds{}; // their GPU time (share x started -> ended), by outcome
    std::map<std::pair<std::int64_t, store::JobState>, std::int64_t> ended_jobs{}; // by team id and state
    std::map<std::int64_t, CreditTotals> credits{};                                // by team id
    void count_ended(const store::AttemptRecord& attempt);
    // A job written with `job`'s state, from `before` (nullopt: a new job). A voided result can
    // take a job from ended back to queued.
    void count_job(std::optional<store::JobState> before, const store::JobRecord& job);
    void count_entry(const credits::Entry& entry) { tally_entry(entry, credits); }
};

struct PoolMetrics {
    std::int64_t at_ms = 0;

    struct Jobs {
        std::string state;
        std::string team;
        std::string priority; // low, normal, high ("" for ended jobs)
        std::int64_t count = 0;
    };
    // Jobs not ended (queued, assigned, running), by state, team and priority; every pair present.
    std::vector<Jobs> live_jobs;
    // Ended jobs, by state and team (priority aside: the history would make too many series).
    std::vector<Jobs> ended_jobs;
    // How long each team's oldest queued job has waited (since it was submitted, or since its
    // previous attempt ended), in seconds; teams with nothing queued are absent.
    std::map<std::string, double> oldest_queued_s;
    std::array<std::int64_t, k_attempt_outcomes> attempts{}; // ended, by AttemptOutcome
    // The GPU time those attempts held (GPU share x started -> ended), by outcome. What a preempted
    // attempt ran is lost work (at most: a job with `[checkpoint]` keeps what it saved): preemption's waste.
    std::array<double, k_attempt_outcomes> attempt_gpu_seconds{};

    struct Workers {
        std::string gpu_model; // "cpu" for a worker without GPUs; a worker counts under each model it has
        std::string state;     // WorkerRoster::presence
        std::int64_t count = 0;
    };
    std::vector<Workers> workers;

    struct Gpus {
        std::string model;
        std::string state; // the worker's presence, or "unhealthy" for a failing or reclaimed GPU of an online worker
        std::int64_t count = 0;
    };
    std::vector<Gpus> gpus;

    // GPU memory of the GPUs that take work now (online workers, healthy GPUs), per model.
    struct Memory {
        std::string model;
        std::int64_t offered_mib = 0;
        std::int64_t allocated_mib = 0;      // the shares given to active attempts
        std::int64_t used_mib = 0;           // what the drivers report held, on GPUs that report it
        std::int64_t gpus_reporting_use = 0; // GPUs whose worker reports memory in use
        std::int64_t busy_gpus = 0;          // GPUs with at least one active attempt
        std::int64_t gpu_attempts = 0;       // active attempts on those GPUs
    };
    std::vector<Memory> memory;

    struct Heartbeat {
        std::int64_t worker = 0;
        std::string name;
        double age_s = 0;
    };
    std::vector<Heartbeat> heartbeats; // workers not banned or drained

    // Spot checks (docs/evidence.md): each checked worker's record and reliability score, and how
    // many workers are quarantined now.
    struct Checked {
        std::int64_t worker = 0;
        std::string name;
        std::int64_t agreed = 0;
        std::int64_t disagreed = 0;
        double reliability = 0;
    };
    std::vector<Checked> checked; // workers with at least one check, not banned
    std::int64_t workers_quarantined = 0;

    struct Credits {
        std::string team;
        CreditTotals totals;
        std::int64_t balance = 0;
        std::int64_t held = 0;
    };
    std::vector<Credits> credits;
    // The ledger's own checks: every account's balance summed (0 unless the ledger is broken), and
    // escrow's balance less what the teams' active attempts hold (0 likewise).
    std::int64_t ledger_total = 0;
    std::int64_t escrow_unaccounted = 0;
};

class CreditDesk;
class JobBook;
class TokenBook;
class WorkerRoster;

// The pool's numbers now, read from the coordinator's components and the counters it keeps
// (Coordinator::metrics() calls it with its own).
PoolMetrics pool_metrics(const TokenBook& tokens, const WorkerRoster& roster, const JobBook& jobs,
                         const CreditDesk& desk, const PoolCounters& counters, std::int64_t now_ms);

// What the coordinator tells an observer as it happens. Called on the coordinator thread; an
// implementation must be quick and must not call back into the coordinator.
class CoordinatorEvents {
public:
    virtual ~CoordinatorEvents() = default;
    // A store transaction (Store::apply) and how it went.
    virtual void store_committed(std::chrono::nanoseconds took, bool ok) = 0;
    // A scheduling pass: its decision and the commit of what it placed and preempted.
    virtual void scheduling_pass(std::chrono::nanoseconds took, std::size_t placed, std::size_t preempted) = 0;
    // An attempt was placed after its job waited `queued_ms` in the queue (since it was submitted,
    // or since its previous attempt ended).
    virtual void attempt_placed(const std::string& team, std::int64_t queued_ms) = 0;
    // An attempt ended after running `ran_ms` (0 if it never started).
    virtual void attempt_ended(const std::string& team, AttemptOutcome outcome, std::int64_t ran_ms) = 0;
};

} // namespace gpupool::coordinator
