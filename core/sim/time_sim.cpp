#include "core/sim/time_sim.hpp"

#include "core/sched/rng.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
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
    sched::Rng checkpoint_rng(o.seed ^ 0x636b70745f726e67ULL); // its own stream: see GenerateOptions
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
        if (checkpoint_rng.unit() < o.checkpoint_fraction) {
            j.checkpoint_interval_s = std::max<std::int64_t>(1, o.checkpoint_interval_s);
        }
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

namespace {

// One run of the time simulation: the pool as the events leave it, and the figures so far.
class TimeSim {
public:
    TimeSim(const SimCluster& cluster, const std::vector<TimedJob>& jobs, const std::vector<sched::TeamShare>& teams,
            const TimeSimOptions& options)
        : m_cluster(cluster), m_jobs(jobs), m_options(options), m_ledger(options.policy.ordering.half_life_s),
          m_started(jobs.size(), false), m_preempted(jobs.size(), 0),
          m_total_gpu(std::max<double>(1.0, static_cast<double>(cluster.total_gpu_milli))) {
        m_res.jobs = static_cast<std::int64_t>(jobs.size());
        for (const auto& j : jobs) {
            m_remaining.push_back(j.duration_s);
        }
        if (!cluster.workers.empty() && !cluster.workers.front().gpus.empty()) {
            m_typical_gpu = cluster.workers.front().gpus.front();
        }
        m_view.models = cluster.models;
        m_view.workers = cluster.workers;
        for (std::size_t i = 0; i < m_view.workers.size(); ++i) {
            m_worker_index[m_view.workers[i].id.value()] = i;
        }
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            m_job_index[jobs[i].request.id.value()] = i;
        }
        for (const auto& t : teams) {
            m_weight[t.team.value()] = t.weight;
        }
        for (const auto& j : jobs) {
            m_weight.emplace(j.request.team.value(), 1.0);
        }
        for (const auto& [t, w] : m_weight) {
            m_team_results[t] = TeamResult{t, w, 0.0, 0};
        }
        m_t0 = jobs.empty() ? 0 : jobs.front().request.submitted_at;
        m_last_t = m_t0;
        // Utilisation is sampled at evenly spaced times between the first and the last arrival.
        if (!jobs.empty() && options.utilization_samples > 0) {
            const std::int64_t t1 = jobs.back().request.submitted_at;
            const auto n = static_cast<std::int64_t>(options.utilization_samples);
            for (std::int64_t k = 1; k <= n; ++k) {
                m_sample_times.push_back(m_t0 + (t1 - m_t0) * k / n);
            }
        }
    }

    TimeSimResult run() {
        std::int64_t events = 0;
        while (options_allow(events)) {
            auto now = next_event();
            if (!now) {
                break;
            }
            ++events;
            advance_to(*now);
            end_attempts(*now);
            while (m_next_arrival < m_jobs.size() && m_jobs[m_next_arrival].request.submitted_at == *now) {
                m_pending.push_back(m_jobs[m_next_arrival].request);
                ++m_next_arrival;
            }
            if (!m_pending.empty()) {
                schedule_at(*now);
            }
        }
        return figures();
    }

private:
    static std::int64_t gpu_of(const sched::RunningJob& r) {
        return r.gpu_milli * static_cast<std::int64_t>(r.gpu_indices.size());
    }

    bool options_allow(std::int64_t events) const { return m_options.max_events <= 0 || events < m_options.max_events; }

    // The next arrival or attempt end, whichever comes first.
    std::optional<std::int64_t> next_event() const {
        std::optional<std::int64_t> now;
        if (m_next_arrival < m_jobs.size()) {
            now = m_jobs[m_next_arrival].request.submitted_at;
        }
        if (!m_ends.empty() && (!now || std::get<0>(m_ends.top()) < *now)) {
            now = std::get<0>(m_ends.top());
        }
        return now;
    }

    void advance_to(std::int64_t now) {
        while (m_next_sample < m_sample_times.size() && m_sample_times[m_next_sample] < now) {
            m_res.utilization.emplace_back(m_sample_times[m_next_sample],
                                           static_cast<double>(m_allocated) / m_total_gpu);
            ++m_next_sample;
        }
        m_alloc_integral += static_cast<double>(m_allocated) * static_cast<double>(now - m_last_t);
        note_contention(static_cast<double>(now - m_last_t));
        m_last_t = now;
    }

    // The GPUs each team held and had queued since the last event, for fairness under contention.
    void note_contention(double duration_s) {
        if (duration_s <= 0.0) {
            return;
        }
        std::map<std::int64_t, double> queued;
        for (const auto& j : m_pending) {
            if (j.gpus > 0) {
                queued[j.team.value()] += static_cast<double>(sched::milli_on(j, m_typical_gpu) * j.gpus) / 1000.0;
            }
        }
        std::vector<TeamSample> teams;
        for (const auto& [t, w] : m_weight) {
            auto held = m_team_allocated.find(t);
            teams.push_back(TeamSample{t, w, held == m_team_allocated.end() ? 0.0 : held->second / 1000.0, queued[t]});
        }
        m_fairness.add(duration_s, teams);
    }

