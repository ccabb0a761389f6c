// The coordinator's options, and the types its answers and requests are made of (views of the
// state, estimates, reports, queries): plain data, no behaviour. Coordinator (coordinator.hpp)
// takes and returns them; the HTTP routes turn them into JSON.
#pragma once

#include "core/api/assignment.hpp"
#include "core/api/heartbeat.hpp"
#include "core/api/outcome.hpp"
#include "core/api/submit.hpp"
#include "core/archive/listing.hpp"
#include "core/coordinator/credit_desk.hpp"
#include "core/coordinator/overview.hpp"
#include "core/credits/ledger.hpp"
#include "core/recipe/recipe.hpp"
#include "core/sched/scheduler.hpp"
#include "core/store/store.hpp"
#include "core/verify/spot_check.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::coordinator {

using store::AttemptId;
using store::JobId;
using store::Role;
using store::TeamId;
using store::WorkerId;

// An upload the HTTP layer spooled to disk, with its size and SHA-256 measured there (off the
// coordinator thread). The file is read, never kept: the caller removes it.
struct UploadedFile {
    std::filesystem::path path;
    std::int64_t size = 0;
    std::string sha256_hex;
    // What the archive holds, listed where the upload was parsed (routes that ask: outputs), or why
    // it could not be.
    std::optional<archive::Listing> listing{};
    std::string listing_error{};
};

inline constexpr std::int64_t k_max_enroll_uses = 10'000;
inline constexpr std::int64_t k_log_head_bytes = std::int64_t{1} << 20; // kept from a capped log's start
inline constexpr std::size_t k_max_jobs_per_submission = 10'000;        // a sweep's cap, checked here too

// SQLite keeps a blob under 1e9 bytes; inputs stay below that.
inline constexpr std::size_t k_max_input_archive_bytes = 950'000'000;

struct CoordinatorOptions {
    std::int64_t lease_ms = 30'000;          // an attempt is lost this long after its last renewal
    std::int64_t worker_timeout_ms = 30'000; // a worker silent this long gets no new work
    std::int64_t runtime_grace_ms = 30'000;  // beyond max_runtime before the coordinator fails it
    // Log bytes kept per attempt (0: no cap). Past it, the log keeps its first k_log_head_bytes and
    // its latest bytes; readers are told what was dropped. A job cannot grow the database for ever.
    std::int64_t max_log_bytes = std::int64_t{64} << 20;
    // The most a recipe may ask for (`logs.max_size`, checked at submit; 0: no limit).
    std::int64_t max_log_limit_bytes = std::int64_t{1} << 30;
    // The dashboard's utilisation chart: tick() records a store::Sample of the pool this often (0:
    // never), and the store keeps the last sample_keep_ms of them.
    std::int64_t sample_every_ms = 60'000;
    std::int64_t sample_keep_ms = 24 * 3'600'000;
    sched::Policy policy;
    CreditOptions credits;
    // A GPU job holding its share without using the GPU this long is stopped by its worker, unless its
    // recipe says otherwise (`resources.idle_timeout`); 0 = never.
    std::int64_t idle_timeout_s = 1800;
    // Fractional jobs only on GPUs whose worker holds jobs to their share (MPS or the watchdog): a GPU
    // reported with memory enforcement "none" then takes whole-GPU jobs alone.
    bool whole_gpu_only_unenforced = false;
    // A worker whose owner handed one job back (Outcome::owner_preempted, never charged) this many
    // times gets that job no more for owner_avoid_ms after the last time: it goes to another worker,
    // or waits (sched::JobRequest::avoid). Each later hand-back starts the period again. 0: never.
    std::int64_t owner_preempt_limit = 3;
    std::int64_t owner_avoid_ms = 10 * 60'000;
    // How much of each GPU's use members see in the pool's overview (overview.hpp).
    MembersSee members_see = MembersSee::summary;
    // Recipe repositories (as clients name them: recipe::Origin::repo) whose runs count for every
    // team in recipe_history; any other repository's runs count for the team that ran them alone.
    std::vector<std::string> public_recipe_repos{};
    // Spot checks (`coordinator --verify-fraction`, docs/evidence.md): how often a succeeded job runs
    // again on another owner's worker, and when a worker is quarantined. fraction 0: off.
    verify::SpotCheckPolicy spot_checks{};
    // The seed of the spot checks' draws (0: from std::random_device), for repeatable tests.
    std::uint64_t spot_check_seed = 0;
};

// A submission and its answer: the wire types (core/api/submit.hpp), taken as they are.
using api::SubmitRequest;
using SubmitResult = api::SubmitReply;

// How a worker says an attempt ended (one enum for both ends: core/api/outcome.hpp).
using api::Outcome;
using api::outcome_from_string;

// What a sweep is expected to cost, before it runs.
struct JobEstimate {
    std::string name;
    std::string gpu_model; // the priciest model in the pool it may land on ("" for CPU)
    std::int64_t price_micro_per_hour = 0;
    std::int64_t max_micro = 0;      // price x max_runtime: the hold
    std::int64_t estimate_micro = 0; // price x median past runtime (or max_runtime)
    std::int64_t runtime_s = 0;      // the runtime the estimate uses
    std::int64_t history_runs = 0;   // past successful runs it is based on (0: max_runtime)
};

