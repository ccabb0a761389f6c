// Coordinator: the pool's state machine — teams, tokens, workers, jobs and their attempts.
//
// It holds the live state in memory (in its components) and writes every change through the Store
// before returning success (so an acknowledged submit, completion or cancel survives a crash);
// start() rebuilds the state from the Store. It is NOT thread-safe: exactly one owner (the server's
// coordinator thread) calls it, and HTTP handlers hand it commands (see server.hpp). Time comes
// from a util::Clock.
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
// architecture.md, "The coordinator's rooms"), which it lends read-only and changes only through
// commit(); it keeps the transaction, the id blocks, the clock and the scheduling pass. The
// operations are free functions beside it, over the components, commit() and the blob shelf:
// admin_ops.hpp (the first admin, teams, tokens, workers' states), credit_ops.hpp (grants, budgets,
// credits, reports, estimates), job_ops.hpp (what researchers do with jobs: submit, retry, cancel,
// read them, their logs and outputs), worker_ops.hpp (what workers say: registration, heartbeats,
// starts, logs, outputs, ends), overview.hpp and metrics.hpp (what the pool shows); the plain types
// they take and return are in views.hpp.
#pragma once

#include "core/api/inventory.hpp"
#include "core/coordinator/blob_shelf.hpp"
#include "core/coordinator/credit_desk.hpp"
#include "core/coordinator/job_book.hpp"
#include "core/coordinator/metrics.hpp"
#include "core/coordinator/pool_view.hpp"
#include "core/coordinator/spot_checks.hpp"
#include "core/coordinator/token_book.hpp"
#include "core/coordinator/views.hpp"
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
    bool lost_lease() const { return m_fenced || m_blobs.fenced(); }

    // ---- auth ----
    Result<Principal> authenticate(std::string_view bearer_secret) const;

    // ---- the components, and the one way to change them ----
    // Its state, read-only: the teams and tokens (token_book.hpp); the workers, their inventories
    // and what their heartbeats said (worker_roster.hpp); the sweeps, jobs and attempts
    // (job_book.hpp); the ledger, grants, budgets and costs (credit_desk.hpp).
    const TokenBook& tokens() const { return m_tokens; }
    const WorkerRoster& roster() const { return m_roster; }
    const JobBook& job_book() const { return m_job_book; }
    const CreditDesk& credit_desk() const { return m_credits; }
    const CoordinatorOptions& options() const { return m_options; }
    std::int64_t now_ms() const { return m_clock.now_ms(); } // by its clock
    // Why each queued job waits, from the last scheduling pass (not durable; job_ops.hpp's
    // waiting_reason says it for one job).
    const std::map<JobId, std::string>& waiting() const { return m_waiting; }
    // Writes `changes` (records the components staged) in one transaction, then each component and
    // the scheduler's view absorb them: the only way the pool's state changes. A refused write
    // changes nothing in memory (a fenced one sets lost_lease()).
    Status commit(store::Changes& changes);
    // `count` fresh contiguous ids of `kind` for records about to be staged, the first returned:
    // from this coordinator's block, reserving another from the store when it runs short.
    Result<std::int64_t> take_ids(store::IdKind kind, std::int64_t count);
    // Appends an audit record of `actor`'s action, at the clock's now, to `changes` (audit.cpp
    // lists the actions).
    void audit(std::optional<TokenId> actor, std::string action, std::string target, std::string detail_json,
               store::Changes& changes) const;

    // ---- admin ----
    // The audit log, newest first (admins only). Every admin action (admin_ops.hpp, credit_ops.hpp)
    // appends to it in the same transaction as the change it records (audit.cpp lists the actions).
    Result<std::vector<store::AuditRecord>> audit_log(const Principal& who, const store::AuditQuery& query);

    // ---- the store's blobs, and what workers say that is not durable ----
    // Logs, outputs and input archives (blob_shelf.hpp): written straight to the store, no commit().
    BlobShelf& blobs() { return m_blobs; }
    // Which succeeded results are spot-checked (spot_checks.hpp): the draws, not durable.
    SpotDraws& spot_draws() { return m_draws; }
    // What a worker's heartbeats say (health, draining, sharing, its owner's terms, GPU memory in
    // use, model downloads: worker_roster.hpp) is kept in memory only, since each heartbeat says it
    // again, and changes only through these four (worker_ops.cpp calls them): the scheduler's view of
    // the worker follows, and a pass is due when it matters (pass_due()).
    void note_heartbeat(WorkerId worker, const api::Heartbeat& beat, const api::Inventory* inventory);
    void note_registered(WorkerId worker, const std::optional<api::OwnerTerms>& terms); // its stated terms; heard
    void note_started(WorkerId worker, AttemptId attempt); // its download notes for `attempt` end
    void note_left(WorkerId worker);                       // its capacity is gone

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

    // Tests: how the scheduler's view, kept up to date change by change, differs from one built
    // from every record now; nullopt when they are the same.
    std::optional<std::string> pool_view_drift();
    // Tests: the first way a component kept change by change (the TokenBook, the WorkerRoster) differs
    // from one rebuilt from the store's records now, or the scheduler's view from one fed from
    // scratch (pool_view_drift); nullopt when none does. Reads the whole store: tests only.
    std::optional<std::string> drift();

private:
    // Remembers a fenced write (lost_lease()).
    void note_store_error(const Error& e);
    // What commit() reports of `changes` once they are written, read before memory takes them;
    // counts their jobs and ledger entries in m_counters (coordinator.cpp).
    struct Noticed {
        std::vector<store::AttemptRecord> ended;
        std::vector<std::pair<std::string, std::int64_t>> placed; // team, ms queued (only with an observer)
    };
    Noticed notice(const store::Changes& changes);
    // Records a utilisation sample when one is due, and prunes those past sample_keep_ms.
    void record_sample(std::int64_t now);
    void absorb(const store::Changes& changes);
    void record_usage(const store::AttemptRecord& attempt);
    // Sets m_pass_dirty when `changes` touch what a pass reads (before absorbing them).
    void note_pass_inputs(const store::Changes& changes);
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
    BlobShelf m_blobs;     // logs, outputs, input archives (the store's blob tables)
    std::map<JobId, std::string> m_waiting; // reasons from the last scheduling pass (not durable)
    PoolView m_pool; // the scheduler's view, kept by absorb() and heartbeat()
    // Decayed GPU-seconds per team for fair share; rebuilt from ended attempts on start.
    sched::UsageLedger m_usage;

    PoolCounters m_counters;               // ended attempts, ended jobs and credits, since the pool began
    CoordinatorEvents* m_events = nullptr; // not owned
    SpotDraws m_draws;                     // spot checks' sampling (spot_checks.hpp)

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
