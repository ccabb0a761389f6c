#include "core/recipe/field_rules.hpp"
#include "core/recipe/sections.hpp"
#include "core/recipe/toml_values.hpp"
#include "core/resources/model_memory.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/strings.hpp"

#include <system_error>

namespace gpupool::recipe::detail {

namespace {

namespace fs = std::filesystem;
namespace res = gpupool::resources;

const std::vector<std::string> k_inputs_keys{"paths", "max_size"};
const std::vector<std::string> k_outputs_keys{"paths", "max_size"};
const std::vector<std::string> k_logs_keys{"max_size"};
const std::vector<std::string> k_cache_keys{"models", "dtype", "max_tokens", "batch"};

std::int64_t tree_bytes(const fs::path& p, std::error_code& ec) {
    if (fs::is_regular_file(p, ec)) {
        return static_cast<std::int64_t>(fs::file_size(p, ec));
    }
    std::int64_t total = 0;
    for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (it->is_regular_file(ec)) {
            total += static_cast<std::int64_t>(it->file_size(ec));
        }
    }
    return total;
}

// True when `real` (symlinks resolved) is `base_dir` (the current directory when empty) or under it.
bool is_within(const fs::path& real, const fs::path& base_dir) {
    std::error_code ec;
    const fs::path base = fs::weakly_canonical(base_dir.empty() ? fs::current_path() : base_dir, ec);
    const fs::path rel = real.lexically_relative(base);
    return !ec && !rel.empty() && *rel.begin() != "..";
}

} // namespace

void parse_inputs(const toml::table& t, Inputs& in, const fs::path& base_dir, const ParseOptions& options,
                  Diagnostics& diag) {
    check_keys(t, k_inputs_keys, "inputs", diag);
    if (const auto* n = t.get("max_size")) {
        if (auto v = expect_memory(*n, "inputs.max_size", diag)) {
            if (*v > k_max_inputs_mib) {
                diag.add(*n, "inputs.max_size",
                         "is larger than the pool's cap of " + res::format_memory_mib(k_max_inputs_mib) +
                             "; put large data in the model cache or fetch it inside the job");
            } else {
                in.max_size_mib = *v;
            }
        }
    }
    const toml::node* paths = t.get("paths");
    if (paths == nullptr) {
        return;
    }
    auto list = expect_string_list(*paths, "inputs.paths", diag);
    if (!list) {
        return;
    }
    in.paths = *list;
    if (!options.allow_file_access) {
        return;
    }
    const auto* arr = paths->as_array();
    for (std::size_t i = 0; i < list->size(); ++i) {
        fs::path p((*list)[i]);
        fs::path full = p.is_absolute() ? p : (base_dir.empty() ? fs::current_path() : base_dir) / p;
        std::error_code ec;
        if (!fs::exists(full, ec)) {
            diag.add(*arr->get(i), "inputs.paths[" + std::to_string(i) + "]",
                     "input `" + (*list)[i] + "` does not exist (looked for " + full.string() + ")");
            continue;
        }
        const fs::path real = fs::weakly_canonical(full, ec);
        if (!options.allow_outside_inputs && !is_within(real, base_dir)) {
            diag.add(*arr->get(i), "inputs.paths[" + std::to_string(i) + "]",
                     "input `" + (*list)[i] + "` is outside the recipe's directory (it is " + real.string() +
                         ") and would be uploaded with the job; move it into the directory, or pass --allow-outside");
            continue;
        }
        in.resolved.push_back(real.string());
        in.total_bytes += tree_bytes(full, ec);
    }
    if (in.total_bytes > in.max_size_mib * 1024 * 1024) {
        diag.add(*paths, "inputs.paths",
                 "inputs add up to " + res::format_memory_mib((in.total_bytes + (1 << 20) - 1) >> 20) +
                     ", more than max_size " + res::format_memory_mib(in.max_size_mib));
    }
}

void parse_outputs(const toml::table& t, Outputs& out, Diagnostics& diag) {
    check_keys(t, k_outputs_keys, "outputs", diag);
    if (const auto* n = t.get("max_size")) {
        if (auto v = expect_memory(*n, "outputs.max_size", diag)) {
            if (*v > k_max_outputs_mib) {
                diag.add(*n, "outputs.max_size", "is larger than the pool's cap of " + res::format_memory_mib(k_max_outputs_mib));
            } else {
                out.max_size_mib = *v;
            }
        }
    }
    if (const auto* n = t.get("paths")) {
        if (auto list = expect_string_list(*n, "outputs.paths", diag)) {
            const auto* arr = n->as_array();
            for (std::size_t i = 0; i < list->size(); ++i) {
                if (auto st = check_output_path((*list)[i]); !st) {
                    diag.add(*arr->get(i), "outputs.paths[" + std::to_string(i) + "]", st.error().message);
                }
            }
            if (list->empty()) {
                diag.add(*n, "outputs.paths", "must list at least one path (or be left out to collect everything)");
            }
            out.paths = std::move(*list);
        }
    }
}

void parse_logs(const toml::table& t, Logs& logs, Diagnostics& diag) {
    check_keys(t, k_logs_keys, "logs", diag);
    if (const auto* n = t.get("max_size")) {
        if (auto v = expect_memory(*n, "logs.max_size", diag)) {
            if (*v > k_max_log_mib) {
                diag.add(*n, "logs.max_size", "is larger than any pool allows (" + res::format_memory_mib(k_max_log_mib) +
                                                  "); the pool's own limit is checked at submit");
            } else {
                logs.max_size_mib = *v;
            }
        }
    }
}

void parse_cache(const toml::table& t, std::vector<std::string>& models, res::ModelUse& use, Diagnostics& diag) {
    check_keys(t, k_cache_keys, "cache", diag);
    if (const auto* n = t.get("dtype")) {
        if (auto v = expect_string(*n, "cache.dtype", diag)) {
            if (res::is_model_dtype(*v)) {
                use.dtype = *v;
            } else {
                diag.add(*n, "cache.dtype",
                         "`" + util::escape_control(*v) + "` is not a dtype gpupool can size: one of " +
                             res::k_model_dtypes);
            }
        }
    }
    if (const auto* n = t.get("max_tokens")) {
        if (auto v = expect_integer(*n, "cache.max_tokens", diag, 1, res::k_max_model_tokens)) {
            use.max_tokens = *v;
        }
    }
    if (const auto* n = t.get("batch")) {
        if (auto v = expect_integer(*n, "cache.batch", diag, 1, res::k_max_model_batch)) {
            use.batch = *v;
        }
    }
    if (const auto* n = t.get("models")) {
        if (auto list = expect_string_list(*n, "cache.models", diag)) {
            const auto* arr = n->as_array();
            for (std::size_t i = 0; i < list->size(); ++i) {
                if (auto st = check_model_id((*list)[i]); !st) {
                    diag.add(*arr->get(i), "cache.models[" + std::to_string(i) + "]", st.error().message);
                }
            }
            models = std::move(*list);
        }
    }
}

} // namespace gpupool::recipe::detail
