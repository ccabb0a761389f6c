// Coordinator: the pool's state machine — teams, tokens, workers, jobs and their attempts.
//
// It owns the live state in memory and writes every change through the Store before returning
// success (so an acknowledged submit, completion or cancel survives a crash); start() rebuilds the
// state from the Store. It is NOT thread-safe: exactly one owner (the server's coordinator thread)
// calls it, and HTTP handlers hand it commands (see server.hpp). Time comes from a Clock.
//
// Rules it enforces (decisions 4 and 5):
// - A job is what was asked; an attempt is one run on one worker. Every worker message names an
//   attempt, and anything about an attempt that is no longer current is refused with
//   ErrorCode::conflict (fencing): a worker back from a partition can neither finish a job that was
//   re-run elsewhere nor log into it.
// - Attempts hold leases renewed by heartbeats. An expired lease makes the attempt `lost` and puts
//   the job back in the queue until retry.max_attempts; max_runtime (plus a grace period) and
//   cancellation are enforced here too, and the worker learns of them in its heartbeat reply.
// - Placement is sched::schedule() on a snapshot of the live state; a sweep's max_parallel caps how
//   many of its jobs hold attempts at once.
// - Credits (decision 7, docs/credits.md): placing an attempt holds its maximum cost (price x
//   max_runtime) in escrow, in the same transaction as the assignment; a team whose balance (or
//   budget) cannot cover the hold stays queued with the numbers in its waiting reason. Ending an
//   attempt settles it in the same transaction as the state change: price x runtime to the
//   provider (the worker's team, less the pool fee), the rest back to the team — nothing charged
//   for a worker fault or an owner preemption. With a settling period (credits.settle_ms) the
//   provider's share waits in its settling account and tick() pays it out once the period is over;
//   until then an admin who bans a lying worker can void its results (ban_worker) and the teams
//   get their credits back from there. With credits.enforce off (the embedded local mode)
//   holds are still taken and charges recorded, but balances may go negative and nothing waits.
//   start() rebuilds balances from the ledger rows and refuses to start if the cached ones differ.
// - Authorization: admin tokens may do anything; member tokens act within their team; worker
//   tokens speak only for their worker; enrollment tokens may only register a worker.
#pragma once

#include "core/api/assignment.hpp"
#include "core/api/heartbeat.hpp"
#include "core/api/inventory.hpp"
#include "core/api/outcome.hpp"
#include "core/api/retry.hpp"
#include "core/api/submit.hpp"
#include "core/api/worker_protocol.hpp"
#include "core/coordinator/metrics.hpp"
#include "core/coordinator/overview.hpp"
#include "core/coordinator/pool_view.hpp"
#include "core/coordinator/worker_earnings.hpp"
#include "core/credits/catalog.hpp"
#include "core/credits/ledger.hpp"
#include "core/recipe/recipe.hpp"
#include "core/sched/scheduler.hpp"
#include "core/store/store.hpp"
#include "core/util/clock.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpupool::coordinator {

using store::AttemptId;
using store::JobId;
using store::Role;
using store::TeamId;
using store::WorkerId;

struct CreditOptions {
    // Holds must be covered by the team's balance and budget, and submit refuses a sweep whose
    // estimate it cannot pay for. Off only for the embedded local mode (`gpupool run`).
    bool enforce = true;
    credits::RateCatalog rates = credits::default_rate_catalog();
    std::int64_t pool_fee_ppm = 0; // of each charge, to the pool-fee account
    // How long an owner's earnings for an attempt settle before they reach its team account (0:
    // at once). Results can be voided after that too, but then the refund is clawed back from
    // the owner's balance, which may go negative.
    std::int64_t settle_ms = 0;
};

// An upload the HTTP layer spooled to disk, with its size and SHA-256 measured there (off the
// coordinator thread). The file is read, never kept: the caller removes it.
struct UploadedFile {
    std::filesystem::path path;
    std::int64_t size = 0;
    std::string sha256_hex;
};

inline constexpr std::int64_t k_max_enroll_uses = 10'000;
inline constexpr std::int64_t k_log_head_bytes = std::int64_t{1} << 20; // kept from a capped log's start
inline constexpr std::size_t k_max_jobs_per_submission = 10'000; // a sweep's cap, checked here too
inline constexpr std::size_t k_max_label_chars = 200;

// SQLite keeps a blob under 1e9 bytes; inputs stay below that.
inline constexpr std::size_t k_max_input_archive_bytes = 950'000'000;

struct CoordinatorOptions {
    std::int64_t lease_ms = 30'000;            // an attempt is lost this long after its last renewal
    std::int64_t worker_timeout_ms = 30'000;   // a worker silent this long gets no new work
    std::int64_t runtime_grace_ms = 30'000;    // beyond max_runtime before the coordinator fails it
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
};

