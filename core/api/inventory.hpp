// What a worker's machine offers, as the worker reports it at registration and after each start,
// and as the coordinator stores it and schedules by it.
//
// One struct on both sides of the wire: the worker builds it, `from_json` validates it once where it
// arrives (every error names its field, `inventory.gpus[1].memory_mib`), the coordinator keeps it
// and compares it by value to notice a machine that changed. Fields the scheduler does not read
// (uuid, memory enforcement, runtime) travel for `gpupool admin workers`; `cached_models` feeds the
// scheduler's model-cache affinity.
//
// Rules (a worker is not trusted: every list and string is bounded where it arrives, so that one
// worker cannot make the coordinator's work per estimate, submission or pass grow):
// - At most k_max_gpus GPUs. Their indexes are exactly 0..n-1, each once, in any order; they are
//   read back sorted by index, so that a GPU's position in `gpus` is its index, which is what the
//   coordinator assigns (Assignment::gpu_index) and the worker runs the job on.
// - Model names, uuids, memory_enforcement and the runtime's name are at most
//   k_max_inventory_text_bytes of printable text: no C0 or C1 control character, no DEL.
// - A GPU's memory is 1 MiB to k_max_gpu_memory_mib; the machine's CPUs, memory, slots and cache
//   sizes have upper bounds too (far above any machine), so that sums over the pool cannot overflow.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::api {

struct GpuInventory {
    std::int64_t index = 0;         // the device index on the worker
    std::string model{};            // e.g. "NVIDIA H100 80GB HBM3" (the rate catalog's key)
    std::int64_t memory_mib = 0;    // > 0
    std::string uuid{};             // may be empty
    std::string memory_enforcement{}; // how the worker holds jobs to their GPU memory share
    bool operator==(const GpuInventory&) const = default;
};

// A model complete in the worker's model-weight cache (worker/cache/hub_cache.hpp).
struct CachedModelInfo {
    std::string model{};    // "org/name", as recipes name it in `[cache] models`
    std::string revision{}; // as asked ("main")
    std::int64_t bytes = 0;
    bool operator==(const CachedModelInfo&) const = default;
};

// The most cached models an inventory may list (more are dropped by the worker, refused here).
inline constexpr std::size_t k_max_cached_models = 1000;

// The most GPUs one worker may offer (more are dropped by the worker, refused here). Machines have 8,
// a few 16; the scheduler keeps a worker's GPUs in arrays of sched::k_max_gpus_per_worker (the
// coordinator asserts the two agree), and estimates, submissions and admission walk the pool's
// distinct GPU kinds, which one worker must not be able to multiply.
inline constexpr std::size_t k_max_gpus = 64;
// The longest GPU model name, uuid, memory_enforcement and runtime name, in bytes.
inline constexpr std::size_t k_max_inventory_text_bytes = 256;
// The most memory one GPU may declare: 16 TiB, in MiB (the largest GPUs have 0.2 TiB).
inline constexpr std::int64_t k_max_gpu_memory_mib = std::int64_t{16} << 20;

struct Inventory {
    std::int64_t cpu_milli = 0;  // > 0
    std::int64_t memory_mib = 0; // > 0
    std::int64_t slots = 0;      // most jobs at once; 0 = no cap
    std::vector<GpuInventory> gpus{};
    std::string runtime{}; // the container runtime's name
    std::vector<CachedModelInfo> cached_models{}; // for the scheduler's cache affinity
    std::int64_t cache_free_mib = -1;             // room left for more weights; -1 = not said
    bool operator==(const Inventory&) const = default;
};

// Validates and reads an inventory; `field` prefixes the field names in errors. Unknown keys are
// ignored (an older coordinator meets a newer worker).
Result<Inventory> inventory_from_json(const nlohmann::json& j, const std::string& field = "inventory");
nlohmann::json to_json(const Inventory& inventory);
// No C0 control (NUL included), DEL or C1 control: what every worker-given name must be.
bool is_printable_text(std::string_view s);
// The stored form (a JSON document), and reading it back with the same validation.
std::string to_text(const Inventory& inventory);
Result<Inventory> inventory_from_text(std::string_view text);

} // namespace gpupool::api
