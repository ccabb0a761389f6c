#include "core/credits/rates.hpp"

#include "core/util/strings.hpp"

#include "core/resources/quantity.hpp"

#include <algorithm>
#include <cctype>

namespace gpupool::credits {

namespace {

using util::lower;

__extension__ typedef __int128 Wide; // exact products of rates, shares and milliseconds

} // namespace

const GpuRate* RateCatalog::find(std::string_view model) const {
    const std::string want = lower(model);
    for (const auto& g : gpus) {
        if (lower(g.model) == want) {
            return &g;
        }
        for (const auto& a : g.aliases) {
            if (lower(a) == want) {
                return &g;
            }
        }
    }
    const GpuRate* best = nullptr;
    std::size_t best_len = 0;
    for (const auto& g : gpus) {
        std::vector<std::string> names = g.aliases;
        names.push_back(g.model);
        for (const auto& n : names) {
            const std::string ln = lower(n);
            if (ln.size() > best_len && want.find(ln) != std::string::npos) {
                best = &g;
                best_len = ln.size();
            }
        }
    }
    return best;
}

Micro RateCatalog::gpu_rate(std::string_view model) const {
    const GpuRate* g = find(model);
    return g != nullptr ? g->micro_per_gpu_hour : default_micro_per_gpu_hour;
}

const GpuRate* RateCatalog::memory_mismatch(std::string_view model, std::int64_t memory_mib) const {
    const GpuRate* g = find(model);
    if (g == nullptr || g->memory_mib <= 0) {
        return nullptr;
    }
    const Wide declared = static_cast<Wide>(memory_mib) * 100;
    const Wide known = g->memory_mib;
    const bool agrees = declared >= known * 85 && declared <= known * 110;
    return agrees ? nullptr : g;
}

std::int64_t billed_share_milli(std::int64_t gpu_milli, std::int64_t gpu_memory_mib, std::int64_t gpu_total_mib) {
    std::int64_t memory_share = 0;
    if (gpu_memory_mib > 0 && gpu_total_mib > 0) {
        memory_share = resources::gpu_milli_for_memory(gpu_memory_mib, gpu_total_mib);
    }
    return std::clamp<std::int64_t>(std::max(gpu_milli, memory_share), 1, resources::k_milli_per_gpu);
}

Micro gpu_price_per_hour(Micro micro_per_gpu_hour, std::int64_t share_milli) {
    return static_cast<Micro>(static_cast<Wide>(micro_per_gpu_hour) * share_milli / 1000);
}

Micro cpu_price_per_hour(Micro micro_per_core_hour, std::int64_t cpu_milli) {
    return static_cast<Micro>(static_cast<Wide>(micro_per_core_hour) * cpu_milli / 1000);
}

Micro attempt_price_per_hour(const PricedUse& use, const std::optional<PricedGpu>& gpu, Micro micro_per_core_hour) {
    if (use.gpus == 0 || !gpu) {
        return cpu_price_per_hour(micro_per_core_hour, use.cpu_milli);
    }
    const std::int64_t share = billed_share_milli(use.gpu_milli, use.gpu_memory_mib, gpu->memory_mib);
    return gpu_price_per_hour(gpu->micro_per_gpu_hour, share) * std::max<std::int64_t>(1, use.gpus);
}

Micro cost_of(Micro price_per_hour, std::int64_t duration_ms) {
    if (duration_ms <= 0 || price_per_hour <= 0) {
        return 0;
    }
    return static_cast<Micro>(static_cast<Wide>(price_per_hour) * duration_ms / 3'600'000);
}

} // namespace gpupool::credits
