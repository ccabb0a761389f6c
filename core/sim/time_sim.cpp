#include "core/sim/time_sim.hpp"

#include "core/sched/rng.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <unordered_map>

namespace gpupool::sim {

using sched::JobId;
using sched::JobRequest;
using sched::Priority;
using sched::TeamId;

double jain_index(const std::vector<double>& values) {
    double sum = 0.0;
    double sq = 0.0;
    for (double v : values) {
        sum += v;
        sq += v * v;
    }
    if (values.empty() || sq <= 0.0) {
        return 1.0;
    }
    return sum * sum / (static_cast<double>(values.size()) * sq);
}

GeneratedWorkload generate_workload(const GenerateOptions& o) {
    GeneratedWorkload g;
    const std::uint32_t model = g.cluster.models.intern("GPU80");
    for (int i = 0; i < o.workers; ++i) {
        sched::Worker w;
        w.id = sched::WorkerId(i + 1);
        w.name = "sim-worker-" + std::to_string(i);
        w.cpu_milli_total = w.cpu_milli_free = 96000;
        w.memory_mib_total = w.memory_mib_free = 786432;
        for (int k = 0; k < 8; ++k) {
            w.gpus.push_back(sched::Gpu{model, 81920, sched::k_milli_per_gpu});
        }
        g.cluster.total_gpu_milli += 8 * sched::k_milli_per_gpu;
        g.cluster.workers.push_back(std::move(w));
    }
    for (int t = 0; t < o.teams; ++t) {
        double weight =
            static_cast<std::size_t>(t) < o.team_weights.size() ? o.team_weights[static_cast<std::size_t>(t)] : 1.0;
        g.teams.push_back(sched::TeamShare{TeamId(t + 1), weight, 0.0});
    }
    sched::Rng rng(o.seed);
    // Job mix: (probability, gpus, milli, gpu memory MiB)
    struct Shape {
        double p;
        std::int64_t gpus;
        std::int64_t milli;
        std::int64_t gpu_mem;
    };
    const std::vector<Shape> shapes{{0.20, 1, 250, 0},  {0.15, 1, 500, 0},  {0.10, 1, 0, 24576}, {0.30, 1, 1000, 0},
                                    {0.08, 2, 1000, 0}, {0.05, 4, 1000, 0}, {0.02, 8, 1000, 0},  {0.10, 0, 0, 0}};
    double mean_gpu = 0.0;
    for (const auto& s : shapes) {
        mean_gpu += s.p * (s.gpu_mem > 0 ? 0.3 : static_cast<double>(s.gpus * s.milli) / 1000.0);
    }
    const double cluster_gpus = static_cast<double>(g.cluster.total_gpu_milli) / 1000.0;
    const double rate = o.load * cluster_gpus / (mean_gpu * o.mean_runtime_s); // jobs per second
    double t = 0.0;
    for (std::int64_t i = 0; i < o.jobs; ++i) {
        t += -std::log(1.0 - rng.unit()) / rate;
        double u = rng.unit();
        std::size_t s = 0;
        while (s + 1 < shapes.size() && u >= shapes[s].p) {
            u -= shapes[s].p;
            ++s;
        }
        TimedJob j;
        j.request.id = JobId(i + 1);
        j.request.team = TeamId(static_cast<std::int64_t>(rng.uniform(static_cast<std::uint64_t>(o.teams))) + 1);
        double pu = rng.unit();
        j.request.priority = pu < 0.15 ? Priority::high : pu < 0.75 ? Priority::normal : Priority::low;
        j.request.submitted_at = static_cast<std::int64_t>(t);
        j.request.gpus = shapes[s].gpus;
        j.request.gpu_milli = shapes[s].milli;
        j.request.gpu_memory_mib = shapes[s].gpu_mem;
        j.request.cpu_milli = 4000 * std::max<std::int64_t>(1, shapes[s].gpus);
        j.request.memory_mib = 16384 * std::max<std::int64_t>(1, shapes[s].gpus);
        j.duration_s =
            std::max<std::int64_t>(60, static_cast<std::int64_t>(-std::log(1.0 - rng.unit()) * o.mean_runtime_s));
        g.jobs.push_back(std::move(j));
    }
    return g;
}

std::vector<TimedJob> trace_jobs(const std::vector<TracePod>& pods, sched::ModelCatalog& models) {
    std::vector<TimedJob> out;
    auto requests = to_requests(pods, models, false);
    for (std::size_t i = 0; i < pods.size(); ++i) {
        TimedJob j;
        j.request = requests[i];
        j.request.id = JobId(static_cast<std::int64_t>(i) + 1);
        j.request.team = TeamId(static_cast<std::int64_t>(i % 4) + 1);
        const std::string& q = pods[i].qos;
        j.request.priority = q == "Guaranteed" ? Priority::high : q == "BE" ? Priority::low : Priority::normal;
        j.duration_s = std::max<std::int64_t>(1, pods[i].deletion_time - pods[i].creation_time);
        out.push_back(std::move(j));
    }
    std::stable_sort(out.begin(), out.end(), [](const TimedJob& a, const TimedJob& b) {
        return a.request.submitted_at < b.request.submitted_at;
    });
    return out;
}

namespace {

double percentile(std::vector<double> v, double p) {
    if (v.empty()) {
        return 0.0;
    }
    std::sort(v.begin(), v.end());
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

struct Active {
    sched::RunningJob run;
    std::size_t job = 0; // index into jobs
    std::int64_t end = 0;
    bool stopping = false; // preempted, stops at `end`
};

// Event: (time, sequence) -> job id whose attempt ends
using EndQueue = std::priority_queue<std::tuple<std::int64_t, std::int64_t, std::int64_t>,
                                     std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>, std::greater<>>;

} // namespace

TimeSimResult run_time_sim(const SimCluster& cluster, const std::vector<TimedJob>& jobs,
                           const std::vector<sched::TeamShare>& teams, const TimeSimOptions& options) {
    TimeSimResult res;
    res.jobs = static_cast<std::int64_t>(jobs.size());
    sched::ClusterView view;
    view.models = cluster.models;
    view.workers = cluster.workers;
    std::unordered_map<std::int64_t, std::size_t> worker_index;
    for (std::size_t i = 0; i < view.workers.size(); ++i) {
        worker_index[view.workers[i].id.value()] = i;
    }
    std::unordered_map<std::int64_t, std::size_t> job_index;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        job_index[jobs[i].request.id.value()] = i;
    }
    std::map<std::int64_t, double> weight;
    for (const auto& t : teams) {
        weight[t.team.value()] = t.weight;
    }
    for (const auto& j : jobs) {
        weight.emplace(j.request.team.value(), 1.0);
    }
    sched::UsageLedger ledger(options.policy.ordering.half_life_s);
    std::map<std::int64_t, TeamResult> team_results;
    for (const auto& [t, w] : weight) {
        team_results[t] = TeamResult{t, w, 0.0, 0};
    }

