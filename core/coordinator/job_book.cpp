#include "core/coordinator/job_book.hpp"

#include "core/coordinator/internal.hpp"

#include <algorithm>

namespace gpupool::coordinator {

using namespace gpupool::store;
using detail::counts_as_run;
using detail::is_active;
using detail::run_seconds;

const std::vector<AttemptId>& JobBook::attempt_ids_of(JobId job) const {
    static const std::vector<AttemptId> none;
    auto it = m_attempts_by_job.find(job);
    return it == m_attempts_by_job.end() ? none : it->second;
}

std::vector<AttemptRecord> JobBook::attempts_of(JobId job) const {
    std::vector<AttemptRecord> out;
    for (AttemptId id : attempt_ids_of(job)) {
        out.push_back(m_attempts.at(id));
    }
    return out;
}

const JobRecord* JobBook::job_of_attempt(AttemptId attempt) const {
    auto a = m_attempts.find(attempt);
    if (a == m_attempts.end()) {
        return nullptr;
    }
    auto j = m_jobs.find(a->second.job);
    return j == m_jobs.end() ? nullptr : &j->second;
}

std::int64_t JobBook::times_preempted(JobId job) const {
    std::int64_t n = 0;
    for (AttemptId id : attempt_ids_of(job)) {
        n += m_attempts.at(id).state == AttemptState::preempted ? 1 : 0;
    }
    return n;
}

void JobBook::stage_attempt_end(AttemptRecord& attempt, AttemptState state, std::optional<std::int64_t> exit_code,
                                const std::string& reason, std::int64_t now_ms, Changes& changes) const {
    attempt.state = state;
    attempt.ended_at = now_ms;
    attempt.exit_code = exit_code;
    attempt.reason = reason;
    changes.attempts.push_back(attempt);
    JobRecord job = m_jobs.at(attempt.job);
    job.updated_at = now_ms;
    job.exit_code = exit_code;
    job.reason = reason;
    // Preempted attempts (by the scheduler or the owner) do not use up one of the job's attempts.
    // Only this run's (a job retried with `gpupool retry` starts a new run with all its attempts).
    const bool attempts_left = used_attempts(job) < job.spec.retry.max_attempts;
    switch (state) {
    case AttemptState::succeeded:
        job.state = JobState::succeeded;
        break;
    case AttemptState::cancelled:
        job.state = JobState::cancelled;
        break;
    case AttemptState::failed: {
        const auto& codes = job.spec.retry.on_exit_codes;
        const bool on_code = exit_code && std::find(codes.begin(), codes.end(), *exit_code) != codes.end();
        job.state = (on_code && attempts_left) ? JobState::queued : JobState::failed;
        break;
    }
    case AttemptState::lost:
    case AttemptState::preempted:
        if (state == AttemptState::preempted || attempts_left) {
            job.state = JobState::queued;
        } else {
            job.state = JobState::failed;
            job.reason = reason +
                         "; no attempts left (retry.max_attempts = " + std::to_string(job.spec.retry.max_attempts) +
                         ")";
        }
        break;
    case AttemptState::assigned:
    case AttemptState::running:
        break;
    }
    if (is_terminal(job.state)) {
        job.finished_at = now_ms;
    }
    changes.jobs.push_back(std::move(job));
}

std::int64_t JobBook::used_attempts(const JobRecord& job) const {
    std::int64_t n = 0;
    for (AttemptId id : attempt_ids_of(job.id)) {
        const AttemptRecord& a = m_attempts.at(id);
        n += (a.retry == job.retries && a.state != AttemptState::preempted && !a.voided_at) ? 1 : 0;
    }
    return n;
}

std::vector<sched::AvoidWorker> JobBook::owner_avoids(JobId job, std::int64_t limit, std::int64_t avoid_ms) const {
    std::vector<sched::AvoidWorker> out;
    if (limit <= 0) {
        return out;
    }
    std::map<WorkerId, std::pair<std::int64_t, std::int64_t>> by_worker; // count, last end (ms)
    for (AttemptId id : attempt_ids_of(job)) {
        const AttemptRecord& a = m_attempts.at(id);
        if (detail::preempted_by_owner(a) && a.ended_at) {
            auto& [count, last] = by_worker[a.worker];
            ++count;
            last = std::max(last, *a.ended_at);
        }
    }
    for (const auto& [worker, seen] : by_worker) {
        if (seen.first >= limit) {
            out.push_back({worker, (seen.second + avoid_ms) / 1000}); // the scheduler's seconds
        }
    }
    return out;
}

std::int64_t JobBook::expiry_of(const AttemptRecord& a) const {
    std::int64_t at = a.lease_expires_at;
    if (a.started_at) {
        const auto& spec = m_jobs.at(a.job).spec;
        at = std::min(at, *a.started_at + spec.resources.max_runtime_s * 1000 + m_runtime_grace_ms);
    }
    return at;
}

void JobBook::absorb(const Changes& changes) {
    for (const auto& sw : changes.sweeps) {
        m_sweeps[sw.id] = sw;
        if (!sw.idempotency_key.empty()) {
            m_sweep_by_key[{sw.team, sw.idempotency_key}] = sw.id;
        }
    }
    for (const auto& j : changes.jobs) {
        auto old = m_jobs.find(j.id);
        if (m_track_ended && is_terminal(j.state) && (old == m_jobs.end() || !is_terminal(old->second.state))) {
            m_newly_ended.push_back(j.id);
        }
        if (old != m_jobs.end() && old->second.finished_at) {
            m_ended.erase({*old->second.finished_at, j.id});
        }
        if (j.finished_at) {
            m_ended.insert({*j.finished_at, j.id});
        }
        m_jobs[j.id] = j;
        if (j.state == JobState::queued) {
            m_queued.insert(j.id);
        } else {
            m_queued.erase(j.id);
        }
    }
    for (const auto& a : changes.attempts) {
        absorb_attempt(a);
    }
}

void JobBook::absorb_attempt(const AttemptRecord& a) {
    // The runtimes index: an attempt counts once, from the change that made it a successful run.
    const auto old = m_attempts.find(a.id);
    const bool counted = old != m_attempts.end() && counts_as_run(old->second);
    if (counted != counts_as_run(a)) {
        const JobRecord& j = m_jobs.at(a.job);
        auto& runs = m_runtimes_by_source[{j.team, m_sweeps.at(j.sweep_id).source}];
        if (!counted) {
            runs.push_back(run_seconds(a));
        } else if (auto it = std::find(runs.begin(), runs.end(), run_seconds(old->second)); it != runs.end()) {
            runs.erase(it);
        }
    }
    if (old != m_attempts.end() && is_active(old->second.state)) {
        m_expiry.erase({expiry_of(old->second), a.id});
    }
    if (m_attempts.insert_or_assign(a.id, a).second) {
        auto& ids = m_attempts_by_job[a.job];
        ids.insert(std::upper_bound(ids.begin(), ids.end(), a.id), a.id);
    }
    if (is_active(a.state)) {
        m_active.insert(a.id);
        m_expiry.insert({expiry_of(a), a.id});
    } else {
        m_active.erase(a.id);
    }
    if (a.state == AttemptState::assigned) {
        m_assigned_by_worker[a.worker].insert(a.id);
    } else if (auto mine = m_assigned_by_worker.find(a.worker); mine != m_assigned_by_worker.end()) {
        mine->second.erase(a.id);
        if (mine->second.empty()) {
            m_assigned_by_worker.erase(mine);
        }
    }
    auto& latest = m_latest_attempt[a.job];
    latest = std::max(latest, a.id);
}

namespace {

// The first key of `a` or `b` whose value differs (or that one of them lacks), as "what N".
template <class Map, class Same>
std::optional<std::string> first_key_differing(const char* what, const Map& a, const Map& b, Same same) {
    for (const auto& [key, value] : b) {
        auto it = a.find(key);
        if (it == a.end() || !same(it->second, value)) {
            return std::string(what) + " " + std::to_string(key.value()) + (it == a.end() ? " missing" : " differs");
        }
    }
    if (a.size() != b.size()) {
        return std::string(what) + "s: " + std::to_string(a.size()) + " kept, " + std::to_string(b.size()) +
               " in the store";
    }
    return std::nullopt;
}

// Runtimes are appended as attempts end, a rebuild appends them in id order: compared as multisets,
// and a recipe whose runs all went (voided) as one without any.
std::map<std::pair<TeamId, std::string>, std::vector<std::int64_t>>
sorted_runs(const std::map<std::pair<TeamId, std::string>, std::vector<std::int64_t>>& runs) {
    std::map<std::pair<TeamId, std::string>, std::vector<std::int64_t>> out;
    for (const auto& [key, seconds] : runs) {
        if (!seconds.empty()) {
            auto& sorted = out[key] = seconds;
            std::sort(sorted.begin(), sorted.end());
        }
    }
    return out;
}

} // namespace

std::optional<std::string> JobBook::first_difference(const JobBook& rebuilt) const {
    const auto equal = [](const auto& x, const auto& y) { return x == y; };
    if (auto d = first_key_differing("sweep", m_sweeps, rebuilt.m_sweeps, equal)) {
        return d;
    }
    if (auto d = first_key_differing("job", m_jobs, rebuilt.m_jobs, equal)) {
        return d;
    }
    if (auto d = first_key_differing("attempt", m_attempts, rebuilt.m_attempts, equal)) {
        return d;
    }
    if (auto d = first_key_differing("job's latest attempt", m_latest_attempt, rebuilt.m_latest_attempt, equal)) {
        return d;
    }
    if (auto d = first_key_differing("job's attempt list", m_attempts_by_job, rebuilt.m_attempts_by_job, equal)) {
        return d;
    }
    if (auto d =
            first_key_differing("worker's assigned list", m_assigned_by_worker, rebuilt.m_assigned_by_worker, equal)) {
        return d;
    }
    const std::pair<const char*, bool> indexes[] = {
        {"sweep idempotency keys differ", m_sweep_by_key == rebuilt.m_sweep_by_key},
        {"active attempts differ", m_active == rebuilt.m_active},
        {"expiry index differs", m_expiry == rebuilt.m_expiry},
        {"queued jobs differ", m_queued == rebuilt.m_queued},
        {"ended jobs differ", m_ended == rebuilt.m_ended},
    };
    for (const auto& [words, same] : indexes) {
        if (!same) {
            return std::string(words);
        }
    }
    if (sorted_runs(m_runtimes_by_source) != sorted_runs(rebuilt.m_runtimes_by_source)) {
        return std::string("runtimes by recipe differ");
    }
    return std::nullopt;
}

} // namespace gpupool::coordinator
