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
// - Authorization: admin tokens may do anything; member tokens act within their team; worker
//   tokens speak only for their worker; enrollment tokens may only register a worker.
#pragma once

#include "core/coordinator/clock.hpp"
#include "core/recipe/recipe.hpp"
#include "core/sched/scheduler.hpp"
#include "core/store/store.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpupool::coordinator {

using store::AttemptId;
using store::JobId;
using store::Role;
using store::TeamId;
using store::WorkerId;

struct CoordinatorOptions {
    std::int64_t lease_ms = 30'000;            // an attempt is lost this long after its last renewal
    std::int64_t worker_timeout_ms = 30'000;   // a worker silent this long gets no new work
    std::int64_t runtime_grace_ms = 30'000;    // beyond max_runtime before the coordinator fails it
    sched::Policy policy;
};

// Who is asking, resolved from a bearer token.
struct Principal {
    Role role = Role::member;
    std::optional<TeamId> team;
    std::optional<WorkerId> worker;
    std::int64_t token_id = 0;
};

struct IssuedToken {
    std::int64_t id = 0;
    std::string secret; // shown once
    Role role = Role::member;
    std::optional<TeamId> team;
};

struct SubmitRequest {
    std::string source; // recipe file name, for humans
    std::int64_t max_parallel = 0;
    std::vector<recipe::JobSpec> jobs;
    std::optional<std::string> team; // admins submit for a named team
};

struct SubmitResult {
    std::int64_t sweep_id = 0;
    std::vector<JobId> jobs;
};

struct Assignment {
    AttemptId attempt;
    JobId job;
    std::int64_t attempt_number = 0; // 1 for the first attempt of the job
    recipe::JobSpec spec;
    std::int64_t gpu_index = -1;
    std::int64_t gpu_milli = 0;
};

struct HeartbeatReply {
    std::vector<AttemptId> stop;      // attempts the worker must stop now (cancelled, lost, over time)
    std::int64_t lease_ms = 0;
};

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

    // ---- auth ----
    Result<Principal> authenticate(std::string_view bearer_secret) const;
    bool has_admin() const;
    // Creates the first admin token; refused once an admin exists.
    Result<IssuedToken> init_admin();

    // ---- admin ----
    Result<store::TeamRecord> create_team(const Principal& who, const std::string& name, std::int64_t weight);
    Result<std::vector<store::TeamRecord>> list_teams(const Principal& who) const;
    // role member/admin/enroll; team by name for member and enroll.
    Result<IssuedToken> create_token(const Principal& who, Role role, const std::string& team, const std::string& label);
    Status revoke_token(const Principal& who, std::int64_t token_id);
    Result<std::vector<store::WorkerRecord>> list_workers(const Principal& who) const;
    Status set_worker_state(const Principal& who, WorkerId worker, store::WorkerState state);

    // ---- researchers ----
    Result<SubmitResult> submit(const Principal& who, SubmitRequest request);
    Result<store::JobRecord> job(const Principal& who, JobId id) const;
    Result<std::vector<store::JobRecord>> jobs(const Principal& who, std::optional<store::JobState> state,
                                               bool all_teams) const;
    std::vector<store::AttemptRecord> attempts_of(JobId id) const;
    Status cancel_job(const Principal& who, JobId id);
    Result<std::int64_t> cancel_sweep(const Principal& who, std::int64_t sweep_id);
    // Logs of the job's latest attempt (or `attempt`), from `offset`.
    Result<LogSlice> read_logs(const Principal& who, JobId id, std::int64_t offset,
                               std::optional<AttemptId> attempt = std::nullopt);
    Result<std::string> read_output(const Principal& who, JobId id);

    // ---- workers ----
    struct Registered {
        WorkerId worker;
        std::string secret; // the worker's own token, shown once
    };
    Result<Registered> register_worker(const Principal& who, const std::string& name, const nlohmann::json& inventory);
    // `unhealthy_gpus`: indices of GPUs the worker reports as failing (ECC errors, fell off the
    // bus, ...); they get no new work until a later heartbeat reports them healthy again.
    // `draining`: the worker is shutting down and takes no new work (not durable: a draining
    // worker says so in every heartbeat; an admin's drain is the durable kind).
    Result<HeartbeatReply> heartbeat(const Principal& who, const std::vector<AttemptId>& running,
                                     const std::vector<std::int64_t>& unhealthy_gpus = {}, bool draining = false);
    // Attempts assigned to this worker and not yet started (re-sent until started).
    Result<std::vector<Assignment>> assignments(const Principal& who) const;
    Status start_attempt(const Principal& who, AttemptId attempt);
    Result<store::LogAppend> append_log(const Principal& who, AttemptId attempt, std::int64_t offset,
                                        std::string_view data);
    Status upload_output(const Principal& who, AttemptId attempt, std::string_view data);
    Status complete_attempt(const Principal& who, AttemptId attempt, std::int64_t exit_code, const std::string& reason);

    // ---- time ----
    // Expires leases and runtimes, then schedules. Returns the workers that got new assignments.
    std::vector<WorkerId> tick();

    std::size_t job_count() const { return m_jobs.size(); }

    // Why a queued job is not running (empty when it is not queued).
    std::string waiting_reason(JobId id) const;