// Who is asking, resolved from a bearer token.
struct Principal {
    Role role = Role::member;
    std::optional<TeamId> team;
    std::optional<WorkerId> worker;
    TokenId token_id{};
};

struct IssuedToken {
    TokenId id{};
    std::string secret; // shown once
    Role role = Role::member;
    std::optional<TeamId> team;
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
    std::string gpu_model;                // the priciest model in the pool it may land on ("" for CPU)
    std::int64_t price_micro_per_hour = 0;
    std::int64_t max_micro = 0;           // price x max_runtime: the hold
    std::int64_t estimate_micro = 0;      // price x median past runtime (or max_runtime)
    std::int64_t runtime_s = 0;           // the runtime the estimate uses
    std::int64_t history_runs = 0;        // past successful runs it is based on (0: max_runtime)
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
    std::int64_t available_micro = 0;                // the team's balance
    std::optional<std::int64_t> budget_room_micro;   // what its budgets still allow, if it has any
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

// A member's own caps (a member token's), what its jobs spent and hold now.
struct MemberBudget {
    TokenId token_id{};
    std::string label;
    std::optional<std::int64_t> day_micro{};
    std::optional<std::int64_t> week_micro{};
    std::int64_t spent_day_micro = 0; // charges of its jobs' attempts that ended in the last 24 hours
    std::int64_t spent_week_micro = 0;
    std::int64_t held_micro = 0; // in escrow for its jobs' running attempts
};

struct CreditsView {
    TeamId team;
    std::string name;
    std::int64_t balance_micro = 0; // available: holds are already out of it
    std::int64_t held_micro = 0;    // in escrow for its running attempts
    std::int64_t settling_micro = 0; // earned by its workers, paid out when the settling period ends
    std::optional<std::int64_t> budget_day_micro;
    std::optional<std::int64_t> budget_week_micro;
    std::int64_t spent_day_micro = 0;
    std::int64_t spent_week_micro = 0;
    std::vector<MemberBudget> members{}; // members with caps of their own
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
    double gpu_hours = 0;          // GPU-hours delivered (runtime x share) by attempts that ran
    std::int64_t attempts = 0;     // attempts that ended on it
    std::int64_t failures = 0;     // of those, lost to the worker (lease expiry, worker fault, ban)
    std::int64_t earned_micro = 0; // charged for attempts on it, less what was voided
    std::int64_t voided = 0;       // attempts whose results an admin voided
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
    std::vector<WorkerId> banned{};   // the worker named, then the siblings when they were banned with it
};

// Which jobs `jobs()` lists: those matching every filter that is set, oldest first; with `limit`,
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

class Coordinator {
public:
    Coordinator(store::Store& store, const Clock& clock, CoordinatorOptions options = {});

    Status start();
    // Whether the store refused a write because another coordinator holds the pool's lease
    // (store::is_fenced): this one must stop serving (the service steps down).
    bool lost_lease() const { return m_fenced; }

    // ---- auth ----
    Result<Principal> authenticate(std::string_view bearer_secret) const;
    bool has_admin() const;
    // Creates the first admin token; refused once an admin exists.
    Result<IssuedToken> init_admin();
    // Creates another admin token whatever exists (the recovery for a lost one; only reachable by
    // whoever can open the database file).
    Result<IssuedToken> recover_admin(const std::string& label = "recovered admin");

