// The coordinator's durable records: teams, tokens, workers, sweeps, jobs and attempts, the
// credits ledger (its immutable entries, the cached account balances, grants), the audit log and
// the pool's utilisation samples.
//
// These are plain value types shared by the store (which persists them) and the coordinator
// (which keeps the live copy in memory and writes every change through the store before it
// acknowledges it). Ids are allocated by the coordinator, the single owner of mutable state.
// Safe to copy between threads.
#pragma once

#include "core/credits/ledger.hpp"
#include "core/recipe/recipe.hpp"
#include "core/util/ids.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool::store {

using gpupool::AttemptId;
using gpupool::JobId;
using gpupool::TeamId;
using gpupool::WorkerId;

enum class Role : std::uint8_t {
    admin,  // everything, every team
    member, // one team's jobs and credits
    worker, // one worker of an owner team
    enroll, // may register one worker for a team, and nothing else
};

enum class JobState : std::uint8_t { queued, assigned, running, succeeded, failed, cancelled };
enum class AttemptState : std::uint8_t { assigned, running, succeeded, failed, cancelled, lost, preempted };
// quarantined: its spot checks disagreed too often (docs/evidence.md); it gets no new work until an
// admin activates it again (or bans it).
enum class WorkerState : std::uint8_t { active, draining, banned, quarantined };

const char* to_string(Role r);
const char* to_string(JobState s);
const char* to_string(AttemptState s);
const char* to_string(WorkerState s);
std::optional<Role> role_from_string(std::string_view s);
std::optional<JobState> job_state_from_string(std::string_view s);
std::optional<AttemptState> attempt_state_from_string(std::string_view s);
std::optional<WorkerState> worker_state_from_string(std::string_view s);

bool is_terminal(JobState s);
bool is_terminal(AttemptState s);

struct TeamRecord {
    TeamId id;
    std::string name;
    std::int64_t weight = 1; // fair-share weight
    std::int64_t created_at = 0;
    // Spend caps over the last 24 hours / 7 days (charges plus what is held), micro-credits.
    std::optional<std::int64_t> budget_day_micro;
    std::optional<std::int64_t> budget_week_micro;
    bool operator==(const TeamRecord&) const = default;
};

struct TokenRecord {
    TokenId id;
    std::string hash; // hex SHA-256 of the secret; the secret itself is never stored
    Role role = Role::member;
    std::optional<TeamId> team;     // member, worker and enroll tokens
    std::optional<WorkerId> worker; // worker tokens
    std::string label;
    std::int64_t created_at = 0;
    std::optional<std::int64_t> revoked_at;
    // Enrollment tokens: registrations left (the token is revoked when the last is used);
    // nullopt = unlimited (enrollment tokens made before counting existed).
    std::optional<std::int64_t> uses_left;
    // Member tokens: the member's own spend caps (24 hours / 7 days, micro-credits), within the
    // team's; the jobs it submitted count against them.
    std::optional<std::int64_t> budget_day_micro{};
    std::optional<std::int64_t> budget_week_micro{};
    bool operator==(const TokenRecord&) const = default;
};

struct WorkerRecord {
    WorkerId id;
    TeamId team; // the owner team, credited for the GPU time it delivers
    std::string name;
    std::string inventory_json; // what the worker registered: GPUs, CPU, RAM, runtimes, version
    WorkerState state = WorkerState::active;
    std::int64_t registered_at = 0;
    std::int64_t last_seen_at = 0;
    std::optional<TokenId> enrolled_by; // the enrollment token it registered with; a ban revokes it
    // Its spot checks (docs/evidence.md): results of its that another owner's worker confirmed, and
    // those the majority found wrong. Its reliability score and quarantine follow from these.
    std::int64_t checks_agreed = 0;
    std::int64_t checks_disagreed = 0;
    bool operator==(const WorkerRecord&) const = default;
};

struct SweepRecord {
    SweepId id;
    TeamId team;
    TokenId submitter_token;
    std::string source; // the recipe file name as submitted
    std::int64_t job_count = 0;
    std::int64_t max_parallel = 0;
    std::int64_t created_at = 0;
    // The client's key for this submission (empty: none): a retry with the same key from the same
    // team gets this sweep back instead of a second copy.
    std::string idempotency_key{};
    bool operator==(const SweepRecord&) const = default;
};

