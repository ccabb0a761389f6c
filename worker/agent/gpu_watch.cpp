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
    m_probed = m_gpus.empty() ? MemoryEnforcement::none : m_probe.memory_enforcement();
    m_enforcement = m_probed;
    if (!m_gpus.empty()) {
        if (auto d = m_probe.driver()) {
            m_driver = std::move(*d);
        } else {
            spdlog::warn("the driver's versions are not known ({}): run reports leave them empty", d.error().message);
        }
    }
    return {};
}

void GpuWatch::set_mps(bool running) {
    m_enforcement = running && !m_gpus.empty() ? MemoryEnforcement::mps : m_probed;
}

IdleStep GpuWatch::idle(const std::vector<IdleWatched>& watched) {
    const auto now = m_clock.now_ms();
    if (m_gpus.empty() || now < m_next_idle_ms) {
        return {};
    }
    m_next_idle_ms = now + m_idle_period.count();
    if (watched.empty()) {
        return m_idle.look(now, watched, std::map<std::int64_t, bool>{});
    }
    auto act = m_probe.activity();
    if (!act) {
        spdlog::warn("idle guard: {}", act.error().message);
        return m_idle.look(now, watched, std::nullopt);
    }
    std::map<std::int64_t, bool> gpu_busy;
    for (const auto& u : act->gpus) {
        if (const auto g = index_of(u.uuid)) {
            gpu_busy[*g] = u.util_pct > 0 || u.mem_util_pct > 0;
        }
    }
    std::optional<std::vector<AttributedActivity>> procs;
    if (act->processes) {
        procs.emplace();
        for (const auto& p : *act->processes) {
            procs->push_back({p, attempt_of_pid(p.pid)});
        }
    }
    return m_idle.look(now, watched, busy_attempts(watched, procs, gpu_busy));
}

std::int64_t GpuWatch::memory_mib(std::int64_t index) const {
    const auto g = std::find_if(m_gpus.begin(), m_gpus.end(), [&](const GpuInfo& x) { return x.index == index; });
    return g != m_gpus.end() ? g->memory_mib : 0;
}

std::vector<Overuse> GpuWatch::overuse(const std::vector<WatchedAttempt>& running) {
    const auto now = m_clock.now_ms();
    if (m_enforcement == MemoryEnforcement::none || now < m_next_watch_ms) {
        return {};
    }
    m_next_watch_ms = now + m_watch_period.count();
    if (running.empty()) {
        return {};
    }
    const auto& procs = processes(now);
    if (!procs) {
        spdlog::warn("GPU memory watchdog: {}", procs.error().message);
        return {};
    }
    std::vector<GpuUse> uses;
    for (const auto& p : *procs) {
        const auto g = index_of(p.gpu_uuid);
        if (g && m_foreign.count(p.pid) == 0) { // the owner's memory is not a job's (reclaim deals with it)
            uses.push_back({p.pid, *g, p.used_mib, attempt_of_pid(p.pid)});
        }
    }
    auto verdict = check_gpu_memory(running, uses);
    for (const auto& u : verdict.unattributed) {
        spdlog::warn("GPU {}: process {} holds {} MiB and names no attempt of this worker", u.gpu_index, u.pid,
                     u.used_mib);
    }
    return std::move(verdict.over);
}

namespace {
// "3 min" (whole minutes, rounded to the nearest), or "40 s" under a minute.
std::string minutes_text(std::int64_t ms) {
    return ms < 60'000 ? std::to_string((ms + 500) / 1000) + " s" : std::to_string((ms + 30'000) / 60'000) + " min";
}
} // namespace

GpuJudgement GpuWatch::judge(const std::vector<GpuJob>& jobs) {
    GpuJudgement out;
    std::vector<WatchedAttempt> watched;
    std::vector<IdleWatched> idle_watched;
    for (const auto& j : jobs) {
        if (j.limit_mib > 0) {
            watched.push_back({j.attempt, j.gpu_index, j.limit_mib});
        }
        if (j.idle_timeout_ms > 0) {
            idle_watched.push_back({j.attempt, j.gpu_index, j.idle_timeout_ms});
        }
    }
    for (const auto& o : overuse(watched)) {
        out.stop.emplace_back(o.attempt, "exceeded its GPU memory share: " + std::to_string(o.used_mib) +
                                             " MiB in use, limit " + std::to_string(o.limit_mib) + " MiB");
    }
    const IdleStep step = idle(idle_watched);
    for (const auto& w : step.warn) {
        if (std::none_of(out.stop.begin(), out.stop.end(), [&](const auto& s) { return s.first == w.attempt; })) {
            out.notes.emplace_back(w.attempt, "this job has not used its GPU for " + minutes_text(w.idle_ms) +
                                                  "; it will be stopped in " + minutes_text(w.left_ms) +
                                                  " unless it does (resources.idle_timeout)");
        }
    }
    for (const auto& i : step.stop) {
        if (std::none_of(out.stop.begin(), out.stop.end(), [&](const auto& s) { return s.first == i.attempt; })) {
            out.stop.emplace_back(i.attempt, idle_reason(i.idle_ms));
        }
    }
    return out;
}