    // ---- admin ----
    // The audit log, newest first (admins only). Every admin action below appends to it in the
    // same transaction as the change it records (audit.cpp lists the actions).
    Result<std::vector<store::AuditRecord>> audit_log(const Principal& who, const store::AuditQuery& query);
    // Records an admin action that changes no record (a backup was taken).
    Status record_audit(const Principal& who, const std::string& action, const std::string& target,
                        const std::string& detail_json);
    Result<store::TeamRecord> create_team(const Principal& who, const std::string& name, std::int64_t weight);
    Result<std::vector<store::TeamRecord>> list_teams(const Principal& who) const;
    // role member/admin/enroll; team by name for member and enroll.
    // `uses`: how many workers an enrollment token may register (ignored for other roles); the
    // last registration revokes it.
    Result<IssuedToken> create_token(const Principal& who, Role role, const std::string& team, const std::string& label,
                                     std::int64_t uses = 1);
    Status revoke_token(const Principal& who, TokenId token_id);
    // Admin: tokens (their secrets are never stored), oldest first; `team` narrows to one team's.
    Result<std::vector<store::TokenRecord>> list_tokens(const Principal& who, const std::optional<std::string>& team) const;
    // When a token last authenticated a request since this coordinator started (not durable).
    std::optional<std::int64_t> last_used(TokenId token_id) const;
    Result<std::vector<store::WorkerRecord>> list_workers(const Principal& who) const;
    // How a worker is now: "banned", "drained" (by an admin), "offline" (no heartbeat within the
    // worker timeout, or none since the pool was restored from a backup), "draining" (the worker is shutting down), "paused" (by its owner),
    // "off-hours" (outside its owner's sharing hours), "reclaimed" (its owner uses its GPUs) or "online".
    std::string presence(WorkerId worker) const;
    // Whether the pool was restored from a backup (a `pool.restore` audit record) after the worker's
    // last heartbeat: its attempts in the backup may have ended or moved since; until it reports in it
    // is offline and its attempts are unconfirmed (api::AttemptView::unconfirmed).
    bool unconfirmed(WorkerId worker) const { return m_workers.at(worker).unconfirmed; }
    // What the worker's owner said in its last heartbeat: whether it shares, until when, its terms.
    struct OwnerSays {
        api::SharingState sharing = api::SharingState::sharing;
        std::optional<std::int64_t> changes_at_ms;
        std::optional<api::OwnerTerms> terms;
    };
    OwnerSays owner_says(WorkerId worker) const;
    // Its GPUs whose declared memory clearly is not that of the catalog model they read as
    // ("GPU 0 `H100-80GB` with 24GiB (the catalog's H100-80GB has 80GiB)"): they are priced at
    // that model's rate all the same. Empty when none. Kept with its inventory (not durable).
    const std::string& model_mismatch(WorkerId worker) const;
    std::string team_name(TeamId team) const;
    // Who submitted the job: the label of the token it came with ("token N" for an unlabelled one).
    std::string submitter_of(JobId job) const;
    // A token's label, or "token N" for an unlabelled (or unknown) one.
    std::string token_name(TokenId token_id) const;
    Status set_worker_state(const Principal& who, WorkerId worker, store::WorkerState state);
    // Admin: bans the worker (as set_worker_state) and, with `void_since`, voids every result it
    // reported for attempts that ended at or after that time (lost attempts reported nothing): each
    // is marked voided, its charge and fee go back to the team that paid (from the owner's settling
    // earnings, or from its balance once paid out), and a job whose outcome it was (succeeded or
    // failed) is queued to run again; voided attempts do not count against retry.max_attempts.
    // One transaction. Banning again with an earlier time voids what is left.
    // The ban revokes the enrollment token the worker registered with, which stops new
    // registrations but not the other workers that token registered (its siblings, listed in the
    // answer): with `with_siblings` they are banned too, in the same transaction, each as the named
    // one (their results since `void_since` voided as well).
    Result<Voided> ban_worker(const Principal& who, WorkerId worker, std::optional<std::int64_t> void_since,
                              bool with_siblings = false);
    // The other workers registered with the enrollment token `worker` registered with, by id (none
    // for a worker registered before tokens were recorded).
    std::vector<WorkerId> enrolled_with(WorkerId worker) const;

    // ---- researchers ----
    Result<SubmitResult> submit(const Principal& who, SubmitRequest request);
    Result<store::JobRecord> job(const Principal& who, JobId id) const;
    Result<JobList> jobs(const Principal& who, const JobQuery& query) const;
    std::vector<store::AttemptRecord> attempts_of(JobId id) const;
    // The job an attempt belongs to, with its team and name (for ledger rows); nullptr if unknown.
    const store::JobRecord* job_of_attempt(AttemptId attempt) const;
    Status cancel_job(const Principal& who, JobId id);
    Result<std::int64_t> cancel_sweep(const Principal& who, SweepId sweep_id);
    // Queues jobs that ended failed or cancelled again (`gpupool retry`, retry.cpp): the named jobs
    // (each must be failed or cancelled, else nothing is retried), or a sweep's jobs in the states
    // asked (failed by default). They stay the same jobs: the same ids, their earlier attempts kept,
    // JobRecord::retries one more and a new run of attempts (retry.max_attempts again). Accepted as
    // a new submission of the same jobs would be, by the same checks (check_jobs: inputs still on
    // the coordinator, log cap, feasibility) and the same estimate against the team's balance and
    // budgets and the caller's own (check_funded), unless `allow_unfunded`; credits are held when an
    // attempt is placed, as for any job. Members retry their team's jobs (another team's are not
    // found), admins any one team's. An idempotency key already used by the team returns that retry
    // again. One transaction.
    Result<api::RetryReply> retry(const Principal& who, const api::RetryRequest& request);
    // Logs of the job's latest attempt (or `attempt`), from `offset`.
    Result<LogSlice> read_logs(const Principal& who, JobId id, std::int64_t offset,
                               std::optional<AttemptId> attempt = std::nullopt);
    // The outputs archive of the job's latest attempt; an empty archive for a job that succeeded
    // without one (its worker sends nothing when the job wrote nothing); not_found with the reason
    // otherwise (not run yet, still running, failed or cancelled with none).
    Result<std::string> read_output(const Principal& who, JobId id);
    // Inputs travel as one tar archive per distinct input set, uploaded before the submission that
    // names it (JobSpec::inputs.archive = its SHA-256); workers fetch it for their attempt. An
    // archive belongs to the team that uploaded it (admins name the team) and only that team's
    // jobs can use it.
    Status put_inputs(const Principal& who, const std::string& sha256_hex, const UploadedFile& file,
                      const std::optional<std::string>& team = std::nullopt);
    Result<std::string> read_inputs(const Principal& who, AttemptId attempt);

