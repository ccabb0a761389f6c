#include "core/sched/scorers.hpp"

#include "core/sched/placement.hpp"

#include <cmath>

namespace gpupool::sched {

namespace {

enum class SharePick : std::uint8_t { least_fragmenting, tightest, random };

// The GPUs a job takes on `w`: for a share, one GPU picked as asked; whole GPUs, the first usable.
Choice pick_gpus(const Worker& w, const JobRequest& job, SharePick pick, const Workload& workload, Rng& rng) {
    Choice c;
    if (job.gpus == 0) {
        return c;
    }
    if (is_share(job)) {
        if (pick == SharePick::least_fragmenting) {
            return least_fragmenting_share(w, job, workload);
        }
        const std::uint32_t g = pick == SharePick::random ? random_usable(w, job, rng) : tightest_usable(w, job);
        c.gpus = {g};
        c.milli = milli_on(job, w.gpus[g]);
        return c;
    }
    c.gpus = first_usable(w, job, job.gpus);
    c.milli = c.gpus.empty() ? 0 : milli_on(job, w.gpus[c.gpus.front()]);
    return c;
}

double bestfit_score(const Worker& w, const JobRequest& job, const ScoreScale& scale) {
    return static_cast<double>(bestfit_points(w, job, scale)) / 100.0;
}

// FGD's measure: the GPUs (of the target workload's) that placing here saves from fragmentation.
double gpus_saved(const Worker& w, const JobRequest& job, Choice& c, const Workload& workload) {
    if (!is_share(job)) {
        c.frag_delta = frag_delta(w, job.cpu_milli, c.gpus, c.milli, workload);
    }
    return workload.total_count == 0
               ? 0.0
               : -static_cast<double>(c.frag_delta) / (static_cast<double>(workload.total_count) * k_milli_per_gpu);
}

// Least growth of fragmentation, in GPUs, plus a small best-fit term for the placements FGD
// cannot tell apart.
Choice fgd(const Worker& w, const JobRequest& job, const ScoreContext& ctx, Rng& rng) {
    Choice c = pick_gpus(w, job, SharePick::least_fragmenting, ctx.workload, rng);
    c.score = gpus_saved(w, job, c, ctx.workload) + k_fgd_bestfit_weight * bestfit_score(w, job, ctx.scale);
    return c;
}

// The FGD paper's integer score, int(100 x sigmoid(-delta)), then best fit below its resolution.
Choice fgd_k8s(const Worker& w, const JobRequest& job, const ScoreContext& ctx, Rng& rng) {
    Choice c = pick_gpus(w, job, SharePick::least_fragmenting, ctx.workload, rng);
    const double saved = gpus_saved(w, job, c, ctx.workload);
    const auto points = static_cast<std::int64_t>(100.0 / (1.0 + std::exp(-saved)));
    c.score = static_cast<double>(points) / 100.0 + 1e-4 * bestfit_score(w, job, ctx.scale);
    return c;
}

Choice bestfit(const Worker& w, const JobRequest& job, const ScoreContext& ctx, Rng& rng) {
    Choice c = pick_gpus(w, job, SharePick::tightest, ctx.workload, rng);
    c.score = bestfit_score(w, job, ctx.scale);
    return c;
}

Choice packing(const Worker& w, const JobRequest& job, const ScoreContext& ctx, Rng& rng) {
    Choice c = pick_gpus(w, job, SharePick::tightest, ctx.workload, rng);
    c.score = static_cast<double>(packing_points(w, c.gpus)) / 100.0;
    return c;
}

Choice random(const Worker& w, const JobRequest& job, const ScoreContext& ctx, Rng& rng) {
    Choice c = pick_gpus(w, job, SharePick::random, ctx.workload, rng);
    c.score = 0.0;
    return c;
}

} // namespace

const std::vector<ScorerEntry>& scorers() {
    static const std::vector<ScorerEntry> registry{
        {"fgd", "least growth of GPU fragmentation, best fit among equals", &fgd, false},
        {"fgd-k8s", "the FGD paper's integer score (reproduces its figures)", &fgd_k8s, false},
        {"bestfit", "least CPU and GPU left over (kube-scheduler)", &bestfit, false},
        {"packing", "shared GPUs first, then free GPUs on used workers, then empty ones", &packing, false},
        {"random", "uniform among the workers the job fits", &random, true},
    };
    return registry;
}

} // namespace gpupool::sched
