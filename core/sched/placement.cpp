#include "core/sched/placement.hpp"

#include "core/sched/scorers.hpp"

#include "core/resources/quantity.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <ostream>

namespace gpupool::sched {

namespace {

using resources::format_memory_mib;
using resources::format_milli;

std::string cpus(std::int64_t milli) {
    return format_milli(milli) + " CPUs";
}

std::string model_list(const ModelCatalog& models, ModelMask mask) {
    std::string out;
    for (std::uint32_t i = 0; i < models.size(); ++i) {
        if (((mask >> i) & 1U) != 0) {
            out += (out.empty() ? "" : "|") + models.name(i);
        }
    }
    return out;
}

bool gpu_usable(const Gpu& g, const JobRequest& job) {
    const std::int64_t milli = milli_on(job, g);
    return model_allowed(job.gpu_models, g.model) && milli <= g.milli_free &&
           (g.fractional_ok || milli >= k_milli_per_gpu);
}

std::int64_t count_usable(const Worker& w, const JobRequest& job) {
    std::int64_t n = 0;
    for (const auto& g : w.gpus) {
        n += gpu_usable(g, job) ? 1 : 0;
    }
    return n;
}

std::int64_t free_gpu_total(const Worker& w) {
    std::int64_t t = 0;
    for (const auto& g : w.gpus) {
        t += g.milli_free;
    }
    return t;
}

} // namespace

bool is_share(const JobRequest& job) {
    return job.gpus == 1 && (job.gpu_memory_mib > 0 || job.gpu_milli < k_milli_per_gpu);
}

Choice least_fragmenting_share(const Worker& w, const JobRequest& job, const Workload& workload) {
    std::array<GpuSlot, k_max_gpus_per_worker> slots{};
    const std::size_t n = to_slots(w, slots);
    const NodeFragmentation frag(w.cpu_milli_free, std::span<const GpuSlot>(slots.data(), n), workload);
    Choice best;
    bool have = false;
    for (std::uint32_t i = 0; i < w.gpus.size(); ++i) {
        const Gpu& g = w.gpus[i];
        if (!gpu_usable(g, job)) {
            continue;
        }
        bool seen = false; // GPUs in the same state give the same result
        for (std::uint32_t k = 0; k < i && !seen; ++k) {
            const Gpu& o = w.gpus[k];
            seen = o.model == g.model && o.milli_free == g.milli_free && o.memory_mib == g.memory_mib;
        }
        if (seen) {
            continue;
        }
        const std::int64_t m = milli_on(job, g);
        const std::array<std::uint32_t, 1> one{i};
        const std::int64_t delta = frag.after(job.cpu_milli, one, m) - frag.before();
        if (!have || delta < best.frag_delta) {
            best.gpus = {i};
            best.milli = m;
            best.frag_delta = delta;
            have = true;
        }
    }
    return best;
}

std::int64_t frag_delta(const Worker& w, std::int64_t cpu, const std::vector<std::uint32_t>& gpus, std::int64_t milli,
                        const Workload& workload) {
    std::array<GpuSlot, k_max_gpus_per_worker> slots{};
    const std::size_t n = to_slots(w, slots);
    const NodeFragmentation frag(w.cpu_milli_free, std::span<const GpuSlot>(slots.data(), n), workload);
    return frag.after(cpu, gpus, milli) - frag.before();
}

std::vector<std::uint32_t> first_usable(const Worker& w, const JobRequest& job, std::int64_t n) {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < w.gpus.size() && static_cast<std::int64_t>(out.size()) < n; ++i) {
        if (gpu_usable(w.gpus[i], job)) {
            out.push_back(i);
        }
    }
    return out;
}

std::uint32_t tightest_usable(const Worker& w, const JobRequest& job) {
    std::uint32_t best = 0;
    bool have = false;
    for (std::uint32_t i = 0; i < w.gpus.size(); ++i) {
        const Gpu& g = w.gpus[i];
        if (gpu_usable(g, job) &&
            (!have || g.milli_free - milli_on(job, g) < w.gpus[best].milli_free - milli_on(job, w.gpus[best]))) {
            best = i;
            have = true;
        }
    }
    return best;
}