    // ---- workers ----
    struct Registered {
        WorkerId worker;
        std::string secret; // the worker's own token, shown once
        std::vector<std::string> warnings; // e.g. GPU models missing from the rate catalog
    };
    // `terms`: what its owner allows (each heartbeat says it again).
    Result<Registered> register_worker(const Principal& who, const std::string& name, const api::Inventory& inventory,
                                       const std::optional<api::OwnerTerms>& terms = std::nullopt);
    // `unhealthy_gpus`: indices of GPUs the worker reports as failing (ECC errors, fell off the
    // bus, ...); they get no new work until a later heartbeat reports them healthy again.
    // `draining`: the worker is shutting down and takes no new work (not durable: a draining
    // worker says so in every heartbeat; an admin's drain is the durable kind).
    // `inventory`: what the machine offers now (the registration's shape, validated the same way);
    // sent by a worker after each start, it replaces the stored one when it differs.
    // `sharing` other than `sharing` (its owner paused it, it is outside the owner's hours, the
    // owner uses its GPUs): no new work, running jobs go on; `terms`: only jobs they allow are
    // placed on it (api::OwnerTerms; absent from workers before terms: any job). Neither is durable
    // either: the worker says both in every heartbeat. GPUs in `reclaimed_gpus` are taken as
    // unhealthy ones (no new work there).
    Result<HeartbeatReply> receive_heartbeat(const Principal& who, const api::Heartbeat& beat);
    // The same from its parts (tests): `paused` is SharingState::paused.
    Result<HeartbeatReply> heartbeat(const Principal& who, const std::vector<AttemptId>& running,
                                     const std::vector<std::int64_t>& unhealthy_gpus = {}, bool draining = false,
                                     const api::Inventory* inventory = nullptr, bool paused = false);
    // The worker leaves cleanly (worker_leave.cpp): offline at once (nothing more is placed on it
    // until its next heartbeat), and each attempt assigned to it and not started goes back to the
    // queue without using one of its job's attempts, uncharged, not on the owner's record. Running
    // attempts keep their leases (the worker hands them back itself). Returns those handed back.
    Result<std::vector<AttemptId>> worker_left(const Principal& who);
    // Attempts assigned to this worker and not yet started (re-sent until started).
    Result<std::vector<Assignment>> assignments(const Principal& who) const;
    Status start_attempt(const Principal& who, AttemptId attempt);
    // Several starts from one worker, committed in one transaction: one answer per attempt, in
    // order, as start_attempt would have answered it; a failed write fails the call and takes none.
    Result<std::vector<api::EndAnswer>> start_attempts(const Principal& who, const std::vector<AttemptId>& attempts);
    Result<store::LogAppend> append_log(const Principal& who, AttemptId attempt, std::int64_t offset,
                                        std::string_view data);
    Status upload_output(const Principal& who, AttemptId attempt, const UploadedFile& file);
    // `exit_code` is required for Outcome::exited and ignored otherwise.
    Status complete_attempt(const Principal& who, AttemptId attempt, std::optional<std::int64_t> exit_code,
                            const std::string& reason, Outcome outcome = Outcome::exited);
    // Several ends from one worker, committed in one transaction: one answer per end, in order. An
    // end refused (no longer current, a bad exit code) does not hold back the others; a failed write
    // fails the call and takes none of them.
    Result<std::vector<api::EndAnswer>> complete_attempts(const Principal& who, const std::vector<api::AttemptEnd>& ends);

