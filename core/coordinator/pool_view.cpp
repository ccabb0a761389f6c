// What the scheduler sees of the pool for one pass (Coordinator::pass_input): the live workers with
// what their running attempts leave free, the running attempts, the teams' fair-share usage, the
// queued jobs as requests, and the plain data admission needs (credit rooms, prices by GPU model,
// sweeps' caps and running counts). The policy itself is sched::schedule's.
#include "core/coordinator/coordinator.hpp"

#include "core/coordinator/internal.hpp"

#include <algorithm>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

void Coordinator::add_live_workers(sched::ClusterView& view, std::int64_t now) const {
    for (const auto& [id, w] : m_workers) {
        if (w.record.state != WorkerState::active || w.draining || w.paused ||
            now - w.record.last_seen_at > m_options.worker_timeout_ms) {
            continue;
        }
        sched::Worker sw;
        sw.id = id;
        sw.name = w.record.name;
        sw.cpu_milli_total = sw.cpu_milli_free = w.cpu_milli;
        sw.memory_mib_total = sw.memory_mib_free = w.memory_mib;
        if (w.slots > 0) {
            sw.slots_free = w.slots; // less the attempts on it, in add_running
        }
        sw.gpus = w.gpus;
        for (std::size_t g = 0; g < sw.gpus.size(); ++g) {
            sw.gpus[g].model = view.models.intern(w.gpu_models[g]);
            if (std::find(w.unhealthy_gpus.begin(), w.unhealthy_gpus.end(), static_cast<std::int64_t>(g)) !=
                w.unhealthy_gpus.end()) {
                sw.gpus[g].milli_free = 0; // a failing GPU takes no new work
            }
        }
        view.workers.push_back(std::move(sw));
    }
}

void Coordinator::add_running(sched::ClusterView& view, std::map<std::int64_t, std::int64_t>& sweep_running) const {
    std::map<WorkerId, std::size_t> index;
    for (std::size_t i = 0; i < view.workers.size(); ++i) {
        index[view.workers[i].id] = i;
    }
    for (AttemptId id : m_active_attempts) {
        const AttemptRecord& a = m_attempts.at(id);
        const JobRecord& j = m_jobs.at(a.job);
        sweep_running[j.sweep_id]++;
        auto wi = index.find(a.worker);
        if (wi == index.end()) {
            continue;
        }
        sched::Worker& sw = view.workers[wi->second];
        if (sw.slots_free) {
            --*sw.slots_free;
        }
        sw.cpu_milli_free -= j.spec.resources.cpu_milli;
        sw.memory_mib_free -= j.spec.resources.memory_mib;
        if (a.gpu_index >= 0 && static_cast<std::size_t>(a.gpu_index) < sw.gpus.size()) {
            sw.gpus[static_cast<std::size_t>(a.gpu_index)].milli_free -= a.gpu_milli;
        }
        sched::RunningJob r;
        r.job = a.job;
        r.attempt = a.id;
        r.team = j.team;
        r.priority = j.spec.priority;
        r.worker = a.worker;
        if (a.gpu_index >= 0) {
            r.gpu_indices = {static_cast<std::uint32_t>(a.gpu_index)};
        }
        r.gpu_milli = a.gpu_milli;
        r.cpu_milli = j.spec.resources.cpu_milli;
        r.memory_mib = j.spec.resources.memory_mib;
        r.started_at = (a.started_at ? *a.started_at : a.assigned_at) / 1000;
        view.running.push_back(r);
    }
}

void Coordinator::add_queued(PassInput& in, std::int64_t now) const {
    const bool enforce = m_options.credits.enforce;
    if (enforce) {
        in.admission.credits.emplace();
    }
    for (JobId id : m_queued_jobs) {
        const JobRecord& j = m_jobs.at(id);
        // A job re-queued by preemption queues again from when it stopped, so that aging cannot lift
        // it straight back above the job it made room for.
        std::int64_t queued_since = j.created_at;
        if (auto latest = m_latest_attempt.find(id); latest != m_latest_attempt.end()) {
            const AttemptRecord& last = m_attempts.at(latest->second);
            if (last.state == AttemptState::preempted && last.ended_at) {
                queued_since = *last.ended_at;
            }
        }
        sched::JobRequest r = sched::make_request(id, j.team, j.spec, queued_since / 1000, in.view.models);
        const SweepRecord& sweep = m_sweeps.at(j.sweep_id);
        r.sweep = j.sweep_id;
        if (sweep.max_parallel > 0) {
            in.admission.sweep_max_parallel[j.sweep_id] = sweep.max_parallel;
        }
        if (enforce) {
            auto& rooms = *in.admission.credits;
            if (!rooms.team.contains(j.team)) {
                rooms.team[j.team] = budget_room(j.team, now);
            }
            const std::int64_t token = sweep.submitter_token;
            if (!rooms.member.contains(token)) {
                if (auto room = member_room(token, now)) {
                    rooms.member[token] = *room;
                }
            }
            r.member = rooms.member.contains(token) ? token : 0;
        }
        in.queued.push_back(std::move(r));
    }
}

Coordinator::PassInput Coordinator::pass_input(std::int64_t now) const {
    PassInput in;
    add_live_workers(in.view, now);
    add_running(in.view, in.admission.sweep_running);
    for (const auto& [id, t] : m_teams) {
        in.view.teams.push_back({id, static_cast<double>(t.weight), m_usage.usage(id, now / 1000)});
    }
    const auto& rates = m_options.credits.rates;
    in.admission.prices.cpu_micro_per_core_hour = rates.cpu_micro_per_core_hour;
    in.admission.prices.default_gpu_micro_per_hour = rates.default_micro_per_gpu_hour;
    for (std::uint32_t m = 0; m < in.view.models.size(); ++m) {
        in.admission.prices.gpu_micro_per_hour.push_back(rates.gpu_rate(in.view.models.name(m)));
    }
    add_queued(in, now);
    return in;
}

} // namespace gpupool::coordinator
