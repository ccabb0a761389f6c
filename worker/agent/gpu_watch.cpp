#include "worker/agent/gpu_watch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <limits>

namespace gpupool::worker {

std::optional<std::int64_t> attempt_of_pid(std::int64_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string var;
    const std::string key = "GPUPOOL_ATTEMPT_ID=";
    while (std::getline(in, var, '\0')) {
        if (var.rfind(key, 0) == 0) {
            try {
                return std::stoll(var.substr(key.size()));
            } catch (const std::exception&) {
                return std::nullopt;
            }
        }
    }
    return std::nullopt;
}

Status GpuWatch::discover() {
    auto g = m_probe.list();
    if (!g) {
        return g.error();
    }
    m_gpus = *g;
    m_enforcement = m_gpus.empty() ? MemoryEnforcement::none : m_probe.memory_enforcement();
    return {};
}

std::int64_t GpuWatch::memory_mib(std::int64_t index) const {
    const auto g = std::find_if(m_gpus.begin(), m_gpus.end(), [&](const GpuInfo& x) { return x.index == index; });
    return g != m_gpus.end() ? g->memory_mib : 0;
}

std::vector<Overuse> GpuWatch::overuse(const std::vector<WatchedAttempt>& running) {
    const auto now = m_clock.now_ms();
    if (m_enforcement != MemoryEnforcement::watchdog || now < m_next_watch_ms) {
        return {};
    }
    m_next_watch_ms = now + m_watch_period.count();
    if (running.empty()) {
        return {};
    }
    auto procs = m_probe.processes();
    if (!procs) {
        spdlog::warn("GPU memory watchdog: {}", procs.error().message);
        return {};
    }
    std::vector<GpuUse> uses;
    for (const auto& p : *procs) {
        const auto g = std::find_if(m_gpus.begin(), m_gpus.end(), [&](const GpuInfo& x) { return x.uuid == p.gpu_uuid; });
        if (g != m_gpus.end()) {
            uses.push_back({p.pid, g->index, p.used_mib, attempt_of_pid(p.pid)});
        }
    }
    auto verdict = check_gpu_memory(running, uses);
    for (const auto& u : verdict.unattributed) {
        spdlog::warn("GPU {}: process {} holds {} MiB and names no attempt of this worker", u.gpu_index, u.pid,
                     u.used_mib);
    }
    return std::move(verdict.over);
}

std::optional<std::vector<UnhealthyGpu>> GpuWatch::check_health(bool now_please) {
    const auto now = m_clock.now_ms();
    if (m_gpus.empty() || (!now_please && now < m_next_health_ms)) {
        return std::nullopt;
    }
    m_next_health_ms = now + m_health_period.count();
    auto verdict = assess_gpu_health(m_gpus, m_probe.status());
    if (verdict == m_unhealthy) {
        return std::nullopt;
    }
    for (const auto& u : verdict) {
        if (std::none_of(m_unhealthy.begin(), m_unhealthy.end(), [&](const auto& o) { return o.index == u.index; })) {
            spdlog::warn("GPU {} is unhealthy: {}; it takes no new work and its jobs go back to the queue", u.index,
                         u.reason);
        }
    }
    for (const auto& o : m_unhealthy) {
        if (std::none_of(verdict.begin(), verdict.end(), [&](const auto& u) { return u.index == o.index; })) {
            spdlog::info("GPU {} is healthy again", o.index);
        }
    }
    m_unhealthy = verdict;
    return verdict;
}

} // namespace gpupool::worker