private:
    struct LiveWorker {
        store::WorkerRecord record;
        std::vector<sched::Gpu> gpus;
        std::vector<std::string> gpu_models; // per GPU, for the model catalog
        std::int64_t cpu_milli = 0;
        std::int64_t memory_mib = 0;
        std::vector<std::int64_t> unhealthy_gpus; // from the last heartbeat (not durable)
        bool draining = false;                     // from the last heartbeat (not durable)
    };

    Status commit(store::Changes& changes);
    void absorb(const store::Changes& changes);
    void record_usage(const store::AttemptRecord& attempt);
    Result<const store::JobRecord*> visible_job(const Principal& who, JobId id) const;
    Result<store::AttemptRecord*> current_attempt_of_worker(const Principal& who, AttemptId id);
    // Ends `attempt` and moves its job on (queued again, or terminal). Appends to `changes`.
    void end_attempt(store::AttemptRecord& attempt, store::AttemptState state, std::optional<std::int64_t> exit_code,
                     const std::string& reason, store::Changes& changes);
    std::optional<std::string> infeasible_reason(const recipe::JobSpec& spec) const;
    void expire(store::Changes& changes);
    std::vector<WorkerId> place(store::Changes& changes);
    Result<IssuedToken> issue(Role role, std::optional<TeamId> team, std::optional<WorkerId> worker,
                              const std::string& label, store::Changes& changes);

    store::Store& m_store;
    const Clock& m_clock;
    CoordinatorOptions m_options;

    std::map<TeamId, store::TeamRecord> m_teams;
    std::unordered_map<std::string, store::TokenRecord> m_tokens; // by hash
    std::map<WorkerId, LiveWorker> m_workers;
    std::map<std::int64_t, store::SweepRecord> m_sweeps;
    std::map<JobId, store::JobRecord> m_jobs;
    std::map<AttemptId, store::AttemptRecord> m_attempts;
    std::map<JobId, AttemptId> m_latest_attempt;
    std::map<JobId, std::string> m_waiting; // reasons from the last scheduling pass (not durable)
    // Decayed GPU-seconds per team for fair share; rebuilt from ended attempts on start.
    sched::UsageLedger m_usage;

    std::int64_t m_next_team = 1;
    std::int64_t m_next_token = 1;
    std::int64_t m_next_worker = 1;
    std::int64_t m_next_sweep = 1;
    std::int64_t m_next_job = 1;
    std::int64_t m_next_attempt = 1;
};

} // namespace gpupool::coordinator
