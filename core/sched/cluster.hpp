// The scheduler's picture of the pool: workers and their GPUs, jobs asking for resources, and the
// attempts running now. A ClusterView is a snapshot the caller (the coordinator, or the simulator)
// builds and owns; the scheduler reads it and never keeps a reference after schedule() returns.
//
// Resources are integers: GPU share in milli-GPU (1000 = one whole GPU), memory in MiB, CPU in
// milli-cores, times in seconds since an epoch the caller chooses. A job asks for either nothing on
// a GPU (CPU-only), a share of ONE GPU (gpu_milli, or gpu_memory_mib converted per GPU as
// memory / that GPU's memory, rounded up), or `gpus` whole GPUs on one worker. GPU models are
// interned in a ModelCatalog so that filters compare bit masks, not strings.
// Plain value types: safe to copy between threads; no function here fails or allocates globally.
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/ids.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::sched {

// The pool's typed ids (core/util/ids.hpp), by their scheduler names too.
using gpupool::AttemptId;
using gpupool::JobId;
using gpupool::TeamId;
using gpupool::WorkerId;

inline constexpr std::int64_t k_milli_per_gpu = resources::k_milli_per_gpu;

using recipe::Priority;

// A set of GPU models as bits of the catalog's indices; 0 means "any model".
using ModelMask = std::uint64_t;

// Interned GPU model names (at most 64). Indices are stable once assigned.
class ModelCatalog {
public:
    static constexpr std::size_t k_max_models = 64;
    // The index of every model past the 64th: such GPUs take only jobs that accept any model
    // (workers reporting 65 model names must not shift a mask past its width).
    static constexpr std::uint32_t k_uncatalogued = k_max_models;
    // Index of `name`, adding it if new; k_uncatalogued when the catalog is full.
    std::uint32_t intern(std::string_view name);
    std::optional<std::uint32_t> find(std::string_view name) const;
    // "(uncatalogued)" for k_uncatalogued.
    const std::string& name(std::uint32_t index) const;
    std::size_t size() const { return m_names.size(); }
    bool full() const { return m_names.size() >= k_max_models; }
    // Mask of the named models; names the catalog does not know are reported in `unknown`.
    ModelMask mask(const std::vector<std::string>& names, std::vector<std::string>* unknown = nullptr) const;
    bool operator==(const ModelCatalog&) const = default;

private:
    std::vector<std::string> m_names;
};

inline bool model_allowed(ModelMask accepted, std::uint32_t model) {
    return accepted == 0 || (model < ModelCatalog::k_max_models && ((accepted >> model) & 1U) != 0);
}

struct Gpu {
    std::uint32_t model = 0;         // index in the view's ModelCatalog
    std::int64_t memory_mib = 16384; // this GPU's total memory
    std::int64_t milli_free = k_milli_per_gpu;
    // false: nothing holds a job on this GPU to a fractional share (no MPS, no watchdog) and the pool
    // places only whole-GPU jobs here (`coordinator --whole-gpu-only-unenforced`).
    bool fractional_ok = true;
    bool operator==(const Gpu&) const = default;
};

enum class WorkerHealth : std::uint8_t { healthy, degraded, lost };

// What a worker's owner lets it run (api::OwnerTerms, with the team names resolved by the caller):
// the placement filter `owner` keeps every other job off the worker. 0 and empty mean no limit.
struct WorkerTerms {
    std::int64_t max_runtime_s = 0; // a job whose max_runtime is longer, or unlimited (0), is refused
    // Sorted. nullopt: every team; empty: none (the owner named only teams that do not exist).
    std::optional<std::vector<TeamId>> teams{};
    std::vector<std::string> registries{}; // prefixes of the job's qualified image; empty = any
    bool operator==(const WorkerTerms&) const = default;
};

struct Worker {
    WorkerId id;
    std::string name;
    std::int64_t cpu_milli_total = 0;
    std::int64_t cpu_milli_free = 0;
    std::int64_t memory_mib_total = 0;
    std::int64_t memory_mib_free = 0;
    std::vector<Gpu> gpus;
    WorkerHealth health = WorkerHealth::healthy;
    bool draining = false;
    // How many more jobs the owner lets it run at once (`gpupool worker --slots`); none = no cap.
    std::optional<std::int64_t> slots_free;
    double reliability = 1.0;               // share of recent attempts not lost to a worker fault
    std::vector<std::string> cached_images; // container images already pulled
    std::vector<std::string> cached_models; // model weights already in the worker's cache
    std::optional<WorkerTerms> terms;       // none: its owner takes any job
    TeamId owner{};                         // the owner team (JobRequest::avoid_owners)
    bool operator==(const Worker&) const = default;
};

// A worker one job is kept off until `until` (the scheduler's time, seconds): the caller's record
// that the worker handed the job back too often (the coordinator: its owner preempted it again and
// again, docs/security.md). Not a refusal for ever: the job goes elsewhere, or waits until then.
struct AvoidWorker {
    WorkerId worker;
    std::int64_t until = 0;
    bool operator==(const AvoidWorker&) const = default;
};

// What one job asks of the scheduler.
struct JobRequest {
    JobId id;
    TeamId team;
    Priority priority = Priority::normal;
    std::int64_t submitted_at = 0;
    std::int64_t gpus = 0;           // 0 = CPU-only, 1 = a share of one GPU, n > 1 = n whole GPUs
    std::int64_t gpu_milli = 0;      // per GPU; 1000 for whole GPUs
    std::int64_t gpu_memory_mib = 0; // alternative to gpu_milli for gpus == 1
    ModelMask gpu_models = 0;
    std::int64_t cpu_milli = 0;
    std::int64_t memory_mib = 0;
    std::string image;
    std::string qualified_image; // the image with its registry spelled out, for owners' registries
    std::vector<std::string> cache_models;
    // For admission (admission.hpp); zero where the caller does not use it.
    std::int64_t max_runtime_s = 0;
    SweepId sweep{};             // its sweep, for max_parallel
    TokenId member{};            // the submitting token when it has caps of its own (0: it has none)
    bool no_known_model = false; // names GPU models, none of them in the catalog
    std::vector<AvoidWorker> avoid{}; // workers it is kept off for now, by worker id (placement's `avoid`)
    // Owner teams whose workers it never runs on (a spot check keeps off the checked worker's owner).
    std::vector<TeamId> avoid_owners{};
    // The pool pays for it (a spot check): no hold, so no credit gate (admission.hpp).
    bool pool_pays = false;
    bool operator==(const JobRequest&) const = default;
};

// Builds a request from a recipe's resources. Unknown GPU model names make the job infeasible
// (an empty but non-zero mask cannot be expressed, so they are returned for the caller to report).
JobRequest make_request(JobId id, TeamId team, const recipe::JobSpec& spec, std::int64_t submitted_at,
                        const ModelCatalog& catalog, std::vector<std::string>* unknown_models = nullptr);

// Which of a worker owner's terms refuses the job, if any (the same rule as api::outside_terms).
enum class TermsRefusal : std::uint8_t { none, team, registry, max_runtime };
TermsRefusal refused_by(const WorkerTerms& terms, const JobRequest& job);

// Milli-GPU this request takes on `gpu` (memory requests converted, rounded up); 0 when CPU-only.
std::int64_t milli_on(const JobRequest& job, const Gpu& gpu);

// One attempt running on a worker now.
struct RunningJob {
    JobId job;
    AttemptId attempt;
    TeamId team;
    Priority priority = Priority::normal;
    WorkerId worker;
    std::vector<std::uint32_t> gpu_indices; // indices into the worker's gpus
    std::int64_t gpu_milli = 0;             // on each of gpu_indices
    std::int64_t cpu_milli = 0;
    std::int64_t memory_mib = 0;
    std::int64_t started_at = 0;
    // Already told to stop (preempted) for `preempted_for`; it holds its resources until it exits.
    bool stopping = false;
    JobId preempted_for;
    // What stopping it throws away (preemption.hpp weighs it when choosing victims). A job that
    // `checkpoints` saves its progress and resumes from the last save: it loses only the run time
    // since `checkpointed_at` (the last save known; 0 or before started_at: none yet). Other jobs
    // lose the whole run since started_at. Defaults: no checkpoints, the whole run is lost.
    bool checkpoints = false;
    std::int64_t checkpointed_at = 0;
    // A job that declares how often it saves (a recipe's `[checkpoint] every`, seconds): its last
    // save is taken to be the last whole interval since started_at (0: not declared).
    std::int64_t checkpoint_every_s = 0;
    // Earlier attempts of this job that were preempted (the coordinator also counts those its GPU's
    // owner preempted; lost and retried attempts do not count). PreemptionPolicy::max_per_job caps
    // preemptions with it.
    std::int64_t preempted_before = 0;
    bool operator==(const RunningJob&) const = default;
};

struct TeamShare {
    TeamId team;
    double weight = 1.0;        // relative entitlement
    double decayed_usage = 0.0; // GPU-seconds, exponentially decayed (see ordering.hpp), as of `now`
    bool operator==(const TeamShare&) const = default;
};

struct ClusterView {
    ModelCatalog models;
    std::vector<Worker> workers; // free amounts already account for `running`
    std::vector<RunningJob> running;
    std::vector<TeamShare> teams; // teams not listed have weight 1 and no usage
};

} // namespace gpupool::sched
