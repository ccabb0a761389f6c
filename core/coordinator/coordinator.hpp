// Coordinator: the pool's state machine — teams, tokens, workers, jobs and their attempts.
//
// It owns the live state in memory and writes every change through the Store before returning
// success (so an acknowledged submit, completion or cancel survives a crash); start() rebuilds the
// state from the Store. It is NOT thread-safe: exactly one owner (the server's coordinator thread)
// calls it, and HTTP handlers hand it commands (see server.hpp). Time comes from a util::Clock.
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
// Its state is held by its components (TokenBook, WorkerRoster, JobBook, CreditDesk: docs/
// architecture.md, "The coordinator's rooms"); the plain types it takes and returns are in views.hpp.
#pragma once

#include "core/api/inventory.hpp"
#include "core/api/retry.hpp"
#include "core/api/worker_protocol.hpp"
#include "core/coordinator/credit_desk.hpp"
#include "core/coordinator/job_book.hpp"
#include "core/coordinator/metrics.hpp"
#include "core/coordinator/pool_view.hpp"
#include "core/coordinator/token_book.hpp"
#include "core/coordinator/views.hpp"
#include "core/coordinator/worker_earnings.hpp"
#include "core/coordinator/worker_roster.hpp"
#include "core/util/clock.hpp"

#include <array>
#include <map>
#include <utility>

namespace gpupool::coordinator {

class Coordinator {
public:
    Coordinator(store::Store& store, const util::Clock& clock, CoordinatorOptions options = {});
    // Its components point into its options and at each other: it stays where it was made.
    Coordinator(const Coordinator&) = delete;
    Coordinator& operator=(const Coordinator&) = delete;

    Status start();
    // Whether the store refused a write because another coordinator holds the pool's lease
    // (store::is_fenced): this one must stop serving (the service steps down).
    bool lost_lease() const { return m_fenced; }

    // ---- auth ----
    Result<Principal> authenticate(std::string_view bearer_secret) const;
    // The teams and tokens (token_book.hpp): names, labels, last uses.
    const TokenBook& tokens() const { return m_tokens; }
    // The workers (worker_roster.hpp): records, inventories, what their heartbeats said.
    const WorkerRoster& roster() const { return m_roster; }
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
    Result<std::vector<store::WorkerRecord>> list_workers(const Principal& who) const;
    // How a worker is now: "banned", "drained" (by an admin), "offline" (no heartbeat within the
    // worker timeout, or none since the pool was restored from a backup), "draining" (the worker is shutting down), "paused" (by its owner),
    // "off-hours" (outside its owner's sharing hours), "reclaimed" (its owner uses its GPUs) or "online".
    std::string presence(WorkerId worker) const { return m_roster.presence(worker, m_clock.now_ms()); }
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
    const std::string& model_mismatch(WorkerId worker) const { return m_roster.at(worker).model_mismatch; }
    // Who submitted the job: the label of the token it came with ("token N" for an unlabelled one).
    std::string submitter_of(JobId job) const;
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

    // ---- researchers ----
    Result<SubmitResult> submit(const Principal& who, SubmitRequest request);
    Result<store::JobRecord> job(const Principal& who, JobId id) const;
    Result<JobList> jobs(const Principal& who, const JobQuery& query) const;
    // The job an attempt belongs to, with its team and name (for ledger rows); nullptr if unknown.
    const store::JobRecord* job_of_attempt(AttemptId attempt) const { return m_job_book.job_of_attempt(attempt); }
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
    std::int64_t cost_micro(const store::AttemptRecord& attempt) const {
        return m_credits.cost_micro(attempt, m_clock.now_ms());
    }
    // The sum of cost_micro over the job's attempts.
    std::int64_t job_cost_micro(JobId job) const { return m_credits.job_cost_micro(job, m_clock.now_ms()); }
    const credits::Ledger& ledger() const { return m_credits.ledger(); }
    // The ledger, grants, budgets and costs (credit_desk.hpp).
    const CreditDesk& credit_desk() const { return m_credits; }

    // The pool at a glance (overview.hpp says who sees what).
    Result<PoolOverview> overview(const Principal& who) const {
        return pool_overview(who, m_options.members_see,
                             {m_tokens, m_roster, m_job_book, m_credits, m_waiting, m_clock.now_ms()});
    }
    // The pool's samples taken at or after `since_ms` (at most the last sample_keep_ms, the newest
    // k_max_samples), for admins and members (SampleSeries says what members get).
    Result<SampleSeries> samples(const Principal& who, std::int64_t since_ms);
    static constexpr std::int64_t k_max_samples = 2'000;

    // ---- monitoring ----
    // The pool's numbers now (metrics.hpp). For the metrics endpoint: no caller check here.
    PoolMetrics metrics() const {
        return pool_metrics(m_tokens, m_roster, m_job_book, m_credits, m_counters, m_clock.now_ms());
    }
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
    // Jobs that ended (succeeded, failed, cancelled) since the last call, while tracking is on: the
    // service answers the clients waiting on them (POST /v1/jobs/wait) from this, not by looking.
    void track_ended_jobs(bool on) { m_job_book.track_ended(on); }
    std::vector<JobId> take_ended_jobs() { return m_job_book.take_ended(); }