std::uint32_t random_usable(const Worker& w, const JobRequest& job, Rng& rng) {
    std::uint32_t chosen = 0;
    std::uint64_t seen = 0;
    for (std::uint32_t i = 0; i < w.gpus.size(); ++i) {
        if (gpu_usable(w.gpus[i], job)) {
            ++seen;
            if (rng.uniform(seen) == 0) {
                chosen = i;
            }
        }
    }
    return chosen;
}


const char* to_string(ScorerKind kind) {
    return kind.index() < scorers().size() ? scorers()[kind.index()].name.data() : "?";
}

std::ostream& operator<<(std::ostream& os, ScorerKind kind) { return os << to_string(kind); }

const std::vector<std::string>& scorer_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& s : scorers()) {
            out.emplace_back(s.name);
        }
        return out;
    }();
    return names;
}

Result<ScorerKind> parse_scorer(std::string_view name) {
    std::string known;
    for (std::size_t i = 0; i < scorers().size(); ++i) {
        if (name == scorers()[i].name) {
            return ScorerKind(static_cast<std::uint8_t>(i));
        }
        known += (i ? ", " : "") + std::string(scorers()[i].name);
    }
    return make_error(ErrorCode::invalid_input,
                      "unknown placement policy `" + std::string(name) + "` (known: " + known + ")");
}

const char* to_string(PlaceOutcome outcome) {
    switch (outcome) {
    case PlaceOutcome::placed:
        return "placed";
    case PlaceOutcome::not_now:
        return "not_now";
    case PlaceOutcome::infeasible:
        return "infeasible";
    }
    return "?";
}

ScoreScale scale_of(const std::vector<Worker>& workers) {
    ScoreScale s;
    for (const auto& w : workers) {
        s.max_cpu_milli = std::max(s.max_cpu_milli, w.cpu_milli_total);
        s.max_gpu_milli = std::max(s.max_gpu_milli, static_cast<std::int64_t>(w.gpus.size()) * k_milli_per_gpu);
    }
    return s;
}

bool filter_available(const Worker& w) {
    return w.health != WorkerHealth::lost && !w.draining;
}

bool filter_models(const Worker& w, const JobRequest& job) {
    if (job.gpus == 0) {
        return true;
    }
    std::int64_t n = 0;
    for (const auto& g : w.gpus) {
        n += model_allowed(job.gpu_models, g.model) ? 1 : 0;
    }
    return n >= job.gpus;
}

bool filter_gpu(const Worker& w, const JobRequest& job) {
    return job.gpus == 0 || count_usable(w, job) >= job.gpus;
}

bool filter_cpu(const Worker& w, const JobRequest& job) {
    return w.cpu_milli_free >= job.cpu_milli;
}

bool filter_memory(const Worker& w, const JobRequest& job) {
    return w.memory_mib_free >= job.memory_mib;
}

bool filter_owner(const Worker& w, const JobRequest& job, const OwnerPolicy& owner) {
    return (!w.terms || refused_by(*w.terms, job) == TermsRefusal::none) && (!owner || owner(w, job));
}

bool filter_slots(const Worker& w) {
    return !w.slots_free || *w.slots_free > 0;
}

bool filter_avoid(const Worker& w, const JobRequest& job, std::int64_t now) {
    return std::none_of(job.avoid.begin(), job.avoid.end(),
                        [&](const AvoidWorker& a) { return a.worker == w.id && now < a.until; }) &&
           std::find(job.avoid_owners.begin(), job.avoid_owners.end(), w.owner) == job.avoid_owners.end();
}

