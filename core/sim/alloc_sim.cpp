#include "core/sim/alloc_sim.hpp"

#include "core/sched/scorers.hpp"

#include "core/sched/rng.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>
#include <tuple>

namespace gpupool::sim {

using sched::JobRequest;
using sched::ScorerKind;
using sched::Worker;

std::int64_t model_memory_mib(const std::string& model) {
    static const std::map<std::string, std::int64_t> table{
        {"T4", 15109},   {"P100", 16280}, {"V100M16", 16160}, {"V100M32", 32510}, {"A10", 22731},
        {"A100", 81251}, {"H100", 81559}, {"3090", 24268},    {"2080", 11019},    {"P4", 7611}};
    auto it = table.find(model);
    return it == table.end() ? 16384 : it->second;
}

SimCluster build_cluster(const std::vector<TraceNode>& nodes) {
    SimCluster c;
    std::int64_t id = 0;
    for (const auto& n : nodes) {
        Worker w;
        w.id = sched::WorkerId(++id);
        w.name = n.name;
        w.cpu_milli_total = w.cpu_milli_free = n.cpu_milli;
        w.memory_mib_total = w.memory_mib_free = n.memory_mib;
        const std::uint32_t model = c.models.intern(n.model);
        for (std::int64_t g = 0; g < n.gpus; ++g) {
            w.gpus.push_back(sched::Gpu{model, model_memory_mib(n.model), sched::k_milli_per_gpu});
        }
        c.total_gpu_milli += n.gpus * sched::k_milli_per_gpu;
        c.workers.push_back(std::move(w));
    }
    return c;
}

std::vector<JobRequest> to_requests(const std::vector<TracePod>& pods, sched::ModelCatalog& models, bool no_sharing) {
    std::vector<JobRequest> out;
    out.reserve(pods.size());
    for (std::size_t i = 0; i < pods.size(); ++i) {
        const TracePod& p = pods[i];
        JobRequest r;
        r.id = sched::JobId(static_cast<std::int64_t>(i));
        r.submitted_at = p.creation_time;
        r.gpus = p.num_gpu;
        r.gpu_milli = p.num_gpu > 0 ? p.gpu_milli : 0;
        if (no_sharing && r.gpus > 0) {
            r.gpu_milli = sched::k_milli_per_gpu;
        }
        r.cpu_milli = p.cpu_milli;
        r.memory_mib = p.memory_mib;
        for (const auto& m : p.gpu_spec) {
            if (const std::uint32_t index = models.intern(m); index < sched::ModelCatalog::k_max_models) {
                r.gpu_models |= sched::ModelMask{1} << index;
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

namespace {

std::int64_t gpu_request(const JobRequest& j) {
    return j.gpus * j.gpu_milli;
}

struct CacheEntry {
    std::uint32_t version = 0; // node version + 1 when valid
    double score = 0.0;
};

double cluster_frag_pct(const std::vector<Worker>& workers, const sched::Workload& workload, std::int64_t total) {
    if (workload.total_count == 0 || total == 0) {
        return 0.0;
    }
    std::int64_t sum = 0;
    for (const auto& w : workers) {
        sum += sched::weighted_fragmentation(w, workload);
    }
    return 100.0 * static_cast<double>(sum) / static_cast<double>(workload.total_count) / static_cast<double>(total);
}

} // namespace

AllocRun run_alloc_seed(const SimCluster& cluster, const std::vector<JobRequest>& pods, const sched::Workload& workload,
                        ScorerKind scorer, std::uint64_t seed, double tune_ratio, sched::TieBreak tie_break) {
    AllocRun run;
    run.seed = seed;
    std::vector<Worker> workers = cluster.workers;
    const std::int64_t total = cluster.total_gpu_milli;

    // Workload: shuffled, then tuned up to tune_ratio x the cluster's GPUs with random pods.
    sched::Rng rng(seed);
    std::vector<std::size_t> order(pods.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    rng.shuffle(order);
    std::int64_t requested = 0;
    for (auto i : order) {
        requested += gpu_request(pods[i]);
    }
    const auto target = static_cast<std::int64_t>(std::ceil(tune_ratio * static_cast<double>(total)));
    while (requested < target && !pods.empty()) {
        std::size_t i = static_cast<std::size_t>(rng.uniform(pods.size()));
        order.push_back(i);
        requested += gpu_request(pods[i]);
    }
    run.pods = static_cast<std::int64_t>(order.size());

    // Task types for the score cache: scores do not depend on memory (only the filter does).
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, sched::ModelMask>, std::size_t> type_ids;
    std::vector<std::size_t> type_of(pods.size());
    for (std::size_t i = 0; i < pods.size(); ++i) {
        const auto& p = pods[i];
        auto key = std::tuple(p.cpu_milli, p.gpus, p.gpu_milli, p.gpu_models);
        type_of[i] = type_ids.emplace(key, type_ids.size()).first->second;
    }
    const std::size_t types = type_ids.size();
    // Scorers that do not draw are deterministic in (node state, type): their choices can be cached.
    const bool cached = !sched::scorers().at(scorer.index()).draws;
    std::vector<CacheEntry> cache(cached ? workers.size() * types : 0);
    std::vector<std::uint32_t> version(workers.size(), 0);

    const sched::ScoreScale scale = sched::scale_of(workers);
    sched::Rng ties_rng(seed ^ 0xA5A5A5A5DEADBEEFULL);
    std::int64_t arrived = 0;
    std::int64_t allocated = 0;
    std::size_t next_cp = 0;
    run.alloc_pct.assign(k_checkpoints.size(), 0.0);
    auto record = [&] {
        while (next_cp < k_checkpoints.size() && arrived * 100 >= k_checkpoints[next_cp] * total) {
            run.alloc_pct[next_cp] = 100.0 * static_cast<double>(allocated) / static_cast<double>(total);
            if (k_checkpoints[next_cp] == 100) {
                run.frag_pct_at_100 = cluster_frag_pct(workers, workload, total);
            }
            if (k_checkpoints[next_cp] == 130) {
                run.unallocated_gpus_at_130 =
                    static_cast<double>(total - allocated) / static_cast<double>(sched::k_milli_per_gpu);
            }
            ++next_cp;
        }
    };

    for (auto pi : order) {
        const JobRequest& job = pods[pi];
        arrived += gpu_request(job);
        sched::TieBreaker ties(ties_rng, tie_break);
        std::size_t best = workers.size();
        for (std::size_t n = 0; n < workers.size(); ++n) {
            const Worker& w = workers[n];
            if (!sched::passes_filters(w, job, {})) {
                continue;
            }
            double score = 0.0;
            if (cached) {
                CacheEntry& e = cache[n * types + type_of[pi]];
                if (e.version != version[n] + 1) {
                    e.score = sched::choose_on_worker(w, job, scorer, workload, scale, ties_rng)->score;
                    e.version = version[n] + 1;
                }
                score = e.score;
            } // random: every feasible node scores the same; the GPU is drawn once the node is chosen
            if (ties.offer(score)) {
                best = n;
            }
        }
        if (best < workers.size()) {
            // Deterministic for fgd/bestfit/packing; for random the GPU is drawn again (still uniform).
            auto choice = sched::choose_on_worker(workers[best], job, scorer, workload, scale, ties_rng);
            sched::take(workers[best], job, *choice);
            ++version[best];
            allocated += gpu_request(job);
        } else {
            ++run.unplaced;
        }
        record();
    }
    // Arrivals stop at or just past the last checkpoint; anything not reached gets the final state.
    while (next_cp < k_checkpoints.size()) {
        arrived = std::max(arrived, k_checkpoints[next_cp] * total / 100);
        record();
    }
    return run;
}

AllocSummary run_alloc(const SimCluster& cluster, const std::vector<JobRequest>& pods, const AllocOptions& options) {
    AllocSummary s;
    s.scorer = options.scorer;
    const sched::Workload workload = sched::typical_workload(pods, options.popularity_pct);
    const int seeds = std::max(options.seeds, 1);
    s.runs.resize(static_cast<std::size_t>(seeds));
    auto work = [&](unsigned first, unsigned step) {
        for (auto i = static_cast<std::size_t>(first); i < s.runs.size(); i += step) {
            s.runs[i] = run_alloc_seed(cluster, pods, workload, options.scorer, options.first_seed + i,
                                       options.tune_ratio, options.tie_break);
        }
    };
    const unsigned threads = std::clamp(options.threads, 1U, static_cast<unsigned>(seeds));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) {
        pool.emplace_back(work, t, threads);
    }
    work(0, threads);
    for (auto& t : pool) {
        t.join();
    }
    const double n = static_cast<double>(s.runs.size());
    s.alloc_pct.assign(k_checkpoints.size(), 0.0);
    for (const auto& r : s.runs) {
        for (std::size_t k = 0; k < k_checkpoints.size(); ++k) {
            s.alloc_pct[k] += r.alloc_pct[k] / n;
        }
        s.unallocated_gpus_at_130 += r.unallocated_gpus_at_130 / n;
        s.frag_pct_at_100 += r.frag_pct_at_100 / n;
    }
    if (s.runs.size() > 1) {
        double var = 0.0;
        for (const auto& r : s.runs) {
            double d = r.alloc_pct.back() - s.alloc_pct.back();
            var += d * d;
        }
        s.sd_at_130 = std::sqrt(var / (n - 1.0));
    }
    return s;
}

} // namespace gpupool::sim
