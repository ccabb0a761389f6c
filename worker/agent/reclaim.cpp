#include "worker/agent/reclaim.hpp"

#include "core/resources/quantity.hpp"

#include <algorithm>
#include <set>

namespace gpupool::worker {

const char* to_string(ProcessOwner o) {
    switch (o) {
    case ProcessOwner::job:
        return "job";
    case ProcessOwner::foreign:
        return "foreign";
    case ProcessOwner::system:
        return "system";
    case ProcessOwner::unknown:
        return "unknown";
    }
    return "unknown";
}

ReclaimStep Reclaimer::look(const std::vector<std::int64_t>& gpus, const std::optional<std::vector<SeenProcess>>& seen,
                            const std::vector<JobOnGpu>& running, std::int64_t now_ms) {
    ReclaimStep step;
    const std::set<std::int64_t> have(gpus.begin(), gpus.end());
    if (seen) {
        std::map<std::int64_t, std::int64_t> owner_pid; // GPU -> the first foreign pid seen on it now
        for (const auto& p : *seen) {
            if (p.owner == ProcessOwner::foreign && have.count(p.gpu_index) != 0) {
                owner_pid.emplace(p.gpu_index, p.pid);
            }
        }
        for (std::int64_t g : have) {
            const auto used = owner_pid.find(g);
            auto it = m_gpus.find(g);
            if (used != owner_pid.end()) {
                if (it == m_gpus.end()) {
                    const auto jobs = std::count_if(running.begin(), running.end(),
                                                    [&](const JobOnGpu& j) { return j.gpu_index == g; });
                    step.changes.push_back({g, true, used->second, static_cast<std::int64_t>(jobs)});
                }
                m_gpus[g].last_seen_ms = now_ms; // the quiet period starts again
            } else if (it != m_gpus.end() && now_ms - it->second.last_seen_ms >= m_policy.quiet_ms) {
                m_gpus.erase(it);
                step.changes.push_back({g, false, 0, 0});
            }
        }
    }
    // Jobs that ended need no more watching.
    std::erase_if(m_stopping, [&](const auto& kv) {
        return std::none_of(running.begin(), running.end(), [&](const JobOnGpu& j) { return j.attempt == kv.first; });
    });
    for (const auto& j : running) {
        auto it = m_stopping.find(j.attempt);
        if (it == m_stopping.end()) {
            if (j.gpu_index >= 0 && reclaimed(j.gpu_index)) {
                m_stopping[j.attempt] = {now_ms + m_policy.grace_ms, false};
                step.term.push_back(j.attempt);
            }
        } else if (!it->second.killed && now_ms >= it->second.kill_at_ms) {
            it->second.killed = true;
            step.kill.push_back(j.attempt);
        }
    }
    return step;
}

std::vector<std::int64_t> Reclaimer::reclaimed() const {
    std::vector<std::int64_t> out;
    for (const auto& [g, r] : m_gpus) {
        out.push_back(g);
    }
    return out;
}

namespace {

std::string duration(std::int64_t ms) {
    if (ms % 1000 != 0) {
        return std::to_string(ms) + " ms";
    }
    return resources::format_duration_s(ms / 1000);
}

} // namespace

std::string describe(const ReclaimChange& c, const ReclaimPolicy& policy) {
    const std::string gpu = "GPU " + std::to_string(c.gpu_index);
    if (!c.reclaimed) {
        return gpu + " is shared again: none of your processes used it for " + duration(policy.quiet_ms);
    }
    std::string line = gpu + " reclaimed: a process you started (pid " + std::to_string(c.pid) +
                       ") uses it, so the pool gets no new work there; ";
    if (c.jobs == 0) {
        return line + "no job of the pool was running on it";
    }
    const bool one = c.jobs == 1;
    return line + (one ? "the job there gets " : "the " + std::to_string(c.jobs) + " jobs there get ") +
           duration(policy.grace_ms) + " to stop, then " + (one ? "goes" : "go") + " back to the queue (not charged)";
}

} // namespace gpupool::worker
