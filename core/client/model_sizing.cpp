// A job's GPU memory from its models, and the refusal below their weights (model_sizing.hpp).
#include "core/client/model_sizing.hpp"

#include "core/resources/quantity.hpp"

#include <cstdio>

namespace gpupool::client {

namespace {

constexpr std::int64_t k_sizing_mib = std::int64_t{1} << 20;

std::string sized_models_text(const std::vector<resources::NamedShape>& shapes) {
    std::string out;
    for (const auto& s : shapes) {
        out += (out.empty() ? "" : " + ") + s.model;
    }
    return out;
}

std::string join_unavailable(const std::vector<std::string>& why) {
    std::string out;
    for (const auto& w : why) {
        out += (out.empty() ? "" : "; ") + w;
    }
    return out;
}

// The largest memory among the job's gpu_models that the catalog knows, and that GPU's name.
std::optional<credits::GpuRate> largest_accepted_gpu(const recipe::Resources& r, const credits::RateCatalog& catalog) {
    std::optional<credits::GpuRate> best;
    for (const auto& name : r.gpu_models) {
        const credits::GpuRate* g = catalog.find(name);
        if (g != nullptr && g->memory_mib > 0 && (!best || g->memory_mib > best->memory_mib)) {
            best = *g;
        }
    }
    return best;
}

} // namespace

std::string gib_of_bytes(std::int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30));
    return buf;
}

GpuSizing size_gpu_memory(const recipe::JobSpec& job, const ModelShapes& models, const credits::RateCatalog& catalog) {
    GpuSizing out;
    const recipe::Resources& r = job.resources;
    if (job.cache_models.empty() || r.gpus == 0) {
        return out;
    }
    const bool whole_gpu = r.gpu_memory_mib == 0 && r.gpu_milli == resources::k_milli_per_unit;
    if (r.gpu_memory_mib > 0) {
        out.asked_mib = r.gpu_memory_mib;
        out.asked_by = "resources.gpu_memory";
    } else if (!whole_gpu) {
        if (auto gpu = largest_accepted_gpu(r, catalog)) {
            out.asked_mib = r.gpu_milli * gpu->memory_mib / resources::k_milli_per_unit;
            out.asked_by = "resources.gpu = " + resources::format_milli(r.gpu_milli) + " of " + gpu->model + "'s " +
                           gib_of_bytes(gpu->memory_mib * k_sizing_mib);
        }
    }
    if (!models.unavailable.empty()) {
        out.outcome = SizingOutcome::skipped;
        out.message = join_unavailable(models.unavailable) +
                      (whole_gpu ? "; set [resources] gpu_memory in the recipe"
                                 : "; the recipe's GPU memory is not checked against its models");
        return out;
    }
    auto memory = resources::models_memory(models.shapes, job.model_use);
    if (!memory) {
        out.outcome = SizingOutcome::skipped;
        out.message = memory.error().message + "; set [resources] gpu_memory in the recipe";
        return out;
    }
    out.memory = *memory;
    out.estimate_mib = (memory->total_bytes() + k_sizing_mib - 1) / k_sizing_mib;
    if (whole_gpu) {
        if (out.estimate_mib > resources::k_max_memory_mib) {
            out.outcome = SizingOutcome::refused;
            out.message = "the estimate, " + gib_of_bytes(memory->total_bytes()) + ", is more than any GPU has";
            return out;
        }
        out.outcome = SizingOutcome::estimated;
        return out;
    }
    if (out.asked_by.empty()) {
        out.outcome = SizingOutcome::skipped;
        out.message = "a share of " + resources::format_milli(r.gpu_milli) +
                      " GPU is not checked against the models: its memory depends on the GPU it lands on (name "
                      "resources.gpu_models, or ask for gpu_memory)";
        return out;
    }
    const std::int64_t asked_bytes = out.asked_mib * k_sizing_mib;
    if (asked_bytes < memory->weight_bytes) {
        out.outcome = SizingOutcome::refused;
        out.message = sized_models_text(models.shapes) + " in " + memory->dtype + ": " +
                      gib_of_bytes(memory->weight_bytes) + " of weights; the recipe asks " + gib_of_bytes(asked_bytes) +
                      " (" + out.asked_by + ")";
        return out;
    }
    out.outcome = SizingOutcome::checked;
    if (asked_bytes < memory->total_bytes()) {
        out.message = "the recipe asks " + gib_of_bytes(asked_bytes) + " (" + out.asked_by + "), less than the " +
                      gib_of_bytes(memory->total_bytes()) +
                      " estimated: the weights fit, the KV cache and the overhead may not";
    }
    return out;
}

void apply_gpu_sizing(recipe::JobSpec& job, const GpuSizing& sizing) {
    if (sizing.outcome != SizingOutcome::estimated) {
        return;
    }
    job.resources.gpu_milli = 0;
    job.resources.gpu_memory_mib = sizing.estimate_mib;
}

} // namespace gpupool::client
