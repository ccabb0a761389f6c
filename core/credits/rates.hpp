// What GPU time costs in credits: the rate catalog and the pure pricing rules.
//
// Rates come from a GPU catalog (core/resources/gpus.toml, embedded in the binary; an operator may
// point the coordinator at another file). Every number is an integer: micro-credits per hour of a
// whole GPU (or of one CPU core for CPU-only jobs), milli-shares, milliseconds.
//
// Rules:
// - An attempt on a GPU pays rate(model) x share x time, where share (in milli-GPU) is the larger
//   of its milli-GPU and its memory share (ceil(gpu_memory_mib x 1000 / GPU memory)).
// - A CPU-only attempt pays the CPU rate per core-hour x its cores.
// - A GPU model absent from the catalog pays the catalog's default rate; the worker's registration
//   carries a warning naming it.
// - Costs round down to the micro-credit (the payer never pays for a fraction it did not use).
// Pure and thread-safe.
#pragma once

#include "core/credits/money.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::credits {

struct GpuRate {
    std::string model;                // as the catalog names it, e.g. "H100-80GB"
    std::vector<std::string> aliases; // other names the drivers report, e.g. "NVIDIA H100 80GB HBM3"
    std::int64_t memory_mib = 0;
    Micro micro_per_gpu_hour = 0;
};

struct RateCatalog {
    std::vector<GpuRate> gpus;
    Micro default_micro_per_gpu_hour = k_micro_per_credit;   // unknown models
    Micro cpu_micro_per_core_hour = k_micro_per_credit / 50; // CPU-only jobs
    std::string source;                                      // file it came from, for messages

    // The catalog entry for a reported model: exact name or alias (case-insensitive), else the
    // longest catalog name or alias contained in it ("NVIDIA L4" -> "L4"); nullptr when unknown.
    const GpuRate* find(std::string_view model) const;
    Micro gpu_rate(std::string_view model) const;
    // The entry a GPU reported as `model` with `memory_mib` reads as, when that memory clearly is
    // not the entry's: below 85 % or above 110 % of it (drivers report a little less than the
    // nominal size: an L4 says 22.5 of 24 GiB). nullptr when they agree, when the model is unknown,
    // or when the entry gives no memory. Such a GPU is priced at the entry's rate all the same.
    const GpuRate* memory_mismatch(std::string_view model, std::int64_t memory_mib) const;
};

// The share an attempt pays for, in milli-GPU (1..1000).
std::int64_t billed_share_milli(std::int64_t gpu_milli, std::int64_t gpu_memory_mib, std::int64_t gpu_total_mib);

// Micro-credits per hour for one attempt: a GPU attempt's rate x share, or a CPU-only attempt's
// CPU rate x cores.
Micro gpu_price_per_hour(Micro micro_per_gpu_hour, std::int64_t share_milli);
Micro cpu_price_per_hour(Micro micro_per_core_hour, std::int64_t cpu_milli);

// What an attempt uses, as its price reads it.
struct PricedUse {
    std::int64_t gpus = 0;           // 0: CPU-only; n > 1: n whole GPUs
    std::int64_t gpu_milli = 0;      // the share placed on each GPU
    std::int64_t gpu_memory_mib = 0; // when the job asked for memory rather than a share
    std::int64_t cpu_milli = 0;
};
// The GPU an attempt was placed on, as its price reads it.
struct PricedGpu {
    Micro micro_per_gpu_hour = 0; // its model's rate
    std::int64_t memory_mib = 0;  // its total memory (0: unknown)
};

// Micro-credits per hour for one attempt, the one rule the scheduler's holds and the coordinator's
// charges both follow: without a GPU, the CPU rate x cores; on a GPU, its rate x the billed share,
// x the number of GPUs.
Micro attempt_price_per_hour(const PricedUse& use, const std::optional<PricedGpu>& gpu, Micro micro_per_core_hour);

// price_per_hour x duration, rounded down; 0 for a non-positive duration.
Micro cost_of(Micro price_per_hour, std::int64_t duration_ms);

} // namespace gpupool::credits
