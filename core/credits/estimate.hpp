// What a recipe's jobs may cost before they run: the pricing behind `gpupool price` and
// `submit --dry-run`, offline from the rate and cloud price catalogs.
//
// Rules:
// - Each job is charged for its whole max_runtime (an upper bound: "at most").
// - CPU-only jobs cost the same on every model; a GPU model whose memory is below the largest
//   gpu_memory any job asks for is left out (the jobs do not fit on it).
// - On each model that fits, a GPU job pays rate(model) x billed share x max_runtime (rates.hpp),
//   and the same GPU-hours are priced at every cloud offer for that model.
// - A model is "accepted" when every job's gpu_models allows it (or names none).
// - The models are ordered by their total, cheapest first.
// Pure and thread-safe; the catalogs are arguments.
#pragma once

#include "core/credits/catalog.hpp"
#include "core/credits/money.hpp"
#include "core/credits/rates.hpp"
#include "core/recipe/recipe.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::credits {

// The jobs' GPU-hours at one cloud offer.
struct CloudCost {
    const CloudPrice* price = nullptr; // in the PriceCatalog passed in
    Micro micro_usd = 0;
};

struct ModelCost {
    const GpuRate* gpu = nullptr; // in the RateCatalog passed in
    bool accepted = false;        // every job's gpu_models allows this model
    Micro max_micro = 0;          // all jobs (CPU-only ones included) at most, in micro-credits
    std::int64_t gpu_milli_seconds = 0; // billed share x runtime: GPU-hours x 3.6e6
    std::vector<CloudCost> cloud{};

    double gpu_hours() const { return static_cast<double>(gpu_milli_seconds) / 3.6e6; }
};

struct CostEstimate {
    Micro cpu_only_max_micro = 0;    // the CPU-only jobs, at most
    std::vector<ModelCost> models{}; // cheapest first; empty when no job asks for a GPU
};

CostEstimate estimate_cost(const std::vector<recipe::JobSpec>& jobs, const RateCatalog& rates,
                           const PriceCatalog& prices);

// A cheaper model than the one the jobs may land on.
struct CheaperModel {
    const ModelCost* cheapest = nullptr;   // in the estimate
    const ModelCost* instead_of = nullptr; // the priciest accepted model, or the one the pool named
    bool restricted = false; // the jobs name gpu_models (or the pool chose a model): not free to move
};

// The cheapest model when it costs less than the one the jobs may land on: the priciest accepted
// model, or `pool_gpu_model` (the model the pool's estimate names, when it answered) when it is in
// the estimate. nullopt when there is nothing cheaper.
std::optional<CheaperModel> cheaper_model(const CostEstimate& estimate, const std::vector<recipe::JobSpec>& jobs,
                                          const RateCatalog& rates, const std::optional<std::string>& pool_gpu_model);

} // namespace gpupool::credits