std::optional<std::int64_t> GpuWatch::index_of(const std::string& uuid) const {
    const auto g = std::find_if(m_gpus.begin(), m_gpus.end(), [&](const GpuInfo& x) { return x.uuid == uuid; });
    return g != m_gpus.end() ? std::optional<std::int64_t>(g->index) : std::nullopt;
}

const Result<std::vector<GpuProcess>>& GpuWatch::processes(std::int64_t now) {
    // Both looks fall due in the same pass of the agent's loop: one query serves them.
    if (!m_processes_ms || now - *m_processes_ms >= std::max<std::int64_t>(m_watch_period.count() / 2, 1)) {
        m_processes = m_probe.processes();
        m_processes_ms = now;
    }
    return m_processes;
}

std::vector<std::int64_t> GpuWatch::memory_used_mib(const std::vector<std::int64_t>& indices) const {
    if (!m_processes_ms || !m_processes) {
        return {};
    }
    std::vector<std::int64_t> out(indices.size(), 0);
    for (const auto& p : *m_processes) {
        const auto g = index_of(p.gpu_uuid);
        const auto at = g ? std::find(indices.begin(), indices.end(), *g) : indices.end();
        if (at != indices.end()) {
            out[static_cast<std::size_t>(at - indices.begin())] += std::max<std::int64_t>(p.used_mib, 0);
        }
    }
    return out;
}

std::vector<std::int64_t> GpuWatch::memory_used_mib_of(const std::vector<api::GpuInventory>& gpus) const {
    std::vector<std::int64_t> indices;
    for (const auto& g : gpus) {
        indices.push_back(g.index);
    }
    return memory_used_mib(indices);
}

ReclaimStep GpuWatch::reclaim(const std::vector<JobMark>& jobs) {
    const auto now = m_clock.now_ms();
    if (m_gpus.empty() || now < m_next_reclaim_ms) {
        return {};
    }
    m_next_reclaim_ms = now + m_watch_period.count();
    std::vector<std::int64_t> indices;
    for (const auto& g : m_gpus) {
        indices.push_back(g.index);
    }
    std::vector<JobOnGpu> running;
    for (const auto& j : jobs) {
        running.push_back({j.attempt, j.gpu_index});
    }
    const auto& procs = processes(now);
    if (!procs) {
        spdlog::warn("looking for the owner's GPU processes: {}", procs.error().message);
        return m_reclaim.look(indices, std::nullopt, running, now);
    }
    std::vector<SeenProcess> seen;
    m_foreign.clear();
    for (const auto& p : *procs) {
        if (const auto g = index_of(p.gpu_uuid)) {
            seen.push_back({*g, p.pid, owner_of_process(m_proc_root, p.pid, jobs)});
            if (seen.back().owner == ProcessOwner::foreign) {
                m_foreign.insert(p.pid);
            }
        }
    }
    auto step = m_reclaim.look(indices, seen, running, now);
    for (const auto& c : step.changes) {
        spdlog::warn("GPU {} {}", c.gpu_index,
                     c.reclaimed ? "reclaimed by its owner (pid " + std::to_string(c.pid) + "): no new work there"
                                 : "free of its owner's processes: offered again");
    }
    return step;
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

std::vector<std::int64_t> GpuWatch::unhealthy_indexes() const {
    std::vector<std::int64_t> out;
    for (const auto& u : m_unhealthy) {
        out.push_back(u.index);
    }
    return out;
}

std::optional<std::string> GpuWatch::failure(std::int64_t index) const {
    for (const auto& u : m_unhealthy) {
        if (u.index == index) {
            return u.reason;
        }
    }
    return std::nullopt;
}

Result<std::unique_ptr<MpsControl>> GpuWatch::start_mps(const std::vector<GpuInfo>& offered, bool runtime_shares_ipc,
                                                        const std::string& runtime_name,
                                                        const std::filesystem::path& work_dir) {
    std::vector<std::string> uuids;
    for (const auto& g : offered) {
        uuids.push_back(g.uuid);
    }
    auto started = start_worker_mps(uuids, runtime_shares_ipc, runtime_name, work_dir);
    if (started) {
        set_mps(true);
        spdlog::info("MPS control daemon running for {} GPU(s); fractional jobs are its clients", uuids.size());
    }
    return started;
}

std::vector<GpuJob> watched_gpu_jobs(const AttemptTable& attempts) {
    std::vector<GpuJob> watched;
    for (const auto& [id, t] : attempts) {
        if (t.running() && t.a.gpu_index >= 0 && t.stop_reason.empty()) {
            watched.push_back({id.value(), t.a.gpu_index, t.gpu_limit_mib, t.a.idle_timeout_s * 1000});
        }
    }
    return watched;
}

} // namespace gpupool::worker