    // The sweeps, jobs and attempts (job_book.hpp).
    const JobBook& job_book() const { return m_job_book; }

    // Why a queued job is not running (empty when it is not queued).
    std::string waiting_reason(JobId id) const;
    // The job's reason as `status` shows it: why a queued job waits, how far an assigned job's model
    // weights have come ("fetching weights (3.2 of 14 GB)"), else the stored reason.
    std::string shown_reason(const store::JobRecord& j) const;

    // Tests: how the scheduler's view, kept up to date change by change, differs from one built
    // from every record now; nullopt when they are the same.
    std::optional<std::string> pool_view_drift();
    // Tests: the first way a component kept change by change (the TokenBook, the WorkerRoster) differs
    // from one rebuilt from the store's records now, or the scheduler's view from one fed from
    // scratch (pool_view_drift); nullopt when none does. Reads the whole store: tests only.
    std::optional<std::string> drift();

private:

    Status commit(store::Changes& changes);
    // Remembers a fenced write (lost_lease()).
    void note_store_error(const Error& e);
    // `count` fresh contiguous ids of `kind`, the first returned: from this coordinator's block,
    // reserving another from the store when it runs short.
    Result<std::int64_t> take_ids(store::IdKind kind, std::int64_t count);
    // What commit() reports of `changes` once they are written, read before memory takes them;
    // counts their jobs and ledger entries in m_counters (coordinator.cpp).
    struct Noticed {
        std::vector<store::AttemptRecord> ended;
        std::vector<std::pair<std::string, std::int64_t>> placed; // team, ms queued (only with an observer)
    };
    Noticed notice(const store::Changes& changes);
    // Records a utilisation sample when one is due, and prunes those past sample_keep_ms.
    void record_sample(std::int64_t now);
    // Appends an audit record of `actor`'s action to `changes` (audit.cpp).
    void audit(std::optional<TokenId> actor, std::string action, std::string target, std::string detail_json,
               store::Changes& changes) const;
    Result<IssuedToken> issue_admin(const std::string& label, const std::string& action);
    // A new token (its id from the block, its record staged in `changes`: token_book.hpp).
    Result<IssuedToken> issue(Role role, std::optional<TeamId> team, std::optional<WorkerId> worker,
                              const std::string& label, store::Changes& changes);
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
    Result<const store::AttemptRecord*> current_attempt_of_worker(const Principal& who, AttemptId id);
    // Sets m_pass_dirty when `changes` touch what a pass reads (before absorbing them).
    void note_pass_inputs(const store::Changes& changes);
    // A worker's report that `id` started, checked and added to `changes` (start_attempt(s)); a
    // repeated start adds nothing.
    Status stage_start(const Principal& who, AttemptId id, store::Changes& changes);
    // A worker's report that `id` ended, checked and added to `changes` (complete_attempt(s)).
    Status stage_end(const Principal& who, AttemptId id, const api::Completion& done, store::Changes& changes);
    // Ends `attempt` and moves its job on (queued again, or terminal). Appends to `changes`.
    // Settles its escrow in the same changes: charged unless `chargeable` is false (and never for
    // a lost attempt).
    void end_attempt(store::AttemptRecord& attempt, store::AttemptState state, std::optional<std::int64_t> exit_code,
                     const std::string& reason, store::Changes& changes, bool chargeable = true);
    // The worker's new state (a ban also revokes its enrollment token and ends its attempts).
    void worker_state_changes(WorkerId worker, store::WorkerState state, store::Changes& changes);
    void void_results(WorkerId worker, std::int64_t since_ms, Voided& out, store::Changes& changes);
    // One worker's part of ban_worker: its results voided, the audit record, the ban (`named`: the
    // worker the admin named, when this one is its sibling).
    void stage_ban(const Principal& who, WorkerId worker, std::optional<std::int64_t> void_since,
                   std::optional<WorkerId> named, Voided& out, store::Changes& changes);
    Estimate estimate_for(TeamId team, const std::string& source, const std::vector<recipe::JobSpec>& jobs) const;
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
    std::vector<WorkerId> place(store::Changes& changes);
    void assign(const sched::PlacementDecision& placement, AttemptId id, std::int64_t now, store::Changes& changes);
    std::string credit_wait_reason(const sched::WaitingJob& waiting, std::int64_t now) const;

    store::Store& m_store;
    const util::Clock& m_clock;
    CoordinatorOptions m_options;

    TokenBook m_tokens;    // teams and tokens
    WorkerRoster m_roster; // workers
    JobBook m_job_book;    // sweeps, jobs, attempts
    CreditDesk m_credits;  // ledger and grants (reads the two above)
    std::map<JobId, std::string> m_waiting; // reasons from the last scheduling pass (not durable)
    PoolView m_pool; // the scheduler's view, kept by absorb() and heartbeat()
    // Decayed GPU-seconds per team for fair share; rebuilt from ended attempts on start.
    sched::UsageLedger m_usage;

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
    bool m_pass_dirty = true;       // see pass_due()
    std::int64_t m_last_pass_ms = 0;
};

} // namespace gpupool::coordinator
