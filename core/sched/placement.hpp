// Placement: where one job goes, given the pool as it is now. Ordering (who goes first) is
// elsewhere (ordering.hpp); this module only answers "which worker and which GPUs, or why none".
//
// Pipeline, in the style of Ray's scheduling policies: all workers (a sample in a large pool:
// Sampling) -> filters -> scorer -> the best score wins, ties broken uniformly at random with the
// caller's Rng (as kube-scheduler does).
// Filters, each usable alone:
//   available  healthy or degraded, and not draining
//   models     the worker has at least `gpus` GPUs of an accepted model
//   owner      the worker owner's terms (Worker::terms: teams, registries, max_runtime) and the
//              owner policy hook (e.g. "only my team at night") accept the job
//   avoid      the job is not kept off the worker at `now` (JobRequest::avoid)
//   gpu        one GPU with the share free (or `gpus` completely free GPUs), of an accepted model
//   cpu, ram   free CPU and memory
// Scorers (selectable by name; the registry is scorers.hpp):
//   `fgd`      least growth of fragmentation (fragmentation.hpp), in GPUs, plus k_fgd_bestfit_weight x
//              the bestfit score: FGD says nothing about the many placements that leave fragmentation
//              unchanged (a CPU-only job on any node, say), and spreading those at random strands
//              GPUs on nodes whose CPUs ran out; the small best-fit term packs them instead.
//   `fgd-k8s`  the FGD paper's own integer score, int(100 x sigmoid(-delta in GPUs)), best fit
//              breaking its (many) ties: it reproduces the published FGD figures.
//   `bestfit`  least CPU+GPU left over, kube-scheduler's integer score (as the FGD paper's simulator).
//   `packing`  prefer GPUs already shared, then free GPUs on used nodes, then empty nodes (GpuPacking).
//   `random`   uniform among feasible workers.
// Ties between workers are broken uniformly at random (seeded; default) or by worker order.
// Added to every scorer, with small weights: image affinity (image already pulled), cache affinity
// (model weights already cached), and worker reliability.
// Pure functions; not-now and never are told apart (PlaceOutcome) with a reason a person can read.
#pragma once

#include "core/sched/cluster.hpp"
#include "core/sched/fragmentation.hpp"
#include "core/sched/rng.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::sched {

// A scorer of the registry (scorers.hpp), by its place there. The built-in ones have names here;
// any scorer is reachable by its name (parse_scorer).
class ScorerKind {
public:
    constexpr ScorerKind() = default;
    constexpr explicit ScorerKind(std::uint8_t index) : m_index(index) {}
    constexpr std::uint8_t index() const { return m_index; }
    constexpr bool operator==(const ScorerKind&) const = default;
    static const ScorerKind fgd, fgd_k8s, bestfit, packing, random;

private:
    std::uint8_t m_index = 0;
};
inline constexpr ScorerKind ScorerKind::fgd{0};
inline constexpr ScorerKind ScorerKind::fgd_k8s{1};
inline constexpr ScorerKind ScorerKind::bestfit{2};
inline constexpr ScorerKind ScorerKind::packing{3};
inline constexpr ScorerKind ScorerKind::random{4};
inline constexpr double k_fgd_bestfit_weight = 0.05;

enum class TieBreak : std::uint8_t { random, first };
const char* to_string(ScorerKind kind);
std::ostream& operator<<(std::ostream& os, ScorerKind kind); // its name
Result<ScorerKind> parse_scorer(std::string_view name);
const std::vector<std::string>& scorer_names();

// Returns false to keep a job off a worker (the owner's sharing policy).
using OwnerPolicy = std::function<bool(const Worker&, const JobRequest&)>;

struct ScoreWeights {
    double image = 0.05;       // image already on the worker
    double cache = 0.05;       // per cached model the job wants, up to the job's list
    double reliability = 0.10; // times the worker's reliability (0..1)
};

// Large pools score a job on a sample of the workers, as kube-scheduler does past a few hundred
// nodes (percentageOfNodesToScore): scoring costs a few microseconds per worker, and a pass that
// scores 10,000 workers for every job it places holds the coordinator thread for tens of
// milliseconds. Pools of up to `all_up_to` workers score every worker; larger ones walk the workers
// from a random place (the pass's Rng), wrapping around, and stop once `scored` workers passed the
// filters and fit. The walk goes on past any number that do not fit, so a job that fits on a single
// worker still finds it. scored = 0: no sampling at any size.
struct Sampling {
    std::size_t all_up_to = 2048; // above the Alibaba trace's 1,213 nodes that `make bench` simulates
    std::size_t scored = 256;
};

struct PlacementPolicy {
    ScorerKind scorer = ScorerKind::fgd;
    ScoreWeights weights;
    OwnerPolicy owner_allows; // empty = owners accept everything
    Workload workload;        // target workload for fgd
    TieBreak tie_break = TieBreak::random;
    Sampling sampling;
};

