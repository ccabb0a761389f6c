#include "worker/gpu/idle_guard.hpp"

#include <algorithm>
#include <set>

namespace gpupool::worker {

std::map<std::int64_t, bool> busy_attempts(const std::vector<IdleWatched>& watched,
                                           const std::optional<std::vector<AttributedActivity>>& processes,
                                           const std::map<std::int64_t, bool>& gpu_busy) {
    std::map<std::int64_t, std::vector<std::int64_t>> on_gpu; // GPU index → attempts watched there
    for (const auto& w : watched) {
        on_gpu[w.gpu_index].push_back(w.attempt);
    }
    std::map<std::int64_t, bool> out;
    for (const auto& w : watched) {
        out[w.attempt] = false;
    }
    if (!processes) {
        for (const auto& w : watched) {
            auto g = gpu_busy.find(w.gpu_index);
            out[w.attempt] = g == gpu_busy.end() || g->second; // a GPU the driver did not report: busy
        }
        return out;
    }
    std::set<std::int64_t> all_busy_gpus; // a busy process no attempt there can be charged with
    for (const auto& p : *processes) {
        const bool busy = p.activity.sm_pct > 0 || p.activity.mem_pct > 0;
        if (!busy) {
            continue;
        }
        auto g = on_gpu.find(p.activity.gpu_index);
        if (g == on_gpu.end()) {
            continue; // a GPU with nothing watched
        }
        const auto& here = g->second;
        if (p.attempt && std::find(here.begin(), here.end(), *p.attempt) != here.end()) {
            out[*p.attempt] = true;
        } else if (here.size() == 1 && !p.attempt) {
            out[here.front()] = true;
        } else {
            all_busy_gpus.insert(p.activity.gpu_index);
        }
    }
    for (const auto& w : watched) {
        if (all_busy_gpus.count(w.gpu_index) != 0) {
            out[w.attempt] = true;
        }
    }
    return out;
}

IdleStep IdleGuard::look(std::int64_t now_ms, const std::vector<IdleWatched>& watched,
                         const std::optional<std::map<std::int64_t, bool>>& busy) {
    IdleStep step;
    std::map<std::int64_t, Stretch> next;
    for (const auto& w : watched) {
        if (w.timeout_ms <= 0 || !busy) {
            continue;
        }
        auto verdict = busy->find(w.attempt);
        if (verdict == busy->end() || verdict->second) {
            continue; // busy (or not judged): its idle time starts again
        }
        auto it = m_idle.find(w.attempt);
        Stretch s = it != m_idle.end() ? it->second : Stretch{now_ms, false};
        const std::int64_t idle = now_ms - s.since_ms;
        const std::int64_t warn_before = std::min(m_warn_before_max_ms, w.timeout_ms / 2);
        if (idle >= w.timeout_ms) {
            step.stop.push_back({w.attempt, idle});
            continue; // stopped: forgotten
        }
        if (!s.warned && idle >= w.timeout_ms - warn_before) {
            step.warn.push_back({w.attempt, idle, w.timeout_ms - idle});
            s.warned = true;
        }
        next[w.attempt] = s;
    }
    m_idle = std::move(next);
    return step;
}

std::string idle_reason(std::int64_t idle_ms) {
    if (idle_ms < 60'000) { // a timeout under a minute (tests, or a recipe that asks for one)
        return "idle on its GPU for " + std::to_string(std::max<std::int64_t>(idle_ms / 1000, 0)) + " s";
    }
    return "idle on its GPU for " + std::to_string(idle_ms / 60'000) + " min";
}

} // namespace gpupool::worker
