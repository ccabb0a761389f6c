// What a worker offers the pool: the inventory it registers and heartbeats with (its shared GPUs
// and how their shares are enforced, CPUs, memory, slots, runtime, the models in its cache), and the
// line its owner reads once it is registered. Pure functions of what the agent knows, so that the
// agent stays a façade.
//
// Rules:
// - CPUs, memory and slots: the owner's settings (worker.toml or its flags) over the command line's,
//   over the whole machine.
// - Cached models: complete ones only, at most api::k_max_cached_models (the most recently used
//   first when there are more). Free cache space is rounded down to whole GiB, so that ordinary disk
//   use does not make every heartbeat carry a "changed" inventory.
#pragma once

#include "core/api/inventory.hpp"
#include "worker/agent/agent.hpp"
#include "worker/cache/hub_cache.hpp"
#include "worker/gpu/gpu_probe.hpp"

#include <string>
#include <vector>

namespace gpupool::worker {

struct OfferInputs {
    std::vector<GpuInfo> gpus;   // the GPUs the owner shares
    MemoryEnforcement enforcement = MemoryEnforcement::none;
    std::string runtime;         // the runtime's name
    const HubCache* models = nullptr; // the model cache, when the worker keeps one
};

api::Inventory offer_inventory(const OfferInputs& in, const ShareSettings& share, const AgentOptions& opt);

// "sharing with URL as worker 7: 8 CPUs, 31 GiB memory, GPU 0 NVIDIA L4 (22.5 GiB, shares enforced by
// the watchdog); jobs run with podman".
std::string offer_line(const OfferInputs& in, const api::Inventory& inv, const std::string& url, std::int64_t worker_id);

} // namespace gpupool::worker
