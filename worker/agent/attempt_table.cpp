#include "worker/agent/attempt_table.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace gpupool::worker {

Attempt& AttemptTable::add(Attempt t) {
    assert(!knows(t.id()));
    const auto id = t.id();
    return m_attempts.insert_or_assign(id, std::move(t)).first->second;
}

Attempt* AttemptTable::find(AttemptId id) {
    auto it = m_attempts.find(id);
    return it == m_attempts.end() ? nullptr : &it->second;
}

const Attempt* AttemptTable::find(AttemptId id) const {
    auto it = m_attempts.find(id);
    return it == m_attempts.end() ? nullptr : &it->second;
}

Attempt& AttemptTable::at(AttemptId id) {
    return m_attempts.at(id);
}

bool AttemptTable::retire(AttemptId id) {
    m_done.insert(id);
    return m_attempts.erase(id) != 0;
}

int AttemptTable::running() const {
    return static_cast<int>(
        std::count_if(m_attempts.begin(), m_attempts.end(), [](const auto& kv) { return kv.second.running(); }));
}

void AttemptTable::models(std::set<std::string>& into) const {
    for (const auto& [id, t] : m_attempts) {
        into.insert(t.a.spec.cache_models.begin(), t.a.spec.cache_models.end());
    }
}

std::vector<RunningJob> AttemptTable::running_jobs(std::int64_t now_ms) const {
    std::vector<RunningJob> out;
    for (const auto& [id, t] : m_attempts) {
        if (t.running()) {
            out.push_back({id.value(), t.a.job.value(), t.a.spec.name,
                           t.a.team_name.empty() ? std::to_string(t.a.team.value()) : t.a.team_name, t.a.spec.image,
                           t.a.gpu_index, t.a.gpu_milli, std::max<std::int64_t>(0, (now_ms - t.started_ms) / 1000),
                           t.stop_reason});
        }
    }
    return out;
}

bool AttemptTable::stop(AttemptId id, const std::string& why, Outcome outcome, std::int64_t kill_at_ms) {
    Attempt& t = at(id);
    if (!t.running() || !t.stop_reason.empty()) {
        return false;
    }
    t.stop_reason = why;
    t.stop_outcome = outcome;
    t.kill_at_ms = kill_at_ms;
    t.unsaved = true;
    return true;
}

void AttemptTable::finish(AttemptId id, std::optional<int> exit_code, std::string reason) {
    Attempt& t = at(id);
    t.phase = AttemptPhase::ended;
    t.exit_code = exit_code;
    t.outcome = t.stop_outcome;
    t.reason = std::move(reason);
    if (t.outcome != Outcome::exited) {
        t.outputs_done = true; // handed back: a later attempt produces the outputs
    }
    t.unsaved = true;
}

void AttemptTable::end_unexited(AttemptId id, Outcome outcome, std::string reason) {
    Attempt& t = at(id);
    t.phase = AttemptPhase::ended;
    t.exit_code.reset();
    t.reason = std::move(reason);
    t.outcome = outcome;
    t.outputs_done = true;
    t.unsaved = true;
}

void AttemptTable::fail(AttemptId id, std::string reason) {
    Attempt& t = at(id);
    t.phase = AttemptPhase::ended;
    t.exit_code = 1;
    t.reason = std::move(reason);
    t.outcome = Outcome::exited;
    t.outputs_done = true;
    t.unsaved = true;
}

void AttemptTable::blame_worker(AttemptId id, std::string reason) {
    Attempt& t = at(id);
    t.outcome = Outcome::worker_fault;
    t.reason = std::move(reason);
    t.outputs_done = true;
    t.unsaved = true;
}

std::vector<AttemptId> AttemptTable::kills_due(std::int64_t now_ms) {
    std::vector<AttemptId> due;
    for (auto& [id, t] : m_attempts) {
        if (t.running() && t.kill_at_ms && now_ms >= *t.kill_at_ms && !t.killed) {
            t.killed = true;
            due.push_back(id);
        }
    }
    return due;
}

void AttemptTable::kill_now(AttemptId id, std::int64_t now_ms) {
    Attempt& t = at(id);
    if (!t.kill_at_ms || *t.kill_at_ms > now_ms) {
        t.kill_at_ms = now_ms;
    }
}

void AttemptTable::hand_back(AttemptId id, std::string why) {
    m_hand_backs.push_back({id, std::move(why)});
}

} // namespace gpupool::worker