    // ---- credits ----
    // Admin: mint `amount` from the issuer into a team; at `expires_at` what is left of it (up to
    // the team's positive balance) goes back to the issuer.
    Result<store::GrantRecord> grant(const Principal& who, const std::string& team, std::int64_t amount_micro,
                                     std::optional<std::int64_t> expires_at, const std::string& note);
    // Admin: a signed correction between the issuer and a team; the note is required.
    Result<credits::Entry> adjust(const Principal& who, const std::string& team, std::int64_t amount_micro,
                                  const std::string& note);
    // Admin: spend caps over the last 24 hours and 7 days; nullopt removes one.
    Status set_budget(const Principal& who, const std::string& team, std::optional<std::int64_t> day_micro,
                      std::optional<std::int64_t> week_micro);
    // Admin: changes a team's caps, or one member's (caps within the team's: a member's jobs wait
    // when either is spent). Returns the caps as they are afterwards (`label` set for a member).
    Result<MemberBudget> change_budget(const Principal& who, const BudgetChange& change);
    // Members and workers see their own team; admins name one (`team`).
    Result<CreditsView> credits_of(const Principal& who, const std::optional<std::string>& team,
                                   std::size_t movements = 20) const;
    Result<Report> report(const Principal& who, std::int64_t since_ms) const;
    // One worker's earnings for its owner (worker_earnings.hpp: the sums, the UTC periods, who reads).
    Result<WorkerEarnings> worker_earnings(const Principal& who, WorkerId worker) const;
    Result<Estimate> estimate(const Principal& who, const std::string& source, const std::vector<recipe::JobSpec>& jobs,
                              const std::optional<std::string>& team) const;
    // The history of shared-repository recipes (`gpupool recipe list`): for each (repo, recipe)
    // asked about (the revision is ignored), the successful runs of jobs whose first origin is that
    // recipe, with their median runtime and median cost; only these aggregates leave the
    // coordinator. Whether a repository is public cannot be told from what a job records (its
    // origin names the repository as the client configured it), so a member counts the runs of its
    // own team, and every team's runs only for the repositories the pool names public
    // (CoordinatorOptions::public_recipe_repos): another team's use of a private repository's recipe
    // never shows. Admins count every team's runs. Members and admins only (the route checks).
    std::vector<RecipeHistory> recipe_history(const Principal& who, const std::vector<recipe::Origin>& recipes) const;
    // Micro-credits an attempt has cost: settled when it ended, accrued so far while it runs.
    std::int64_t cost_micro(const store::AttemptRecord& attempt) const;
    std::int64_t held_micro(JobId job) const;
    // The sum of cost_micro over the job's attempts.
    std::int64_t job_cost_micro(JobId job) const;
    const credits::Ledger& ledger() const { return m_ledger; }

    // The pool at a glance (overview.hpp says who sees what).
    Result<PoolOverview> overview(const Principal& who) const;
    // The pool's samples taken at or after `since_ms` (at most the last sample_keep_ms, the newest
    // k_max_samples), for admins and members (SampleSeries says what members get).
    Result<SampleSeries> samples(const Principal& who, std::int64_t since_ms);
    static constexpr std::int64_t k_max_samples = 2'000;

    // ---- monitoring ----
    // The pool's numbers now (metrics.hpp). For the metrics endpoint: no caller check here.
    PoolMetrics metrics() const;
    // Who hears of commits, passes and attempts as they happen (nullptr: nobody). Not owned: it
    // must outlive the coordinator or be unset first.
    void set_events(CoordinatorEvents* events) { m_events = events; }

    // ---- time ----
    // Expires leases and runtimes, then schedules, then records a utilisation sample when one is
    // due. Returns the workers that got new assignments.
    std::vector<WorkerId> tick();
    // The scheduling pass alone, when pass_due(): what a job arriving, a job ending or a worker
    // freeing room triggers at once (the service coalesces them). Returns the workers that got work.
    std::vector<WorkerId> schedule_pass();
    // Whether a scheduling pass could decide anything new: something a pass reads changed since the
    // last one (a job, an attempt's state, a worker's capacity or terms, a team, credits), or the last
    // pass is k_quiet_pass_ms old (fair-share usage decays and queued jobs age). tick() skips the
    // pass otherwise, so an idle or saturated pool costs no passes between events.
    bool pass_due() const;
    static constexpr std::int64_t k_quiet_pass_ms = 5'000;
    // Jobs queued now.
    bool has_queued() const { return !m_queued_jobs.empty(); }
    // Jobs that ended (succeeded, failed, cancelled) since the last call, while tracking is on: the
    // service answers the clients waiting on them (POST /v1/jobs/wait) from this, not by looking.
    void track_ended_jobs(bool on) { m_track_ended = on; }
    std::vector<JobId> take_ended_jobs() { return std::exchange(m_newly_ended, {}); }

    std::size_t job_count() const { return m_jobs.size(); }