bool passes_filters(const Worker& w, const JobRequest& job, const OwnerPolicy& owner, std::int64_t now) {
    return filter_available(w) && filter_slots(w) && filter_cpu(w, job) && filter_memory(w, job) &&
           filter_models(w, job) && filter_gpu(w, job) && filter_owner(w, job, owner) && filter_avoid(w, job, now);
}

bool fits_total(const Worker& w, const JobRequest& job) {
    if (w.cpu_milli_total < job.cpu_milli || w.memory_mib_total < job.memory_mib) {
        return false;
    }
    if (job.gpus == 0) {
        return true;
    }
    std::int64_t n = 0;
    for (const auto& g : w.gpus) {
        std::int64_t m = milli_on(job, g);
        n += (model_allowed(job.gpu_models, g.model) && m > 0 && m <= k_milli_per_gpu) ? 1 : 0;
    }
    return n >= job.gpus;
}

std::int64_t bestfit_points(const Worker& w, const JobRequest& job, const ScoreScale& scale) {
    // kube-scheduler BestFit (as in the FGD paper's simulator): left-over CPU and GPU after the job,
    // each normalised by the largest node and weighted 1/2; lower left-over is better.
    const double cpu_left = static_cast<double>(w.cpu_milli_free - job.cpu_milli);
    const double gpu_req = job.gpus == 0 ? 0.0 : static_cast<double>(job.gpus * job.gpu_milli);
    const double gpu_left = static_cast<double>(free_gpu_total(w)) - gpu_req;
    const double left = 0.5 * cpu_left / static_cast<double>(scale.max_cpu_milli) +
                        0.5 * gpu_left / static_cast<double>(scale.max_gpu_milli);
    return static_cast<std::int64_t>((1.0 - left) * 100.0);
}

std::int64_t packing_points(const Worker& w, const std::vector<std::uint32_t>& gpus) {
    std::int64_t fully_free = 0;
    for (const auto& g : w.gpus) {
        fully_free += g.milli_free == k_milli_per_gpu ? 1 : 0;
    }
    if (gpus.empty()) {
        return 0;
    }
    if (fully_free == static_cast<std::int64_t>(w.gpus.size())) { // an empty node: last resort
        return std::max<std::int64_t>(100 / 3 - fully_free, fully_free);
    }
    std::int64_t free_used = 0;
    std::int64_t free_share = 0;
    for (auto i : gpus) {
        free_used += w.gpus[i].milli_free == k_milli_per_gpu ? 1 : 0;
        free_share += w.gpus[i].milli_free * 100 / k_milli_per_gpu;
    }
    if (free_used > 0) { // a free GPU on a used node
        return std::max<std::int64_t>(100 / 2 - free_used, 100 / 3);
    }
    return std::max<std::int64_t>(100 - free_share / 10, 100 / 2); // an already shared GPU: best
}

std::optional<Choice> choose_on_worker(const Worker& w, const JobRequest& job, ScorerKind kind,
                                       const Workload& workload, const ScoreScale& scale, Rng& rng) {
    if (!filter_cpu(w, job) || !filter_memory(w, job) || !filter_gpu(w, job)) {
        return std::nullopt;
    }
    const ScoreContext context{workload, scale};
    return scorers().at(kind.index()).choose(w, job, context, rng);
}

double affinity_score(const Worker& w, const JobRequest& job, const ScoreWeights& weights) {
    double s = weights.reliability * std::clamp(w.reliability, 0.0, 1.0);
    if (!job.image.empty() &&
        std::find(w.cached_images.begin(), w.cached_images.end(), job.image) != w.cached_images.end()) {
        s += weights.image;
    }
    for (const auto& m : job.cache_models) {
        if (std::find(w.cached_models.begin(), w.cached_models.end(), m) != w.cached_models.end()) {
            s += weights.cache;
        }
    }
    return s;
}

bool TieBreaker::offer(double score) {
    if (m_count == 0 || score > m_best) {
        m_best = score;
        m_count = 1;
        return true;
    }
    if (score == m_best) {
        ++m_count;
        return m_mode == TieBreak::random && m_rng.uniform(m_count) == 0;
    }
    return false;
}