struct RecipeHistory {
    recipe::Origin recipe;
    std::int64_t runs = 0;
    std::int64_t median_runtime_s = 0;
    std::int64_t median_cost_micro = 0;
};

struct Estimate {
    std::vector<JobEstimate> jobs;
    std::int64_t total_max_micro = 0;
    std::int64_t total_estimate_micro = 0;
    std::int64_t available_micro = 0;              // the team's balance
    std::optional<std::int64_t> budget_room_micro; // what its budgets still allow, if it has any
    bool enforced = true;
    // Workers that joined the pool (banned ones left out), and those of them taking work now
    // (presence "online"): a submission to a pool where none is says so before it uploads.
    std::int64_t workers_joined = 0;
    std::int64_t workers_online = 0;
};

// One spend cap in a budget change: left as it is, removed, or set to `micro`.
struct CapChange {
    enum class Kind : std::uint8_t { keep, remove, set };
    Kind kind = Kind::keep;
    std::int64_t micro = 0;
    static CapChange keep() { return {}; }
    static CapChange remove() { return {Kind::remove, 0}; }
    static CapChange set(std::int64_t m) { return {Kind::set, m}; }
};

// An admin's change to a team's budget, or (with `member`) to one member's budget within it.
struct BudgetChange {
    std::string team;
    std::string member{}; // a member token of the team: its id, or its label when that is unique
    CapChange day{};      // per rolling 24 hours
    CapChange week{};     // per rolling 7 days
};

struct CreditsView {
    TeamId team;
    std::string name;
    std::int64_t balance_micro = 0;  // available: holds are already out of it
    std::int64_t held_micro = 0;     // in escrow for its running attempts
    std::int64_t settling_micro = 0; // earned by its workers, paid out when the settling period ends
    std::optional<std::int64_t> budget_day_micro;
    std::optional<std::int64_t> budget_week_micro;
    std::int64_t spent_day_micro = 0;
    std::int64_t spent_week_micro = 0;
    std::vector<MemberBudget> members{};   // members with caps of their own
    std::vector<credits::Entry> movements; // newest first
};

struct TeamReport {
    TeamId team;
    std::string name;
    std::int64_t granted_micro = 0; // grants and adjustments, net of expiries
    std::int64_t earned_micro = 0;  // charges credited to it as a provider
    std::int64_t spent_micro = 0;   // charges and fees for its attempts
    std::int64_t balance_micro = 0;
    std::int64_t held_micro = 0;
    std::int64_t settling_micro = 0; // earnings not paid out yet
    std::int64_t refunded_micro = 0; // given back to it for voided attempts
};

struct WorkerReport {
    WorkerId worker;
    std::string name;
    TeamId team;
    double gpu_hours = 0;             // GPU-hours delivered (runtime x share) by attempts that ran
    std::int64_t attempts = 0;        // attempts that ended on it
    std::int64_t failures = 0;        // of those, lost to the worker (lease expiry, worker fault, ban)
    std::int64_t earned_micro = 0;    // charged for attempts on it, less what was voided
    std::int64_t voided = 0;          // attempts whose results an admin voided
    std::int64_t owner_preempted = 0; // attempts its owner handed back (preempted, never charged)
};

struct Report {
    std::int64_t since_ms = 0;
    std::vector<TeamReport> teams;
    std::vector<WorkerReport> workers;
    std::int64_t pool_fee_micro = 0; // the fee account's balance
    std::int64_t escrow_micro = 0;
    std::int64_t settling_micro = 0; // all providers' earnings not paid out yet
    std::int64_t issuer_micro = 0;
};

// What ban_worker() did: what it voided, over every worker it banned, and which workers.
struct Voided {
    std::vector<AttemptId> attempts; // marked voided now
    std::vector<JobId> requeued;     // jobs whose result it was, queued to run again
    std::int64_t refunded_micro = 0; // given back to the teams that paid
    // The other workers enrolled with the same token (enrolled_with), as they are after the ban.
    std::vector<store::WorkerRecord> siblings{};
    std::vector<WorkerId> banned{}; // the worker named, then the siblings when they were banned with it
};

// Which jobs `list_jobs()` lists: those matching every filter that is set, oldest first; with `limit`,
// the newest `limit` of them (`before` pages further back: only ids below it).
struct JobQuery {
    std::optional<store::JobState> state;
    std::optional<SweepId> sweep;
    // Jobs submitted with this token (its id), or with tokens of this label: who submitted them.
    std::optional<TokenId> submitter_token{};
    std::optional<std::string> submitter_label{};
    bool all_teams = false; // admins only
    std::size_t limit = 0;  // 0: all
    std::optional<JobId> before;
};

struct JobList {
    std::vector<store::JobRecord> jobs;
    bool more = false; // older jobs match too (ask again with before = jobs.front().id)
};

// What a worker is handed to run, and the heartbeat's answer: the wire types (core/api).
using api::Assignment;
using api::HeartbeatReply;

struct LogSlice {
    AttemptId attempt;
    std::string data;
    std::int64_t next_offset = 0;
    bool finished = false; // the attempt has ended: no more bytes will come
};

} // namespace gpupool::coordinator
