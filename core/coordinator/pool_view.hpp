// PoolView: the scheduler's picture of the pool, kept up to date as records change instead of
// rebuilt from every record for each pass.
//
// The coordinator tells it what changed, in the order the changes were committed: a worker (its
// record, inventory and last heartbeat), a job (queued or not), an attempt (active or ended). A
// pass then asks for the view as of `now`: workers whose heartbeats stopped leave it, the rest keep
// what their running attempts leave free. What depends on the time or on the ledger (fair-share
// usage, credit rooms) is the caller's to add per pass; the membership counts it needs (which
// teams, members and capped sweeps have queued jobs) are kept here.
//
// The contract: after any sequence of changes, refresh(now) gives exactly the view a PoolView fed
// the same records from scratch gives (`Coordinator::pool_view_drift` checks it; the tests drive it
// through random sequences). Model indices stay stable while the catalog has room; a full catalog
// with models no worker has any more asks for a rebuild (needs_rebuild()).
#pragma once

#include "core/api/inventory.hpp"
#include "core/api/owner_terms.hpp"
#include "core/sched/admission.hpp"
#include "core/sched/cluster.hpp"
#include "core/store/records.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpupool::coordinator {

// A worker as the coordinator keeps it: its record, its inventory as the scheduler reads it,
// and what its last heartbeat said.
struct LiveWorker {
    store::WorkerRecord record;
    api::Inventory inventory;
    std::vector<sched::Gpu> gpus;
    std::vector<std::string> gpu_models; // per GPU, for the model catalog
    std::int64_t cpu_milli = 0;
    std::int64_t memory_mib = 0;
    std::int64_t slots = 0;                   // most jobs at once (inventory `slots`); 0 = no cap
    std::vector<std::int64_t> unhealthy_gpus; // from the last heartbeat (not durable)
    bool draining = false;                    // from the last heartbeat (not durable)
    // What its owner said in the last heartbeat (not durable: every heartbeat says it again).
    api::SharingState sharing = api::SharingState::sharing; // anything else takes no new work
    std::optional<std::int64_t> sharing_changes_at_ms;      // when that changes by itself
    std::optional<api::OwnerTerms> terms;                    // what the owner allows, as told
    std::optional<sched::WorkerTerms> placement_terms;       // the same, team names resolved to ids
    // GPU memory in use per GPU of `inventory`, in its order, from the last heartbeat (empty: not
    // reported); for metrics only, never for placement (not durable).
    std::vector<std::int64_t> gpu_memory_used_mib;
    // GPUs whose declared memory clearly is not that of the catalog model they read as, in words
    // ("GPU 0 `H100-80GB` with 24GiB (the catalog's H100-80GB has 80GiB)"): they are priced at that
    // model's rate all the same. "" if none. Kept with its inventory (not durable).
    std::string model_mismatch;
    // Not heard from since the pool was restored from a backup (a `pool.restore` audit record): its
    // attempts in the backup may have ended or moved since (api::AttemptView::unconfirmed), and it
    // offers nothing until it reports in. Derived from the record's last_seen_at and the restore's time.
    bool unconfirmed = false;
    // A heartbeat reached this coordinator since it loaded the worker from the store (at its start,
    // or on taking over from another): until then its sharing state, terms, draining and unhealthy
    // GPUs above are defaults, not what its owner said, and it offers nothing (an owner's terms or
    // pause must not lapse across a coordinator restart). Not durable; true for one built by hand.
    bool heard = true;
};

class PoolView {
public:
    // Workers silent for longer than `worker_timeout_ms` are out of the view.
    explicit PoolView(std::int64_t worker_timeout_ms, sched::ModelCatalog seed = {});

    void set_worker(WorkerId id, const LiveWorker& worker);
    // `queued_since_ms`: when it (re)joined the queue; `submitter`: the token that submitted it;
    // `sweep_cap`: its sweep's max_parallel (0: none); `avoid`: the workers it is kept off and until
    // when (sched::JobRequest::avoid). Ignored unless the job is queued.
    void set_job(const store::JobRecord& job, std::int64_t queued_since_ms, TokenId submitter, std::int64_t sweep_cap,
                 std::vector<sched::AvoidWorker> avoid = {}, std::vector<TeamId> avoid_owners = {});
    // `job`: the attempt's job record (its team, spec and sweep); `preempted`: how many of the job's
    // earlier attempts ended preempted (by the scheduler or by a GPU's owner), for the preemption cap.
    void set_attempt(const store::AttemptRecord& attempt, const store::JobRecord& job, std::int64_t preempted);