Feasibility check_feasible(const std::vector<Worker>& workers, const ModelCatalog& models, const JobRequest& job) {
    if (job.gpus < 0 || (job.gpus >= 1 && job.gpu_milli == 0 && job.gpu_memory_mib == 0) ||
        job.gpu_milli > k_milli_per_gpu || job.gpu_milli < 0 || (job.gpus > 1 && job.gpu_milli != k_milli_per_gpu)) {
        return {false, "the GPU request is malformed: a share of one GPU (0.001..1) or several whole GPUs"};
    }
    for (const auto& w : workers) {
        if (fits_total(w, job)) {
            return {};
        }
    }
    std::int64_t max_cpu = 0;
    std::int64_t max_mem = 0;
    std::int64_t max_gpus = 0;
    std::int64_t max_gpu_mem = 0;
    for (const auto& w : workers) {
        max_cpu = std::max(max_cpu, w.cpu_milli_total);
        max_mem = std::max(max_mem, w.memory_mib_total);
        std::int64_t n = 0;
        for (const auto& g : w.gpus) {
            if (model_allowed(job.gpu_models, g.model)) {
                ++n;
                max_gpu_mem = std::max(max_gpu_mem, g.memory_mib);
            }
        }
        max_gpus = std::max(max_gpus, n);
    }
    const std::string of_model = job.gpu_models == 0 ? "" : " of model " + model_list(models, job.gpu_models);
    if (workers.empty()) {
        return {false, "the pool has no workers"};
    }
    if (job.gpus > max_gpus) {
        return {false, "no worker has " + std::to_string(job.gpus) + " GPU(s)" + of_model +
                           " (most on one worker: " + std::to_string(max_gpus) + ")"};
    }
    if (job.gpus > 0 && job.gpu_memory_mib > max_gpu_mem) {
        return {false, "no GPU" + of_model + " has " + format_memory_mib(job.gpu_memory_mib) +
                           " of memory (largest: " + format_memory_mib(max_gpu_mem) + ")"};
    }
    if (job.cpu_milli > max_cpu) {
        return {false, "no worker has " + cpus(job.cpu_milli) + " (largest: " + cpus(max_cpu) + ")"};
    }
    if (job.memory_mib > max_mem) {
        return {false, "no worker has " + format_memory_mib(job.memory_mib) +
                           " of memory (largest: " + format_memory_mib(max_mem) + ")"};
    }
    return {false, "no single worker has the GPUs, " + cpus(job.cpu_milli) + " and " +
                       format_memory_mib(job.memory_mib) + " of memory together"};
}

namespace {

// "the owners of the 3 worker(s) that could run it do not take it: 2 take only other teams' jobs, 1 no
// job that may run for more than their limit"
std::string owners_refusal(const std::vector<const Worker*>& workers, const JobRequest& job) {
    std::size_t team = 0;
    std::size_t registry = 0;
    std::size_t runtime = 0;
    for (const auto* w : workers) {
        switch (w->terms ? refused_by(*w->terms, job) : TermsRefusal::none) {
        case TermsRefusal::team: ++team; break;
        case TermsRefusal::registry: ++registry; break;
        case TermsRefusal::max_runtime: ++runtime; break;
        case TermsRefusal::none: break;
        }
    }
    std::string out = "the owners of the " + std::to_string(workers.size()) + " worker(s) that could run it do not take it";
    std::string sep = ": ";
    auto add = [&](std::size_t n, const std::string& what) {
        if (n > 0) {
            out += sep + std::to_string(n) + " " + what;
            sep = ", ";
        }
    };
    add(team, "take only other teams' jobs");
    add(registry, "take no images from `" + job.qualified_image + "`'s registry");
    add(runtime, job.max_runtime_s <= 0 ? "take no job without a max_runtime"
                                        : "take no job that may run for " + resources::format_duration_s(job.max_runtime_s));
    return out;
}

// "the 1 worker(s) that could run it handed it back too often (its owner preempted it again and
// again): it waits for another worker, or 9m50s"; or, for a spot check kept off owners, that it waits
// for another owner's worker.
std::string avoided_reason(const std::vector<const Worker*>& workers, const JobRequest& job, std::int64_t now) {
    const bool owners_only = std::all_of(workers.begin(), workers.end(), [&](const Worker* w) {
        return std::find(job.avoid_owners.begin(), job.avoid_owners.end(), w->owner) != job.avoid_owners.end();
    });
    if (owners_only) {
        // A spot check: never on the checked worker's owner (nor, for a tie-break, the first check's).
        return "the " + std::to_string(workers.size()) +
               " worker(s) that could run it belong to the owner(s) whose result it checks: it waits for another "
               "owner's worker";
    }
    std::int64_t first = 0;
    for (const auto* w : workers) {
        for (const auto& a : job.avoid) {
            if (a.worker == w->id && now < a.until && (first == 0 || a.until < first)) {
                first = a.until;
            }
        }
    }
    return "the " + std::to_string(workers.size()) +
           " worker(s) that could run it handed it back too often (their owners preempted it again and again): it "
           "waits for another worker, or " +
           resources::format_duration_s(first - now);
}

} // namespace

