#include "core/recipe/field_rules.hpp"
#include "core/recipe/sections.hpp"
#include "core/recipe/toml_values.hpp"
#include "core/resources/quantity.hpp"

namespace gpupool::recipe::detail {

namespace {

namespace res = gpupool::resources;

const std::vector<std::string> k_resource_keys{"gpu",  "gpus",   "gpu_memory", "gpu_models",
                                               "cpus", "memory", "disk",       "max_runtime", "idle_timeout"};

// gpu / gpus / gpu_memory: one way to ask for a GPU (a share, a whole one, or an amount of memory).
void parse_gpu_request(const toml::table& t, Resources& r, Diagnostics& diag) {
    const toml::node* gpu = t.get("gpu");
    const toml::node* gpus = t.get("gpus");
    const toml::node* gpu_memory = t.get("gpu_memory");
    // -1 = not given (or invalid); plain integers keep GCC's flow analysis quiet.
    std::int64_t milli = -1;
    std::int64_t count = -1;
    std::int64_t mem = -1;
    if (gpu != nullptr) {
        auto v = expect_milli(*gpu, "resources.gpu", diag);
        if (v && *v == 0) {
            diag.add(*gpu, "resources.gpu", "a GPU share must be larger than 0; for a CPU-only job write `gpus = 0`");
        } else if (v && *v > res::k_milli_per_unit) {
            diag.add(*gpu, "resources.gpu",
                     "`gpu` is a share of one GPU and must be at most 1 (got " + res::format_milli(*v) +
                         "); jobs run on a single GPU");
        } else if (v) {
            milli = *v;
        }
    }
    if (gpus != nullptr) {
        if (gpus->is_integer() && gpus->as_integer()->get() > 1) {
            diag.add(*gpus, "resources.gpus",
                     "gpupool runs single-GPU jobs: `gpus` must be 0 or 1 (got " +
                         std::to_string(gpus->as_integer()->get()) + ")");
        } else if (auto v = expect_integer(*gpus, "resources.gpus", diag, 0, 1)) {
            count = *v;
        }
    }
    if (gpu_memory != nullptr) {
        if (auto v = expect_memory(*gpu_memory, "resources.gpu_memory", diag)) {
            mem = *v;
        }
    }
    if (gpu != nullptr && gpus != nullptr) {
        diag.add(*gpus, "resources.gpus",
                 "`gpu` and `gpus` are both set; use `gpu` for a share of a GPU or `gpus` for a whole one, not both");
    } else if (gpu != nullptr && gpu_memory != nullptr) {
        diag.add(*gpu_memory, "resources.gpu_memory",
                 "`gpu` and `gpu_memory` are both set; ask for a share (`gpu`) or an amount of memory "
                 "(`gpu_memory`), not both");
    } else if (gpus != nullptr && gpu_memory != nullptr && count == 0) {
        diag.add(*gpu_memory, "resources.gpu_memory", "`gpu_memory` is set but `gpus = 0` asks for no GPU");
    }
    if (milli > 0) {
        r.gpus = 1;
        r.gpu_milli = milli;
    } else if (mem > 0) {
        r.gpus = 1;
        r.gpu_memory_mib = mem;
    } else if (count >= 0) {
        r.gpus = count;
        r.gpu_milli = count == 1 ? res::k_milli_per_unit : 0;
    }
}

void parse_gpu_models(const toml::table& t, Resources& r, Diagnostics& diag) {
    const toml::node* gpu = t.get("gpu");
    const toml::node* gpu_memory = t.get("gpu_memory");
    if (const auto* n = t.get("gpu_models")) {
        if (auto models = expect_string_list(*n, "resources.gpu_models", diag)) {
            const auto* arr = n->as_array();
            for (std::size_t i = 0; i < models->size(); ++i) {
                if (has_control_character((*models)[i])) {
                    diag.add(*arr->get(i), "resources.gpu_models[" + std::to_string(i) + "]",
                             "a GPU model name has no control characters");
                }
            }
            if (models->empty()) {
                diag.add(*n, "resources.gpu_models", "must list at least one GPU model (or be left out)");
            } else if (r.gpus == 0 && gpu == nullptr && gpu_memory == nullptr) {
                diag.add_consequence(
                    *n, "resources.gpu_models",
                    "`gpu_models` is set but the job asks for no GPU; add `gpu`, `gpu_memory` or `gpus = 1`");
            }
            r.gpu_models = std::move(*models);
        }
    }
}

} // namespace

void parse_resources(const toml::table& t, Resources& r, Diagnostics& diag) {
    check_keys(t, k_resource_keys, "resources", diag);
    parse_gpu_request(t, r, diag);
    parse_gpu_models(t, r, diag);
    if (const auto* n = t.get("cpus")) {
        if (auto cpu = expect_milli(*n, "resources.cpus", diag)) {
            if (*cpu == 0) {
                diag.add(*n, "resources.cpus", "must be larger than 0");
            } else if (*cpu > 1024 * res::k_milli_per_unit) {
                diag.add(*n, "resources.cpus", "must be at most 1024");
            } else {
                r.cpu_milli = *cpu;
            }
        }
    }
    if (const auto* n = t.get("memory")) {
        if (auto v = expect_memory(*n, "resources.memory", diag)) {
            r.memory_mib = *v;
        }
    }
    if (const auto* n = t.get("disk")) {
        if (auto v = expect_memory(*n, "resources.disk", diag)) {
            r.disk_mib = *v;
        }
    }
    if (const auto* n = t.get("max_runtime")) {
        if (auto v = expect_duration(*n, "resources.max_runtime", diag)) {
            r.max_runtime_s = *v;
        }
    }
    if (const auto* n = t.get("idle_timeout")) {
        // "0" (any unit, or none) turns the idle guard off for this job.
        const auto* text = n->as_string();
        if (text != nullptr && (text->get() == "0" || text->get() == "0s" || text->get() == "0m")) {
            r.idle_timeout_s = 0;
        } else if (auto v = expect_duration(*n, "resources.idle_timeout", diag)) {
            r.idle_timeout_s = *v;
        }
    }
}

} // namespace gpupool::recipe::detail