    // Why a queued job is not running (empty when it is not queued).
    std::string waiting_reason(JobId id) const;
    // The job's reason as `status` shows it: why a queued job waits, how far an assigned job's model
    // weights have come ("fetching weights (3.2 of 14 GB)"), else the stored reason.
    std::string shown_reason(const store::JobRecord& j) const;

    // A worker as the coordinator keeps it (pool_view.hpp).
    using LiveWorker = coordinator::LiveWorker;

    // Tests: how the scheduler's view, kept up to date change by change, differs from one built
    // from every record now; nullopt when they are the same.
    std::optional<std::string> pool_view_drift();

private:

    Status commit(store::Changes& changes);
    // Remembers a fenced write (lost_lease()).
    void note_store_error(const Error& e);
    // `count` fresh contiguous ids of `kind`, the first returned: from this coordinator's block,
    // reserving another from the store when it runs short.
    Result<std::int64_t> take_ids(store::IdKind kind, std::int64_t count);
    // What commit() reports of `changes` once they are written, read before memory takes them;
    // counts their jobs and ledger entries in m_counters (metrics.cpp).
    struct Noticed {
        std::vector<store::AttemptRecord> ended;
        std::vector<std::pair<std::string, std::int64_t>> placed; // team, ms queued (only with an observer)
    };
    Noticed notice(const store::Changes& changes);
    // Records a utilisation sample when one is due, and prunes those past sample_keep_ms (overview.cpp).
    void record_sample(std::int64_t now);
    // The overview's totals as an admin sees them, without its lists (overview.cpp).
    OverviewTotals pool_totals() const;
    // Appends an audit record of `actor`'s action to `changes` (audit.cpp).
    void audit(std::optional<TokenId> actor, std::string action, std::string target, std::string detail_json,
               store::Changes& changes) const;
    Result<IssuedToken> issue_admin(const std::string& label, const std::string& action);
    OverviewJob overview_job(const store::JobRecord& job) const;
    const store::TokenRecord* token_by_id(TokenId id) const;
    // Log bytes kept for the job's attempts (0: no cap), and how many of them from the start.
    std::int64_t log_cap(const recipe::JobSpec& spec) const;
    static std::int64_t log_head_bytes(std::int64_t cap);
    std::vector<std::string> inventory_warnings(const api::Inventory& inventory) const;
    std::string model_mismatch_of(const api::Inventory& inventory) const; // model_mismatch()'s words
    const std::vector<AttemptId>& attempt_ids_of(JobId job) const; // ascending; empty if none
    void absorb(const store::Changes& changes);
    void record_usage(const store::AttemptRecord& attempt);
    Result<const store::JobRecord*> visible_job(const Principal& who, JobId id) const;
    // The jobs a retry names (none yet for a sweep: retry() picks them) and their one team.
    Result<std::vector<JobId>> retry_selection(const Principal& who, const api::RetryRequest& request,
                                               TeamId& team) const;
    // The jobs of a retry's sweep in the end states it asks for (conflict when there are none).
    Result<std::vector<JobId>> sweep_jobs_to_retry(const api::RetryRequest& request) const;
    // Whether `ids` may be retried: each failed or cancelled, its inputs still kept, and the lot
    // accepted as a submission of the same jobs would be (check_jobs, check_funded).
    Status check_retry(const Principal& who, TeamId team, const std::vector<JobId>& ids, bool allow_unfunded) const;
    Result<store::AttemptRecord*> current_attempt_of_worker(const Principal& who, AttemptId id);
    // Sets m_pass_dirty when `changes` touch what a pass reads (before absorbing them).
    void note_pass_inputs(const store::Changes& changes);
    // A worker's report that `id` started, checked and added to `changes` (start_attempt(s)); a
    // repeated start adds nothing.
    Status stage_start(const Principal& who, AttemptId id, store::Changes& changes);
    // A worker's report that `id` ended, checked and added to `changes` (complete_attempt(s)).
    Status stage_end(const Principal& who, AttemptId id, const api::Completion& done, store::Changes& changes);
    // Keeps what a worker's heartbeat says of its downloads (its assigned attempts only).
    void note_fetching(WorkerId worker, const std::vector<api::FetchProgress>& fetching);
    // Ends `attempt` and moves its job on (queued again, or terminal). Appends to `changes`.
    // Settles its escrow in the same changes: charged unless `chargeable` is false (and never for
    // a lost attempt).
    void end_attempt(store::AttemptRecord& attempt, store::AttemptState state, std::optional<std::int64_t> exit_code,
                     const std::string& reason, store::Changes& changes, bool chargeable = true);
    Result<TeamId> team_named(const std::string& name) const;
    std::int64_t next_entry_id(const store::Changes& changes) const;
    // What the team may still hold now: its balance and, under budgets, what they leave.
    std::int64_t budget_room(TeamId team, std::int64_t now) const;
    // What the team's own caps leave now, whatever the balance; nullopt without caps.
    std::optional<std::int64_t> team_caps_room(TeamId team, std::int64_t now) const;
    // What a member (a token with caps of its own) may still hold now, or nullopt without caps.
    std::optional<std::int64_t> member_room(TokenId token_id, std::int64_t now) const;
    MemberBudget member_budget(const store::TokenRecord& token, std::int64_t now) const;
    // "member `alice` can hold 0.5 credits now (budget 2/day, 1.5 spent or held)"; `placing`: what
    // the member's jobs placed in this pass hold on top of the stored holds.
    std::string member_can_hold(TokenId token_id, std::int64_t left, std::int64_t placing, std::int64_t now) const;
    Result<const store::TokenRecord*> member_token(TeamId team, const std::string& member) const;
    // Attempts of the job's current run (since its latest retry) that used up one of its
    // retry.max_attempts: all but the preempted and the voided ones.
    std::int64_t used_attempts(const store::JobRecord& job) const;
    void pay_out(store::Changes& changes); // earnings whose settling period is over
    // The worker's new state (a ban also revokes its enrollment token and ends its attempts).
    void worker_state_changes(WorkerId worker, store::WorkerState state, store::Changes& changes);
    void void_results(WorkerId worker, std::int64_t since_ms, Voided& out, store::Changes& changes);
    // One worker's part of ban_worker: its results voided, the audit record, the ban (`named`: the
    // worker the admin named, when this one is its sibling).
    void stage_ban(const Principal& who, WorkerId worker, std::optional<std::int64_t> void_since,
                   std::optional<WorkerId> named, Voided& out, store::Changes& changes);
    // Adds (sign +1) or takes back (-1) a worker's GPUs in m_gpu_kinds, and its CPUs and memory in
    // m_worker_cpus / m_worker_memory; a banned worker has none.
    void count_gpu_kinds(const LiveWorker& worker, int sign);
    // Median runtime in seconds of the team's past successful runs of recipe `source`, and how many.
    std::pair<std::int64_t, std::int64_t> history(TeamId team, const std::string& source) const;
    void expire_grants(store::Changes& changes);
    std::int64_t attempt_price(const recipe::JobSpec& spec, WorkerId worker, std::int64_t gpu_index,
                               std::int64_t gpu_milli) const;
    Estimate estimate_for(TeamId team, const std::string& source, const std::vector<recipe::JobSpec>& jobs) const;
    std::optional<std::string> infeasible_reason(const recipe::JobSpec& spec) const;
    // When an active attempt's lease or runtime runs out (m_expiry's key).
    std::int64_t expiry_of(const store::AttemptRecord& a) const;
    // Refuses `jobs` jobs estimated at `est` that the team (or the caller's own member budget) cannot
    // fund; worded for a submission, or for a retry.
    Status check_funded(const Principal& who, TeamId team, const Estimate& est, std::size_t jobs, bool for_retry) const;
    // What a submission's jobs (and a retry's) must be to be accepted: inputs uploaded for the team,
    // a log cap within the pool's, resources some worker has. Errors name `jobs[i]`.
    Status check_jobs(TeamId team, const std::vector<recipe::JobSpec>& jobs) const;
    void expire(store::Changes& changes);