    // The view as of `now` (seconds in RunningJob::started_at, as the scheduler counts). Its
    // `teams` are the caller's: set them per pass with set_teams.
    const sched::ClusterView& refresh(std::int64_t now_ms);
    // The same view, to lend to sched::schedule_in_place, which gives it back as it was.
    sched::ClusterView& refresh_for_pass(std::int64_t now_ms) {
        refresh(now_ms);
        return m_view;
    }
    void set_teams(std::vector<sched::TeamShare> teams) { m_view.teams = std::move(teams); }
    const sched::ClusterView& view() const { return m_view; }
    // Queued jobs in queue order (job id), as of the last refresh.
    const std::vector<sched::JobRequest>& queued() const { return m_queued_list; }

    // Admission's counts: attempts active per sweep, and the caps of sweeps with queued jobs.
    const std::map<SweepId, std::int64_t>& sweep_running() const { return m_sweep_running; }
    std::map<SweepId, std::int64_t> sweep_caps() const;
    // Teams and members (submitting tokens) with queued jobs.
    std::vector<TeamId> queued_teams() const;
    std::vector<TokenId> queued_members() const;

    // The catalog filled up while it still names models no worker has: rebuild from the records.
    bool needs_rebuild() const;

private:
    struct WorkerEntry {
        bool offers = false; // active, not draining, sharing (time aside)
        std::int64_t last_seen_ms = 0;
        bool in_view = false;
        std::int64_t view_seen_ms = 0; // its key in m_live_by_seen while in_view
        sched::Worker base; // totals, GPUs with their models, slots: free amounts as if idle
        std::vector<std::int64_t> unhealthy;
        std::vector<std::int64_t> gpu_used; // milli-GPU taken by active attempts, per GPU
        std::int64_t cpu_used = 0;
        std::int64_t memory_used = 0;
        std::int64_t attempts = 0;
    };
    struct Active {
        sched::RunningJob running;
        SweepId sweep{};
    };
    struct Queued {
        sched::JobRequest request;
        std::vector<std::string> models; // the GPU models the spec names
        std::int64_t sweep_cap = 0;
    };

    sched::Worker current(const WorkerEntry& w) const;
    void use(const Active& a, std::int64_t sign);
    static void add_use(WorkerEntry& e, const sched::RunningJob& r, std::int64_t sign);
    void intern_models(WorkerEntry& entry, const LiveWorker& worker);
    void mask(Queued& q) const; // the request's mask over the live models
    void remask_queued();
    void refresh_workers(std::int64_t now_ms);
    void refresh_running();
    // The attempt's entry in the view: none unless it is active on a worker in the view.
    std::optional<sched::RunningJob> running_entry(AttemptId id) const;
    void refresh_queued();
    void count_queued(const Queued& q, int sign);

    std::int64_t m_timeout_ms;
    sched::ClusterView m_view;
    std::vector<std::int64_t> m_model_gpus; // GPUs of known workers per catalog index
    bool m_overflowed = false;              // a model got k_uncatalogued

    std::map<WorkerId, WorkerEntry> m_workers;
    std::unordered_map<WorkerId, std::size_t> m_worker_index; // into m_view.workers
    std::set<WorkerId> m_touched;                              // changed since the last refresh
    // The workers in the view by when they were last seen, oldest first: a refresh drops those past
    // the timeout from the front instead of looking at every worker.
    std::set<std::pair<std::int64_t, WorkerId>> m_live_by_seen;
    bool m_membership_changed = true;
    sched::ModelMask m_live_models = 0;

    std::map<AttemptId, Active> m_active;
    std::map<SweepId, std::int64_t> m_sweep_running;
    // m_view.running (in attempt order) is rebuilt whole when the workers in the view change, and
    // otherwise changed only where attempts changed: a pass after one attempt ended must not copy
    // 40,000 running ones.
    bool m_running_rebuild = true;
    std::set<AttemptId> m_running_dirty; // attempts changed since the last refresh

    std::map<JobId, Queued> m_queued;
    std::vector<sched::JobRequest> m_queued_list;
    bool m_queued_changed = true;
    std::map<TeamId, std::int64_t> m_queued_by_team;
    std::map<TokenId, std::int64_t> m_queued_by_member;
    std::map<SweepId, std::pair<std::int64_t, std::int64_t>> m_queued_by_sweep; // cap, count
};

// The first way two views differ ("worker 3: ..."), or nullopt when they are the same.
std::optional<std::string> first_difference(const PoolView& a, const PoolView& b);

} // namespace gpupool::coordinator
