// JobBook: the pool's work — sweeps, jobs and their attempts — with the indexes that keep the hot
// paths (scheduling passes, polls, heartbeats, lease expiry, the overview) in proportion to the live
// work rather than to the pool's whole history.
//
// It owns the records and every index over them, and changes them in one place only: absorb(),
// called by the coordinator with each change set after the store committed it. Everything else is a
// const read; the coordinator stages new records in a store::Changes from these reads. The one
// memory-only part is the list of jobs that ended since the last take_ended() (the service answers
// clients waiting on them), kept while tracking is on.
//
// The contract: a book that absorbed a sequence of committed changes equals (first_difference) a
// book that absorbed the store's snapshot after them, indexes included. Not thread-safe: the
// coordinator's one thread owns it.
#pragma once

#include "core/sched/cluster.hpp"
#include "core/store/store.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpupool::coordinator {

class JobBook {
public:
    // `runtime_grace_ms`: beyond max_runtime before an attempt is failed (expiry_of).
    explicit JobBook(std::int64_t runtime_grace_ms) : m_runtime_grace_ms(runtime_grace_ms) {}

    // ---- the records ----
    const std::map<SweepId, store::SweepRecord>& sweeps() const { return m_sweeps; }
    const std::map<JobId, store::JobRecord>& jobs() const { return m_jobs; }
    const std::map<AttemptId, store::AttemptRecord>& attempts() const { return m_attempts; }

    // ---- the indexes ----
    // (team, idempotency key) -> the sweep submitted with it.
    const std::map<std::pair<TeamId, std::string>, SweepId>& sweep_by_key() const { return m_sweep_by_key; }
    // Each job's newest attempt.
    const std::map<JobId, AttemptId>& latest_attempt() const { return m_latest_attempt; }
    // Each job's attempts, ascending; attempt_ids_of gives an empty list for a job without any.
    const std::map<JobId, std::vector<AttemptId>>& attempts_by_job() const { return m_attempts_by_job; }
    const std::vector<AttemptId>& attempt_ids_of(JobId job) const;
    // Attempts assigned or running.
    const std::set<AttemptId>& active() const { return m_active; }
    // Active attempts by when expire() must look at them: the earlier of the lease's end and the end
    // of max_runtime plus grace (expiry_of).
    const std::set<std::pair<std::int64_t, AttemptId>>& expiry() const { return m_expiry; }
    std::int64_t expiry_of(const store::AttemptRecord& a) const;
    const std::set<JobId>& queued() const { return m_queued; }
    // Attempts assigned to each worker and not started yet (polls re-send them).
    const std::map<WorkerId, std::set<AttemptId>>& assigned_by_worker() const { return m_assigned_by_worker; }
    // (finished_at, job) of the jobs that ended: the overview's "ended lately".
    const std::set<std::pair<std::int64_t, JobId>>& ended() const { return m_ended; }
    // Seconds of every successful attempt by (team, recipe source): the history estimates use.
    const std::map<std::pair<TeamId, std::string>, std::vector<std::int64_t>>& runtimes_by_source() const {
        return m_runtimes_by_source;
    }

    // ---- one job's attempts ----
    // Copies of its attempts, oldest first.
    std::vector<store::AttemptRecord> attempts_of(JobId job) const;
    // The job an attempt belongs to; nullptr if unknown.
    const store::JobRecord* job_of_attempt(AttemptId attempt) const;
    // Attempts of the job that ended preempted (the preemption cap's count).
    std::int64_t times_preempted(JobId job) const;
    // Attempts of the job's current run (since its latest retry) that used up one of its
    // retry.max_attempts: all but the preempted and the voided ones.
    std::int64_t used_attempts(const store::JobRecord& job) const;
    // The workers the job is kept off after `limit` owner preemptions on each (0: none), with the
    // time (scheduler seconds) until which: `avoid_ms` after the last. From its attempts alone, so
    // that a scheduler's view fed from scratch agrees.
    std::vector<sched::AvoidWorker> owner_avoids(JobId job, std::int64_t limit, std::int64_t avoid_ms) const;

    // ---- staging ----
    // Ends `attempt` (its state, end time `now_ms`, exit code and reason set here) and moves its
    // job on, both appended to `changes`: succeeded and cancelled end the job; failed queues it
    // again when the exit code is one of retry.on_exit_codes and its run has attempts left, else
    // fails it; lost queues it again while attempts are left, else fails it saying so; preempted
    // always queues it again. The attempt's settlement is the CreditDesk's (stage_settlement).
    void stage_attempt_end(store::AttemptRecord& attempt, store::AttemptState state,
                           std::optional<std::int64_t> exit_code, const std::string& reason, std::int64_t now_ms,
                           store::Changes& changes) const;

    // ---- jobs that ended, for waiting clients (memory only) ----
    void track_ended(bool on) { m_track_ended = on; }
    std::vector<JobId> take_ended() { return std::exchange(m_newly_ended, {}); }

    // ---- learning of commits ----
    void absorb(const store::Changes& changes);
    // The first difference from `rebuilt` (records or an index), in words; nullopt when none.
    std::optional<std::string> first_difference(const JobBook& rebuilt) const;

private:
    void absorb_attempt(const store::AttemptRecord& a);

    std::int64_t m_runtime_grace_ms;
    std::map<SweepId, store::SweepRecord> m_sweeps;
    std::map<std::pair<TeamId, std::string>, SweepId> m_sweep_by_key;
    std::map<JobId, store::JobRecord> m_jobs;
    std::map<AttemptId, store::AttemptRecord> m_attempts;
    std::map<JobId, AttemptId> m_latest_attempt;
    std::map<JobId, std::vector<AttemptId>> m_attempts_by_job;
    std::set<AttemptId> m_active;
    std::set<std::pair<std::int64_t, AttemptId>> m_expiry;
    std::set<JobId> m_queued;
    std::map<WorkerId, std::set<AttemptId>> m_assigned_by_worker;
    std::set<std::pair<std::int64_t, JobId>> m_ended;
    std::map<std::pair<TeamId, std::string>, std::vector<std::int64_t>> m_runtimes_by_source;
    bool m_track_ended = false;
    std::vector<JobId> m_newly_ended;
};

} // namespace gpupool::coordinator