    // ---- the scheduling pass (scheduling.cpp; its input from pool_view.cpp) ----
    // What one pass decides over: the scheduler's view, the queued jobs, admission's plain data.
    struct PassInput {
        sched::ClusterView& view; // the pool view's own, lent to the pass (sched::schedule_in_place)
        const std::vector<sched::JobRequest>& queued; // in queue order (job id)
        sched::Admission admission;
    };
    PassInput pass_input(std::int64_t now);
    // Tells `view` about every live record, as absorb() does change by change.
    void feed(PoolView& view) const;
    void feed_job(PoolView& view, const store::JobRecord& job) const;
    // Attempts of `job` that ended preempted (the preemption cap's count).
    std::int64_t times_preempted(JobId job) const;
    // The workers `job` is kept off after owner_preempt_limit owner preemptions on each, with the
    // time (seconds) until which: from its attempts alone, so a view fed from scratch agrees.
    std::vector<sched::AvoidWorker> owner_avoids(JobId job) const;
    std::vector<WorkerId> place(store::Changes& changes);
    void assign(const sched::PlacementDecision& placement, AttemptId id, std::int64_t now, store::Changes& changes);
    std::string team_can_hold(TeamId team, std::int64_t left, std::int64_t now) const;
    std::string credit_wait_reason(const sched::WaitingJob& waiting, std::int64_t now) const;
    std::string no_worker_reason(std::int64_t now) const;
    // Sets the owner's terms on `live`, resolving team names to ids (a name no team has is dropped).
    void set_terms(LiveWorker& live, std::optional<api::OwnerTerms> terms) const;
    Result<IssuedToken> issue(Role role, std::optional<TeamId> team, std::optional<WorkerId> worker,
                              const std::string& label, store::Changes& changes);