// Context the scorers normalise with (kube-scheduler's bestfit uses the largest node's size).
struct ScoreScale {
    std::int64_t max_cpu_milli = 1;
    std::int64_t max_gpu_milli = 1;
};
ScoreScale scale_of(const std::vector<Worker>& workers);

// ---- filters (now) ----------------------------------------------------------------------------
bool filter_available(const Worker& w);
bool filter_models(const Worker& w, const JobRequest& job);
bool filter_gpu(const Worker& w, const JobRequest& job);
bool filter_cpu(const Worker& w, const JobRequest& job);
bool filter_memory(const Worker& w, const JobRequest& job);
bool filter_owner(const Worker& w, const JobRequest& job, const OwnerPolicy& owner);
bool filter_slots(const Worker& w); // a job slot is free (or the owner set no cap)
// Not kept off this worker at `now` (JobRequest::avoid: an entry holds while now < until), nor off
// its owner (JobRequest::avoid_owners).
bool filter_avoid(const Worker& w, const JobRequest& job, std::int64_t now);
// All of the above. `now`: the scheduler's time, for `avoid` alone (callers whose requests avoid
// nothing may leave it out).
bool passes_filters(const Worker& w, const JobRequest& job, const OwnerPolicy& owner, std::int64_t now = 0);

// Could the job ever run on this worker if it were empty (totals, models)?
bool fits_total(const Worker& w, const JobRequest& job);

// ---- scoring ----------------------------------------------------------------------------------
struct Choice {
    std::vector<std::uint32_t> gpus; // GPU indices on the worker
    std::int64_t milli = 0;          // share on each chosen GPU
    double score = 0.0;              // scorer's score, higher is better
    std::int64_t frag_delta = 0;     // fgd only: weighted fragmentation after - before
};

// Picks GPUs on a worker that passed the filters and scores the result with `kind` (no affinity
// terms). Returns nothing if the job does not fit now.
std::optional<Choice> choose_on_worker(const Worker& w, const JobRequest& job, ScorerKind kind,
                                       const Workload& workload, const ScoreScale& scale, Rng& rng);

// The additional score terms (image, cache, reliability).
double affinity_score(const Worker& w, const JobRequest& job, const ScoreWeights& weights);

// kube-scheduler's integer bestfit score in 0..100 (used by the `bestfit` scorer, divided by 100).
std::int64_t bestfit_points(const Worker& w, const JobRequest& job, const ScoreScale& scale);
// The GpuPacking score in 0..100 for the GPUs chosen.
std::int64_t packing_points(const Worker& w, const std::vector<std::uint32_t>& gpus);

// Keeps the best score seen; in random mode equal scores are kept with probability 1/k (reservoir),
// so the winner is uniform among the ties; in first mode the first one offered wins.
class TieBreaker {
public:
    explicit TieBreaker(Rng& rng, TieBreak mode = TieBreak::random) : m_rng(rng), m_mode(mode) {}
    // True if `score` became (or replaced) the current best.
    bool offer(double score);
    bool empty() const { return m_count == 0; }

private:
    Rng& m_rng;
    TieBreak m_mode;
    double m_best = 0.0;
    std::uint64_t m_count = 0; // ties at m_best
};

// ---- one job ----------------------------------------------------------------------------------
enum class PlaceOutcome : std::uint8_t {
    placed,
    not_now,    // fits some worker's totals; stays queued
    infeasible, // bigger than every worker's total: reject at submit
};
const char* to_string(PlaceOutcome outcome);

struct Placement {
    PlaceOutcome outcome = PlaceOutcome::not_now;
    std::size_t worker = 0; // index into the workers when placed
    Choice choice;
    std::string reason; // why not, when not placed
};

// `now`: the scheduler's time, as passes_filters takes it.
Placement place(const std::vector<Worker>& workers, const ModelCatalog& models, const JobRequest& job,
                const PlacementPolicy& policy, Rng& rng, std::int64_t now = 0);
// The same with the scale computed once by the caller (scale_of(workers)).
Placement place(const std::vector<Worker>& workers, const ModelCatalog& models, const JobRequest& job,
                const PlacementPolicy& policy, const ScoreScale& scale, Rng& rng, std::int64_t now = 0);

// Never vs. not now, with the reason. Empty reason when it could fit some worker now or later.
struct Feasibility {
    bool feasible = true;
    std::string reason;
};
Feasibility check_feasible(const std::vector<Worker>& workers, const ModelCatalog& models, const JobRequest& job);

// Why the job does not fit now (called when no worker passes the filters).
std::string not_now_reason(const std::vector<Worker>& workers, const JobRequest& job, const OwnerPolicy& owner,
                           std::int64_t now = 0);

// Applies a choice to a worker (takes the resources) or gives them back.
void take(Worker& w, const JobRequest& job, const Choice& choice);
void give_back(Worker& w, std::int64_t cpu_milli, std::int64_t memory_mib, const std::vector<std::uint32_t>& gpus,
               std::int64_t milli);

} // namespace gpupool::sched