    void end_attempts(std::int64_t now) {
        while (!m_ends.empty() && std::get<0>(m_ends.top()) == now) {
            const std::int64_t id = std::get<2>(m_ends.top());
            m_ends.pop();
            auto it = m_active.find(id);
            if (it == m_active.end() || it->second.end != now) {
                continue; // stale entry (the attempt was preempted earlier)
            }
            finish(it->second, now, it->second.stopping);
            m_active.erase(it);
        }
    }

    void finish(Active& a, std::int64_t now, bool preempted) {
        sched::Worker& w = m_view.workers[m_worker_index.at(a.run.worker.value())];
        sched::give_back(w, a.run.cpu_milli, a.run.memory_mib, a.run.gpu_indices, a.run.gpu_milli);
        const std::int64_t g = gpu_of(a.run);
        m_allocated -= g;
        m_team_allocated[a.run.team.value()] -= static_cast<double>(g);
        const std::int64_t ran = now - a.run.started_at;
        const double gpu_s = static_cast<double>(g) / 1000.0 * static_cast<double>(ran);
        m_ledger.record(a.run.team, gpu_s, now);
        m_team_results[a.run.team.value()].gpu_seconds += gpu_s;
        m_res.gpu_seconds += gpu_s;
        if (preempted) {
            // A job that checkpoints resumes from its last save: it keeps the whole intervals it ran.
            const std::int64_t every = m_jobs[a.job].checkpoint_interval_s;
            const std::int64_t saved = every > 0 ? ran / every * every : 0;
            m_remaining[a.job] = std::max<std::int64_t>(1, m_remaining[a.job] - saved);
            m_res.lost_gpu_seconds += static_cast<double>(g) / 1000.0 * static_cast<double>(ran - saved);
            if (m_preempted[a.job]++ == 0) {
                ++m_res.preempted_jobs;
            }
            m_res.most_preemptions_of_a_job = std::max(m_res.most_preemptions_of_a_job, m_preempted[a.job]);
            JobRequest again = m_jobs[a.job].request;
            again.submitted_at = now; // requeued: its age restarts, so it cannot outrank its preemptor
            m_pending.push_back(again);
        } else {
            ++m_res.finished;
        }
    }

    // The running attempts and the teams' usage (decayed, plus what is in flight) as of `now`.
    void refresh_view(std::int64_t now) {
        m_view.running.clear();
        for (const auto& [id, a] : m_active) {
            m_view.running.push_back(a.run);
            // The last checkpoint so far of a job that checkpoints: the scheduler weighs what it would lose.
            if (const std::int64_t every = m_jobs[a.job].checkpoint_interval_s; every > 0) {
                m_view.running.back().checkpointed_at = a.run.started_at + (now - a.run.started_at) / every * every;
            }
        }
        std::sort(m_view.running.begin(), m_view.running.end(),
                  [](const sched::RunningJob& a, const sched::RunningJob& b) { return a.job < b.job; });
        std::map<std::int64_t, double> in_flight;
        for (const auto& r : m_view.running) {
            in_flight[r.team.value()] +=
                static_cast<double>(gpu_of(r)) / 1000.0 * static_cast<double>(now - r.started_at);
        }
        m_view.teams.clear();
        for (const auto& [t, w] : m_weight) {
            m_view.teams.push_back(sched::TeamShare{TeamId(t), w, m_ledger.usage(TeamId(t), now) + in_flight[t]});
        }
    }

    void schedule_at(std::int64_t now) {
        refresh_view(now);
        sched::Policy policy = m_options.policy;
        policy.seed = m_options.policy.seed + static_cast<std::uint64_t>(m_res.schedule_calls);
        sched::Decisions d = sched::schedule(m_view, m_pending, m_options.admission, policy, now);
        ++m_res.schedule_calls;
        std::unordered_map<std::int64_t, bool> remove;
        for (const auto& p : d.placements) {
            start(p, now);
            remove[p.job.value()] = true;
        }
        for (const auto& p : d.preemptions) {
            preempt(p);
        }
        for (const auto& w : d.waiting) {
            if (w.outcome == sched::PlaceOutcome::infeasible) {
                remove[w.job.value()] = true;
                ++m_res.rejected;
            }
        }
        std::erase_if(m_pending, [&](const JobRequest& j) { return remove.contains(j.id.value()); });
        m_res.end_time = now;
    }