struct JobRecord {
    JobId id;
    SweepId sweep_id;
    TeamId team;
    recipe::JobSpec spec;
    JobState state = JobState::queued;
    std::int64_t attempts = 0; // attempts started so far, over every run of it
    std::int64_t created_at = 0;
    std::int64_t updated_at = 0;
    std::optional<std::int64_t> finished_at;
    std::optional<std::int64_t> exit_code;
    std::string reason; // why it is waiting, or how it ended
    // How many times its team retried it (`gpupool retry`) after it ended: each retry queues the
    // same job again and starts a new run of attempts, with retry.max_attempts of its own.
    std::int64_t retries = 0;
    // The idempotency key of its latest retry (empty: none): the same key from the same team again
    // gets that retry back instead of a second one.
    std::string retry_key{};
    // A spot check (docs/evidence.md): the pool's job that runs again the result of attempt
    // `check_of` (another job's, of the same team) on another owner's worker, paid from the pool fee.
    // A tie-break also names the first check's attempt it settles against (`check_against`); it
    // keeps off both owners' workers.
    std::optional<AttemptId> check_of{};
    std::optional<AttemptId> check_against{};
    bool is_check() const { return check_of.has_value(); }
    bool operator==(const JobRecord&) const = default;
};

struct AttemptRecord {
    AttemptId id;
    JobId job;
    WorkerId worker;
    std::int64_t gpu_index = -1; // -1 for CPU-only
    std::int64_t gpu_milli = 0;
    AttemptState state = AttemptState::assigned;
    std::int64_t lease_expires_at = 0;
    std::int64_t assigned_at = 0;
    std::optional<std::int64_t> started_at;
    std::optional<std::int64_t> ended_at;
    std::optional<std::int64_t> exit_code;
    std::string reason;
    // What this attempt costs per hour (rate of its GPU model x billed share, or the CPU rate),
    // fixed when it is placed; its hold is this x max_runtime.
    std::int64_t price_micro_per_hour = 0;
    // When an admin voided its result (its worker was banned): its charge went back to the team.
    std::optional<std::int64_t> voided_at{};
    // The run of its job it belongs to: 0 for the attempts of the submission, N for those after
    // the job's Nth retry (JobRecord::retries when it was placed).
    std::int64_t retry = 0;
    bool operator==(const AttemptRecord&) const = default;
};

// One piece of an attempt's evidence (docs/evidence.md), a JSON object's text by kind: "run", what its
// worker reported it ran (api::RunReport); "outputs", the listing of the outputs archive the
// coordinator received (each file's size and SHA-256); "check", a spot check's verdict. Upserted by
// (attempt, kind); never loaded whole (Store::read_evidence reads one attempt's), so that the
// coordinator's memory does not grow with its history.
struct EvidenceRecord {
    AttemptId attempt;
    std::string kind;
    std::string json = "{}";
    bool operator==(const EvidenceRecord&) const = default;
};

using LedgerEntry = credits::Entry; // immutable: inserted once, never updated

struct BalanceRecord {
    credits::Account account;
    std::int64_t balance = 0; // cached; must equal the sum of the account's entries
    bool operator==(const BalanceRecord&) const = default;
};

struct GrantRecord {
    std::int64_t id = 0; // the id of its ledger entry
    TeamId team;
    std::int64_t amount = 0;
    std::optional<std::int64_t> expires_at;
    std::string note;
    std::int64_t created_at = 0;
    std::optional<std::int64_t> expired_at; // when its unspent part went back to the issuer
    bool operator==(const GrantRecord&) const = default;
};

// One admin action as the audit log keeps it (`gpupool admin audit`): when, which token, what
// ("team.create", "credits.grant", ...), on what ("team `alpha`"), and the details as a JSON
// object's text. Never a secret: a token's secret is not in it, only its id and label.
struct AuditRecord {
    std::int64_t id = 0; // given by the store when it is appended (ignored in Changes)
    std::int64_t at_ms = 0;
    std::optional<TokenId> actor; // nullopt: the coordinator's own machine (`--new-admin-token`)
    std::string action;
    std::string target;
    std::string detail = "{}";
    bool operator==(const AuditRecord&) const = default;
};

// The pool at one moment, as the coordinator samples it (CoordinatorOptions::sample_every_ms) for the
// dashboard's utilisation chart: pool-wide numbers, every team's work counted. Kept for a day.
struct Sample {
    std::int64_t at_ms = 0;
    std::int64_t workers_online = 0;
    std::int64_t gpus_online = 0;
    std::int64_t gpu_milli_online = 0;    // 1000 per online GPU
    std::int64_t gpu_milli_allocated = 0; // of those, given to active attempts
    std::int64_t jobs_queued = 0;
    std::int64_t jobs_running = 0;
    bool operator==(const Sample&) const = default;
};

} // namespace gpupool::store
