#include "core/credits/estimate.hpp"

#include <algorithm>

namespace gpupool::credits {

namespace {

bool accepts(const recipe::JobSpec& spec, const GpuRate& g, const RateCatalog& rates) {
    const auto& models = spec.resources.gpu_models;
    if (models.empty()) {
        return true;
    }
    return std::any_of(models.begin(), models.end(), [&](const std::string& m) {
        const GpuRate* r = rates.find(m);
        return r != nullptr && r->model == g.model;
    });
}

std::vector<CloudCost> cloud_costs(const GpuRate& g, std::int64_t gpu_milli_seconds, const RateCatalog& rates,
                                   const PriceCatalog& prices) {
    std::vector<CloudCost> out;
    for (const auto& p : prices.prices) {
        const GpuRate* pm = rates.find(p.gpu);
        if (pm == nullptr || pm->model != g.model) {
            continue;
        }
        // micro-dollars per GPU-hour x milli-GPU-seconds / (1000 x 3600)
        const auto usd = static_cast<Micro>(static_cast<long double>(p.micro_usd_per_gpu_hour) *
                                            static_cast<long double>(gpu_milli_seconds) / 3.6e6L);
        out.push_back({&p, usd});
    }
    return out;
}

// The jobs on model `g`; `cpu_total` is what the CPU-only jobs cost anywhere.
ModelCost model_cost(const GpuRate& g, const std::vector<recipe::JobSpec>& jobs, Micro cpu_total,
                     const RateCatalog& rates, const PriceCatalog& prices) {
    ModelCost m;
    m.gpu = &g;
    m.max_micro = cpu_total;
    for (const auto& s : jobs) {
        if (s.resources.gpus == 0) {
            continue;
        }
        const std::int64_t share = billed_share_milli(s.resources.gpu_milli, s.resources.gpu_memory_mib, g.memory_mib) *
                                   std::max<std::int64_t>(1, s.resources.gpus);
        m.max_micro += cost_of(gpu_price_per_hour(g.micro_per_gpu_hour, share), s.resources.max_runtime_s * 1000);
        m.gpu_milli_seconds += share * s.resources.max_runtime_s;
    }
    m.cloud = cloud_costs(g, m.gpu_milli_seconds, rates, prices);
    m.accepted = std::all_of(jobs.begin(), jobs.end(), [&](const recipe::JobSpec& s) { return accepts(s, g, rates); });
    return m;
}

} // namespace

CostEstimate estimate_cost(const std::vector<recipe::JobSpec>& jobs, const RateCatalog& rates,
                           const PriceCatalog& prices) {
    CostEstimate out;
    std::int64_t need_gpu_mem = 0; // the most GPU memory any job asks for by size
    bool any_gpu = false;
    for (const auto& s : jobs) {
        need_gpu_mem = std::max(need_gpu_mem, s.resources.gpu_memory_mib);
        any_gpu = any_gpu || s.resources.gpus > 0;
        if (s.resources.gpus == 0) {
            out.cpu_only_max_micro += cost_of(cpu_price_per_hour(rates.cpu_micro_per_core_hour, s.resources.cpu_milli),
                                              s.resources.max_runtime_s * 1000);
        }
    }
    if (!any_gpu) {
        return out;
    }
    for (const auto& g : rates.gpus) {
        if (g.memory_mib >= need_gpu_mem) { // else the jobs do not fit
            out.models.push_back(model_cost(g, jobs, out.cpu_only_max_micro, rates, prices));
        }
    }
    std::sort(out.models.begin(), out.models.end(),
              [](const ModelCost& a, const ModelCost& b) { return a.max_micro < b.max_micro; });
    return out;
}

std::optional<CheaperModel> cheaper_model(const CostEstimate& estimate, const std::vector<recipe::JobSpec>& jobs,
                                          const RateCatalog& rates, const std::optional<std::string>& pool_gpu_model) {
    const ModelCost* chosen = nullptr;
    const ModelCost* cheapest = estimate.models.empty() ? nullptr : &estimate.models.front();
    for (const auto& m : estimate.models) {
        if (m.accepted && (chosen == nullptr || m.max_micro > chosen->max_micro)) {
            chosen = &m;
        }
    }
    bool restricted =
        std::any_of(jobs.begin(), jobs.end(), [](const recipe::JobSpec& s) { return !s.resources.gpu_models.empty(); });
    if (pool_gpu_model) {
        restricted = restricted || !pool_gpu_model->empty();
        const GpuRate* r = rates.find(*pool_gpu_model);
        for (const auto& m : estimate.models) {
            if (r != nullptr && m.gpu->model == r->model) {
                chosen = &m;
            }
        }
    }
    if (chosen == nullptr || cheapest == nullptr || cheapest->max_micro >= chosen->max_micro) {
        return std::nullopt;
    }
    return CheaperModel{cheapest, chosen, restricted};
}

} // namespace gpupool::credits
