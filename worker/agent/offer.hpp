// What a worker offers the pool: the inventory it registers and heartbeats with (its shared GPUs
// and how their shares are enforced, CPUs, memory, slots, runtime, the models in its cache), and the
// line its owner reads once it is registered. Pure functions of what the agent knows, so that the
// agent stays a façade.
//
// Rules:
// - CPUs, memory and slots: the owner's settings (worker.toml or its flags) over the command line's,
//   over the whole machine.
// - GPUs: those the owner shares, sorted by index, numbered 0, 1, 2, ... without a gap and at most
//   api::k_max_gpus: the pool numbers a worker's GPUs 0 to n-1 and assigns jobs by that number (the
//   driver's index), so a GPU after an unshared one, or past the cap, is left out, and the worker
//   says so in its log and to its owner (gpus_left_out) rather than fail to register.
// - Cached models: complete ones only, at most api::k_max_cached_models (the most recently used
//   first when there are more). Free cache space is rounded down to whole GiB, so that ordinary disk
//   use does not make every heartbeat carry a "changed" inventory.
#pragma once

#include "core/api/inventory.hpp"
#include "worker/cache/hub_cache.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/owner/owner_config.hpp" // ShareSettings

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

struct OfferInputs {
    std::vector<GpuInfo> gpus;   // the GPUs the owner shares
    MemoryEnforcement enforcement = MemoryEnforcement::none;
    std::string runtime;         // the runtime's name
    const HubCache* models = nullptr; // the model cache, when the worker keeps one
};

// What the command line offers (AgentOptions, agent.hpp); the owner's ShareSettings go over it.
struct OfferOptions {
    std::int64_t cpu_milli = 0;  // 0 = all cores
    std::int64_t memory_mib = 0; // 0 = all memory
    int slots = 0;               // 0 = no cap
};

api::Inventory offer_inventory(const OfferInputs& in, const ShareSettings& share, const OfferOptions& opt);

// The offered GPUs the inventory lists (the rule above), sorted by index.
std::vector<GpuInfo> inventory_gpus(std::vector<GpuInfo> offered);
// Which offered GPUs the inventory leaves out and why, in words; nullopt when none.
std::optional<std::string> gpus_left_out(std::vector<GpuInfo> offered);

// "sharing with URL as worker 7: 8 CPUs, 31 GiB memory, GPU 0 NVIDIA L4 (22.5 GiB, shares enforced by
// the watchdog); jobs run with podman", with the GPUs left out, if any.
std::string offer_line(const OfferInputs& in, const api::Inventory& inv, const std::string& url, std::int64_t worker_id);
// offer_line, after a warning in the log when GPUs are left out (once per start: the agent).
std::string announce_offer(const OfferInputs& in, const api::Inventory& inv, const std::string& url,
                           std::int64_t worker_id);

// Of the GPU indexes a heartbeat reports (unhealthy, reclaimed), those of GPUs in `inv`: the others
// take no work anyway, and the coordinator refuses indexes past api::k_max_gpus.
std::vector<std::int64_t> inventory_indexes(const std::vector<std::int64_t>& indexes, const api::Inventory& inv);

} // namespace gpupool::worker