std::string not_now_reason(const std::vector<Worker>& workers, const JobRequest& job, const OwnerPolicy& owner,
                           std::int64_t now) {
    std::vector<const Worker*> left;
    for (const auto& w : workers) {
        if (filter_available(w)) {
            left.push_back(&w);
        }
    }
    if (left.empty()) {
        return "no worker is available (all are draining, lost or offline)";
    }
    auto keep = [&](auto pred) {
        std::vector<const Worker*> next;
        for (const auto* w : left) {
            if (pred(*w)) {
                next.push_back(w);
            }
        }
        return next;
    };
    auto next = keep([&](const Worker& w) { return filter_models(w, job) && fits_total(w, job); });
    if (next.empty()) {
        return "no available worker could ever run it (the ones that could are draining or offline)";
    }
    left = next;
    next = keep([&](const Worker& w) { return filter_owner(w, job, owner); });
    if (next.empty()) {
        return owners_refusal(left, job);
    }
    left = next;
    next = keep([&](const Worker& w) { return filter_avoid(w, job, now); });
    if (next.empty()) {
        return avoided_reason(left, job, now);
    }
    left = next;
    next = keep([&](const Worker& w) { return filter_slots(w); });
    if (next.empty()) {
        return "the " + std::to_string(left.size()) +
               " worker(s) that could run it already run as many jobs as their owners allow (--slots)";
    }
    left = next;
    next = keep([&](const Worker& w) { return filter_gpu(w, job); });
    if (next.empty()) {
        if (job.gpus > 1 || (job.gpus == 1 && job.gpu_milli == k_milli_per_gpu)) {
            std::int64_t most = 0;
            for (const auto* w : left) {
                std::int64_t n = 0;
                for (const auto& g : w->gpus) {
                    n += (model_allowed(job.gpu_models, g.model) && g.milli_free == k_milli_per_gpu) ? 1 : 0;
                }
                most = std::max(most, n);
            }
            return "no worker has " + std::to_string(job.gpus) +
                   " free whole GPU(s) (most free on one worker: " + std::to_string(most) + ")";
        }
        if (job.gpu_memory_mib > 0) {
            std::int64_t largest = 0;
            for (const auto* w : left) {
                for (const auto& g : w->gpus) {
                    if (model_allowed(job.gpu_models, g.model)) {
                        largest = std::max(largest, g.milli_free * g.memory_mib / k_milli_per_gpu);
                    }
                }
            }
            return "no worker has " + format_memory_mib(job.gpu_memory_mib) +
                   " of free GPU memory (largest free: " + format_memory_mib(largest) + ")";
        }
        std::int64_t largest = 0;
        for (const auto* w : left) {
            for (const auto& g : w->gpus) {
                if (model_allowed(job.gpu_models, g.model)) {
                    largest = std::max(largest, g.milli_free);
                }
            }
        }
        return "no worker has " + format_milli(job.gpu_milli) +
               " of a GPU free (largest free share: " + format_milli(largest) + ")";
    }
    left = next;
    next = keep([&](const Worker& w) { return filter_cpu(w, job); });
    if (next.empty()) {
        std::int64_t largest = 0;
        for (const auto* w : left) {
            largest = std::max(largest, w->cpu_milli_free);
        }
        return "no worker with the GPU free also has " + cpus(job.cpu_milli) + " free (largest free: " + cpus(largest) +
               ")";
    }
    left = next;
    std::int64_t largest = 0;
    for (const auto* w : left) {
        largest = std::max(largest, w->memory_mib_free);
    }
    return "no worker with the GPU and CPUs free also has " + format_memory_mib(job.memory_mib) +
           " of memory free (largest free: " + format_memory_mib(largest) + ")";
}