    std::vector<JobRequest> pending;
    std::unordered_map<std::int64_t, Active> active; // by job id
    EndQueue ends;
    std::int64_t seq = 0;
    std::int64_t next_attempt = 1;
    std::vector<double> delays;
    std::vector<double> delays_high;
    std::vector<bool> started(jobs.size(), false);

    const std::int64_t t0 = jobs.empty() ? 0 : jobs.front().request.submitted_at;
    std::int64_t allocated = 0; // milli-GPU in use
    double alloc_integral = 0.0;
    std::int64_t last_t = t0;
    std::size_t next_arrival = 0;
    std::int64_t events = 0;
    const double total_gpu = std::max<double>(1.0, static_cast<double>(cluster.total_gpu_milli));
    // Utilisation is sampled at evenly spaced times between the first and the last arrival.
    std::vector<std::int64_t> sample_times;
    if (!jobs.empty() && options.utilization_samples > 0) {
        const std::int64_t t1 = jobs.back().request.submitted_at;
        const auto n = static_cast<std::int64_t>(options.utilization_samples);
        for (std::int64_t k = 1; k <= n; ++k) {
            sample_times.push_back(t0 + (t1 - t0) * k / n);
        }
    }
    std::size_t next_sample = 0;

    auto gpu_of = [](const sched::RunningJob& r) {
        return r.gpu_milli * static_cast<std::int64_t>(r.gpu_indices.size());
    };
    auto finish = [&](Active& a, std::int64_t now, bool preempted) {
        sched::Worker& w = view.workers[worker_index.at(a.run.worker.value())];
        sched::give_back(w, a.run.cpu_milli, a.run.memory_mib, a.run.gpu_indices, a.run.gpu_milli);
        const std::int64_t g = gpu_of(a.run);
        allocated -= g;
        const double gpu_s = static_cast<double>(g) / 1000.0 * static_cast<double>(now - a.run.started_at);
        ledger.record(a.run.team, gpu_s, now);
        team_results[a.run.team.value()].gpu_seconds += gpu_s;
        if (preempted) {
            res.lost_gpu_seconds += gpu_s;
            JobRequest again = jobs[a.job].request;
            again.submitted_at = now; // requeued: its age restarts, so it cannot outrank its preemptor
            pending.push_back(again);
        } else {
            ++res.finished;
        }
    };