    store::Store& m_store;
    const Clock& m_clock;
    CoordinatorOptions m_options;

    std::map<TeamId, store::TeamRecord> m_teams;
    std::unordered_map<std::string, store::TokenRecord> m_tokens; // by hash
    std::unordered_map<TokenId, std::string> m_token_hash_by_id;
    mutable std::unordered_map<TokenId, std::int64_t> m_token_last_used; // id -> ms (memory only)
    std::map<WorkerId, LiveWorker> m_workers;
    std::map<SweepId, store::SweepRecord> m_sweeps;
    std::map<std::pair<TeamId, std::string>, SweepId> m_sweep_by_key; // (team, idempotency key) -> sweep
    std::map<JobId, store::JobRecord> m_jobs;
    std::map<AttemptId, store::AttemptRecord> m_attempts;
    // Assigned attempts whose worker is downloading their model weights (from heartbeats; not durable).
    std::map<AttemptId, api::FetchProgress> m_fetching;
    std::map<JobId, AttemptId> m_latest_attempt;
    // Indexes that keep the hot paths (scheduling passes, polls, heartbeats, lease expiry) in
    // proportion to the live work rather than to the pool's whole history; kept by absorb().
    std::map<JobId, std::vector<AttemptId>> m_attempts_by_job; // ascending
    std::set<AttemptId> m_active_attempts;                     // assigned or running
    // Active attempts by the time expire() must look at them: the earlier of the lease's end and the
    // end of max_runtime plus grace (expiry_of). A tick walks only those past it, not every attempt.
    std::set<std::pair<std::int64_t, AttemptId>> m_expiry;
    std::set<JobId> m_queued_jobs;
    std::map<WorkerId, std::set<AttemptId>> m_assigned_by_worker; // assigned, not yet started: polls
    std::set<std::pair<std::int64_t, JobId>> m_ended_jobs; // (finished_at, id): the overview's "ended lately"
    // The GPU kinds of the workers that are not banned, (model, memory) -> the catalog's rate per
    // GPU-hour and how many such GPUs: what an estimate's price depends on (a few kinds, however many
    // workers). Kept by absorb(), worker by worker (count_gpu_kinds).
    struct GpuKindCount {
        credits::Micro rate = 0;
        std::int64_t gpus = 0;
    };
    std::map<std::pair<std::string, std::int64_t>, GpuKindCount> m_gpu_kinds;
    // How many workers that are not banned have each CPU amount (milli) and memory size (MiB): the
    // largest worker, for infeasible_reason() at every submission, without walking the fleet.
    std::map<std::int64_t, std::int64_t> m_worker_cpus;
    std::map<std::int64_t, std::int64_t> m_worker_memory;
    // Seconds of every successful attempt by (team, recipe source): history() (estimates at submit).
    std::map<std::pair<TeamId, std::string>, std::vector<std::int64_t>> m_runtimes_by_source;
    std::map<JobId, std::string> m_waiting; // reasons from the last scheduling pass (not durable)
    PoolView m_pool; // the scheduler's view, kept by absorb() and heartbeat()
    // Decayed GPU-seconds per team for fair share; rebuilt from ended attempts on start.
    sched::UsageLedger m_usage;
    credits::Ledger m_ledger;
    std::map<std::int64_t, store::GrantRecord> m_grants;

    PoolCounters m_counters;               // ended attempts, ended jobs and credits, since the pool began
    CoordinatorEvents* m_events = nullptr; // not owned

    // Ids reserved from the store (Store::reserve_ids), a block per kind: [next, end).
    struct IdBlock {
        std::int64_t next = 0;
        std::int64_t end = 0;
    };
    std::array<IdBlock, store::k_id_kinds> m_id_blocks{};
    std::int64_t m_next_sample_at = 0; // the first tick samples
    bool m_fenced = false;
    bool m_track_ended = false;
    std::vector<JobId> m_newly_ended; // see take_ended_jobs()
    bool m_pass_dirty = true;       // see pass_due()
    std::int64_t m_restored_at_ms = 0; // the latest `pool.restore` audit record's time (0: never restored)
    std::int64_t m_last_pass_ms = 0;
};

} // namespace gpupool::coordinator