Placement place(const std::vector<Worker>& workers, const ModelCatalog& models, const JobRequest& job,
                const PlacementPolicy& policy, Rng& rng, std::int64_t now) {
    return place(workers, models, job, policy, scale_of(workers), rng, now);
}

Placement place(const std::vector<Worker>& workers, const ModelCatalog& models, const JobRequest& job,
                const PlacementPolicy& policy, const ScoreScale& scale, Rng& rng, std::int64_t now) {
    Placement p;
    Feasibility f = check_feasible(workers, models, job);
    if (!f.feasible) {
        p.outcome = PlaceOutcome::infeasible;
        p.reason = f.reason;
        return p;
    }
    TieBreaker ties(rng, policy.tie_break);
    const std::size_t n = workers.size();
    const bool sample = policy.sampling.scored > 0 && n > policy.sampling.all_up_to;
    const std::size_t start = sample ? static_cast<std::size_t>(rng.uniform(n)) : 0;
    std::size_t scored = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = k < n - start ? start + k : k - (n - start);
        const Worker& w = workers[i];
        if (!passes_filters(w, job, policy.owner_allows, now)) {
            continue;
        }
        auto c = choose_on_worker(w, job, policy.scorer, policy.workload, scale, rng);
        if (!c) {
            continue;
        }
        c->score += affinity_score(w, job, policy.weights);
        if (ties.offer(c->score)) {
            p.outcome = PlaceOutcome::placed;
            p.worker = i;
            p.choice = std::move(*c);
        }
        if (sample && ++scored >= policy.sampling.scored) {
            break;
        }
    }
    if (p.outcome != PlaceOutcome::placed) {
        p.reason = not_now_reason(workers, job, policy.owner_allows, now);
    }
    return p;
}

void take(Worker& w, const JobRequest& job, const Choice& choice) {
    w.cpu_milli_free -= job.cpu_milli;
    w.memory_mib_free -= job.memory_mib;
    if (w.slots_free) {
        --*w.slots_free;
    }
    assert(w.cpu_milli_free >= 0 && w.memory_mib_free >= 0);
    for (auto g : choice.gpus) {
        w.gpus[g].milli_free -= choice.milli;
        assert(w.gpus[g].milli_free >= 0);
    }
}

void give_back(Worker& w, std::int64_t cpu_milli, std::int64_t memory_mib, const std::vector<std::uint32_t>& gpus,
               std::int64_t milli) {
    w.cpu_milli_free += cpu_milli;
    w.memory_mib_free += memory_mib;
    if (w.slots_free) {
        ++*w.slots_free;
    }
    for (auto g : gpus) {
        if (g >= w.gpus.size()) {
            continue; // the worker reports fewer GPUs than when this attempt was placed
        }
        w.gpus[g].milli_free += milli;
        assert(w.gpus[g].milli_free <= k_milli_per_gpu);
    }
}

} // namespace gpupool::sched