    void start(const sched::PlacementDecision& p, std::int64_t now) {
        const std::size_t ji = m_job_index.at(p.job.value());
        const JobRequest& req = m_jobs[ji].request;
        sched::Worker& w = m_view.workers[m_worker_index.at(p.worker.value())];
        sched::Choice c;
        c.gpus = p.gpus;
        c.milli = p.gpu_milli;
        sched::take(w, req, c);
        Active a;
        a.run.job = p.job;
        a.run.attempt = sched::AttemptId(m_next_attempt++);
        a.run.team = req.team;
        a.run.priority = req.priority;
        a.run.worker = p.worker;
        a.run.gpu_indices = p.gpus;
        a.run.gpu_milli = p.gpu_milli;
        a.run.cpu_milli = req.cpu_milli;
        a.run.memory_mib = req.memory_mib;
        a.run.started_at = now;
        a.run.checkpoints = m_jobs[ji].checkpoint_interval_s > 0;
        a.run.preempted_before = m_preempted[ji];
        a.job = ji;
        a.end = now + m_remaining[ji];
        m_allocated += gpu_of(a.run);
        m_team_allocated[req.team.value()] += static_cast<double>(gpu_of(a.run));
        m_ends.emplace(a.end, m_seq++, p.job.value());
        m_active[p.job.value()] = std::move(a);
        if (!m_started[ji]) {
            m_started[ji] = true;
            ++m_res.started;
            ++m_team_results[req.team.value()].jobs_started;
            const double delay = static_cast<double>(now - req.submitted_at);
            m_delays.push_back(delay);
            if (req.priority == Priority::high) {
                m_delays_high.push_back(delay);
            }
        }
    }

    void preempt(const sched::PreemptionDecision& p) {
        auto it = m_active.find(p.victim.value());
        if (it == m_active.end() || it->second.stopping) {
            return;
        }
        it->second.stopping = true;
        it->second.run.stopping = true;
        it->second.run.preempted_for = p.for_job;
        it->second.end = p.stop_by;
        m_ends.emplace(p.stop_by, m_seq++, p.victim.value());
        ++m_res.preemptions;
    }

    TimeSimResult figures() {
        const double span = static_cast<double>(m_last_t - m_t0);
        const double total = static_cast<double>(m_cluster.total_gpu_milli);
        m_res.utilization_avg = span > 0.0 && total > 0.0 ? m_alloc_integral / span / total : 0.0;
        m_res.delay_p50_s = percentile(m_delays, 50);
        m_res.delay_p90_s = percentile(m_delays, 90);
        m_res.delay_p99_s = percentile(m_delays, 99);
        m_res.delay_p99_high_s = percentile(m_delays_high, 99);
        std::vector<double> per_weight;
        for (const auto& [t, r] : m_team_results) {
            m_res.teams.push_back(r);
            per_weight.push_back(r.gpu_seconds / (r.weight > 0 ? r.weight : 1.0));
        }
        m_res.jain_index = jain_index(per_weight);
        m_res.contended = m_fairness.result();
        return std::move(m_res);
    }

    const SimCluster& m_cluster;
    const std::vector<TimedJob>& m_jobs;
    const TimeSimOptions& m_options;
    TimeSimResult m_res;
    sched::ClusterView m_view;
    std::unordered_map<std::int64_t, std::size_t> m_worker_index;
    std::unordered_map<std::int64_t, std::size_t> m_job_index;
    std::map<std::int64_t, double> m_weight;
    sched::UsageLedger m_ledger;
    std::map<std::int64_t, TeamResult> m_team_results;
    std::vector<JobRequest> m_pending;
    std::unordered_map<std::int64_t, Active> m_active; // by job id
    EndQueue m_ends;
    std::int64_t m_seq = 0;
    std::int64_t m_next_attempt = 1;
    std::vector<double> m_delays;
    std::vector<double> m_delays_high;
    std::vector<bool> m_started;
    std::vector<std::int64_t> m_remaining;           // run time still to do, per job
    std::vector<std::int64_t> m_preempted;           // times preempted, per job
    std::map<std::int64_t, double> m_team_allocated; // milli-GPU held, per team
    ContendedFairness m_fairness;
    sched::Gpu m_typical_gpu; // converts queued GPU-memory requests into shares
    std::int64_t m_t0 = 0;
    std::int64_t m_allocated = 0; // milli-GPU in use
    double m_alloc_integral = 0.0;
    std::int64_t m_last_t = 0;
    std::size_t m_next_arrival = 0;
    double m_total_gpu = 1.0;
    std::vector<std::int64_t> m_sample_times;
    std::size_t m_next_sample = 0;
};

} // namespace

TimeSimResult run_time_sim(const SimCluster& cluster, const std::vector<TimedJob>& jobs,
                           const std::vector<sched::TeamShare>& teams, const TimeSimOptions& options) {
    return TimeSim(cluster, jobs, teams, options).run();
}

} // namespace gpupool::sim
