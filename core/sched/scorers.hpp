// The scorers: how placement ranks the workers a job fits (placement.hpp runs the filters, then
// the scorer, then the tie-break). A registry of {name, summary, function}: adding a scorer touches
// scorers.cpp alone, and whatever lists policies (`gpupool sim --policy all`, `--policy` errors)
// lists what the registry holds. Pure functions of the worker and the job (plus the caller's Rng
// for scorers that draw).
#pragma once

#include "core/sched/cluster.hpp"
#include "core/sched/fragmentation.hpp"
#include "core/sched/rng.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace gpupool::sched {

struct Choice;
struct ScoreScale;

// What a scorer may read besides the worker and the job.
struct ScoreContext {
    const Workload& workload; // the target workload (fgd)
    const ScoreScale& scale;  // the largest worker's size (bestfit)
};

// Picks GPUs on a worker that passed the filters and scores the result (higher is better); no
// affinity terms. The worker is known to fit the job now.
using ScoreFn = Choice (*)(const Worker& w, const JobRequest& job, const ScoreContext& context, Rng& rng);

struct ScorerEntry {
    std::string_view name;
    std::string_view summary;
    ScoreFn choose = nullptr;
    bool draws = false; // uses the Rng: results are not a function of (worker, job) alone
};

// In registry order; ScorerKind's named constants (placement.hpp) are places in it.
const std::vector<ScorerEntry>& scorers();

// ---- building blocks for scorers ---------------------------------------------------------------
// One GPU shared (gpus == 1 with a share or a memory request) rather than whole GPUs.
bool is_share(const JobRequest& job);
// The share on the GPU whose taking grows fragmentation least (FGD's GPU choice).
Choice least_fragmenting_share(const Worker& w, const JobRequest& job, const Workload& workload);
// Fragmentation growth of taking `cpu` and `milli` on each of `gpus` (whole GPUs, CPU-only jobs).
std::int64_t frag_delta(const Worker& w, std::int64_t cpu, const std::vector<std::uint32_t>& gpus, std::int64_t milli,
                        const Workload& workload);
std::vector<std::uint32_t> first_usable(const Worker& w, const JobRequest& job, std::int64_t n);
std::uint32_t tightest_usable(const Worker& w, const JobRequest& job); // least left over after the share
std::uint32_t random_usable(const Worker& w, const JobRequest& job, Rng& rng);

} // namespace gpupool::sched