    while (true) {
        if (options.max_events > 0 && events >= options.max_events) {
            break;
        }
        std::int64_t now = 0;
        bool have = false;
        if (next_arrival < jobs.size()) {
            now = jobs[next_arrival].request.submitted_at;
            have = true;
        }
        if (!ends.empty() && (!have || std::get<0>(ends.top()) < now)) {
            now = std::get<0>(ends.top());
            have = true;
        }
        if (!have) {
            break;
        }
        ++events;
        while (next_sample < sample_times.size() && sample_times[next_sample] < now) {
            res.utilization.emplace_back(sample_times[next_sample], static_cast<double>(allocated) / total_gpu);
            ++next_sample;
        }
        alloc_integral += static_cast<double>(allocated) * static_cast<double>(now - last_t);
        last_t = now;
        while (!ends.empty() && std::get<0>(ends.top()) == now) {
            const std::int64_t id = std::get<2>(ends.top());
            ends.pop();
            auto it = active.find(id);
            if (it == active.end() || it->second.end != now) {
                continue; // stale entry (the attempt was preempted earlier)
            }
            finish(it->second, now, it->second.stopping);
            active.erase(it);
        }
        while (next_arrival < jobs.size() && jobs[next_arrival].request.submitted_at == now) {
            pending.push_back(jobs[next_arrival].request);
            ++next_arrival;
        }
        if (pending.empty()) {
            continue;
        }

        view.running.clear();
        for (const auto& [id, a] : active) {
            view.running.push_back(a.run);
        }
        std::sort(view.running.begin(), view.running.end(),
                  [](const sched::RunningJob& a, const sched::RunningJob& b) { return a.job < b.job; });
        std::map<std::int64_t, double> in_flight;
        for (const auto& r : view.running) {
            in_flight[r.team.value()] +=
                static_cast<double>(gpu_of(r)) / 1000.0 * static_cast<double>(now - r.started_at);
        }
        view.teams.clear();
        for (const auto& [t, w] : weight) {
            view.teams.push_back(sched::TeamShare{TeamId(t), w, ledger.usage(TeamId(t), now) + in_flight[t]});
        }

        sched::Policy policy = options.policy;
        policy.seed = options.policy.seed + static_cast<std::uint64_t>(res.schedule_calls);
        sched::Decisions d = sched::schedule(view, pending, options.admission, policy, now);
        ++res.schedule_calls;

        std::unordered_map<std::int64_t, bool> remove;
        for (const auto& p : d.placements) {
            const std::size_t ji = job_index.at(p.job.value());
            const JobRequest& req = jobs[ji].request;
            sched::Worker& w = view.workers[worker_index.at(p.worker.value())];
            sched::Choice c;
            c.gpus = p.gpus;
            c.milli = p.gpu_milli;
            sched::take(w, req, c);
            Active a;
            a.run = sched::RunningJob{p.job,          sched::AttemptId(next_attempt++),
                                      req.team,       req.priority,
                                      p.worker,       p.gpus,
                                      p.gpu_milli,    req.cpu_milli,
                                      req.memory_mib, now,
                                      false,          sched::JobId{}};
            a.job = ji;
            a.end = now + jobs[ji].duration_s;
            allocated += gpu_of(a.run);
            ends.emplace(a.end, seq++, p.job.value());
            active[p.job.value()] = std::move(a);
            remove[p.job.value()] = true;
            if (!started[ji]) {
                started[ji] = true;
                ++res.started;
                ++team_results[req.team.value()].jobs_started;
                const double delay = static_cast<double>(now - req.submitted_at);
                delays.push_back(delay);
                if (req.priority == Priority::high) {
                    delays_high.push_back(delay);
                }
            }
        }
        for (const auto& p : d.preemptions) {
            auto it = active.find(p.victim.value());
            if (it == active.end() || it->second.stopping) {
                continue;
            }
            it->second.stopping = true;
            it->second.run.stopping = true;
            it->second.run.preempted_for = p.for_job;
            it->second.end = p.stop_by;
            ends.emplace(p.stop_by, seq++, p.victim.value());
            ++res.preemptions;
        }
        for (const auto& w : d.waiting) {
            if (w.outcome == sched::PlaceOutcome::infeasible) {
                remove[w.job.value()] = true;
                ++res.rejected;
            }
        }
        std::erase_if(pending, [&](const JobRequest& j) { return remove.contains(j.id.value()); });
        res.end_time = now;
    }
    const double span = static_cast<double>(last_t - t0);
    const double total = static_cast<double>(cluster.total_gpu_milli);
    res.utilization_avg = span > 0.0 && total > 0.0 ? alloc_integral / span / total : 0.0;
    res.delay_p50_s = percentile(delays, 50);
    res.delay_p90_s = percentile(delays, 90);
    res.delay_p99_s = percentile(delays, 99);
    res.delay_p99_high_s = percentile(delays_high, 99);
    std::vector<double> per_weight;
    for (const auto& [t, r] : team_results) {
        res.teams.push_back(r);
        per_weight.push_back(r.gpu_seconds / (r.weight > 0 ? r.weight : 1.0));
    }
    res.jain_index = jain_index(per_weight);
    return res;
}

} // namespace gpupool::sim
