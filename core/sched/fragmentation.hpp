// GPU fragmentation with respect to a target workload, as defined by the FGD paper (Weng et al.,
// "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
// USENIX ATC'23).
//
// Rules (the paper's definition, restated):
//  - A target workload is a distribution over task types (CPU, number of GPUs, GPU share per GPU,
//    acceptable models); each type has a popularity weight. typical_workload() builds it from a job
//    list: the most frequent types covering `popularity_pct` of the jobs, renormalised.
//  - For one node and one task type, the fragment is the node's free GPU share that the type
//    cannot use: all of it when the type cannot run on the node at all (it needs no GPU, lacks CPU,
//    lacks the GPU model, or fewer than `gpus` GPUs have the share free); otherwise the free share
//    on GPUs that individually have less free than the type needs (or the wrong model).
//  - A node's fragmentation is the expected fragment over the workload's distribution; the cluster's
//    is the sum over nodes. FGD places a task where the fragmentation grows least.
// Memory is not part of the measure (as in the paper). Weights are integer counts so that sums are
// exact and deterministic: amounts are in milli-GPU x count; divide by total_count for milli-GPU.
// Pure functions, thread-safe.
#pragma once

#include "core/sched/cluster.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace gpupool::sched {

struct WorkloadType {
    std::int64_t cpu_milli = 0;
    std::int64_t gpus = 0;
    std::int64_t gpu_milli = 0; // per GPU
    ModelMask models = 0;
    std::int64_t count = 0; // popularity weight
    auto operator<=>(const WorkloadType&) const = default;
};

struct Workload {
    std::vector<WorkloadType> types;
    std::int64_t total_count = 0;
};

inline constexpr int k_default_popularity_pct = 95;

// The typical task types of `jobs` (memory-sized GPU requests are skipped: their share depends on
// the GPU). Ties in frequency are ordered by (cpu, gpu share, gpus, models), larger first.
Workload typical_workload(const std::vector<JobRequest>& jobs, int popularity_pct = k_default_popularity_pct);

// Compact node state used by the fragmentation measure.
struct GpuSlot {
    std::uint32_t model = 0;
    std::int64_t free = 0;
};
inline constexpr std::size_t k_max_gpus_per_worker = 64;

// Fragment of one node for one task type, in milli-GPU.
std::int64_t type_fragment(std::int64_t cpu_free, std::span<const GpuSlot> gpus, const WorkloadType& type);

// Expected fragment, weighted: milli-GPU x count (divide by workload.total_count).
std::int64_t weighted_fragmentation(std::int64_t cpu_free, std::span<const GpuSlot> gpus, const Workload& workload);
std::int64_t weighted_fragmentation(const Worker& worker, const Workload& workload);

// The worker's fragmentation in milli-GPU (weighted / total_count).
double fragmentation_milli(const Worker& worker, const Workload& workload);

// One node's fragmentation, prepared once so that candidate placements are evaluated in
// O(types x changed GPUs) instead of O(types x GPUs): after() gives the weighted fragmentation after
// taking `cpu` and `milli` on each GPU in `gpus`. Borrows `gpus` and `workload`: they must outlive it.
class NodeFragmentation {
public:
    NodeFragmentation(std::int64_t cpu_free, std::span<const GpuSlot> gpus, const Workload& workload);
    std::int64_t before() const { return m_before; }
    std::int64_t after(std::int64_t cpu, std::span<const std::uint32_t> gpus, std::int64_t milli) const;

private:
    struct TypeState {
        std::int64_t usable_sum = 0;
        std::int64_t usable_count = 0;
    };
    std::int64_t m_cpu_free;
    std::span<const GpuSlot> m_gpus;
    const Workload& m_workload;
    std::int64_t m_total = 0;
    std::int64_t m_before = 0;
    std::vector<TypeState> m_types;
};

// A worker's GPUs as slots; asserts at most k_max_gpus_per_worker GPUs.
std::size_t to_slots(const Worker& worker, std::array<GpuSlot, k_max_gpus_per_worker>& out);

} // namespace gpupool::sched
