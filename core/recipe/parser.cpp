#include "core/recipe/parser.hpp"

#include "core/recipe/diagnostics.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/recipe/loader.hpp"
#include "core/recipe/placeholders.hpp"
#include "core/recipe/sections.hpp"
#include "core/recipe/toml_values.hpp"

#include <toml++/toml.h>

#include <algorithm>

// The document walk: load (with `extends`), apply `--set`, read each section (sections.hpp), check
// the placeholders, and expand a Recipe into its jobs.
namespace gpupool::recipe {

const char* to_string(Priority p) {
    switch (p) {
    case Priority::low: return "low";
    case Priority::normal: return "normal";
    case Priority::high: return "high";
    }
    return "normal";
}

const char* to_string(CompareMode m) {
    switch (m) {
    case CompareMode::exact:
        return "exact";
    case CompareMode::json:
        return "json";
    case CompareMode::none:
        return "none";
    }
    return "exact";
}

std::optional<CompareMode> compare_mode_from_string(std::string_view s) {
    for (auto m : {CompareMode::exact, CompareMode::json, CompareMode::none}) {
        if (s == to_string(m)) {
            return m;
        }
    }
    return std::nullopt;
}

std::vector<std::string> JobSpec::argv() const {
    if (shell) {
        return {"/bin/sh", "-c", command.empty() ? std::string() : command.front()};
    }
    return command;
}

std::uint64_t Sweep::job_count() const {
    std::uint64_t n = 1;
    for (const auto& p : params) {
        n *= p.values.size();
    }
    return n;
}

namespace {

namespace fs = std::filesystem;
using namespace gpupool::recipe::detail;

const std::vector<std::string> k_top_keys{"format",   "name",      "description", "image",  "command",    "extends",
                                          "priority", "resources", "env",         "inputs", "outputs",    "cache",
                                          "sweep",    "retry",     "logs",        "tags",   "checkpoint", "verify"};

void parse_tables(const toml::table& root, const fs::path& base_dir, const SourceTexts& texts,
                  const ParseOptions& options, Recipe& recipe, Diagnostics& diag) {
    JobSpec& job = recipe.base;
    if (const auto* n = root.get("resources")) {
        if (const auto* t = expect_table(*n, "resources", diag)) {
            parse_resources(*t, job.resources, diag);
        }
    }
    if (const auto* n = root.get("env")) {
        if (const auto* t = expect_table(*n, "env", diag)) {
            parse_env(*t, job.env, texts, diag);
        }
    }
    if (const auto* n = root.get("inputs")) {
        if (const auto* t = expect_table(*n, "inputs", diag)) {
            parse_inputs(*t, job.inputs, base_dir, options, diag);
        }
    }
    if (const auto* n = root.get("outputs")) {
        if (const auto* t = expect_table(*n, "outputs", diag)) {
            parse_outputs(*t, job.outputs, diag);
        }
    }
    if (const auto* n = root.get("logs")) {
        if (const auto* t = expect_table(*n, "logs", diag)) {
            parse_logs(*t, job.logs, diag);
        }
    }
    if (const auto* n = root.get("cache")) {
        if (const auto* t = expect_table(*n, "cache", diag)) {
            parse_cache(*t, job.cache_models, job.model_use, diag);
        }
    }
    if (const auto* n = root.get("retry")) {
        if (const auto* t = expect_table(*n, "retry", diag)) {
            parse_retry(*t, job.retry, diag);
        }
    }
    if (const auto* n = root.get("checkpoint")) {
        if (const auto* t = expect_table(*n, "checkpoint", diag)) {
            parse_checkpoint(*t, job.checkpoint, diag);
        }
    }
    if (const auto* n = root.get("verify")) {
        if (const auto* t = expect_table(*n, "verify", diag)) {
            parse_verify(*t, job.verify, diag);
        }
    }
    if (const auto* n = root.get("sweep")) {
        if (const auto* t = expect_table(*n, "sweep", diag)) {
            parse_sweep(*t, recipe.sweep, options, texts, diag);
        }
    }
}

// Placeholders may only name sweep parameters.
void check_all_placeholders(const toml::table& root, const Recipe& recipe, const Explained& explained,
                            Diagnostics& diag) {
    std::vector<std::string> names;
    for (const auto& p : recipe.sweep.params) {
        names.push_back(p.name);
    }
    const std::vector<std::string>& known = explained.placeholders;
    if (const auto* n = root.get("name"); n != nullptr && n->is_string()) {
        check_placeholders(*n, n->as_string()->get(), "name", names, known, diag);
        // The name holds no control characters, and neither may the values put into it.
        for (const auto& ph : find_placeholders(n->as_string()->get())) {
            for (const auto& p : recipe.sweep.params) {
                const bool bad = !ph.escaped && p.name == ph.name &&
                                 std::any_of(p.values.begin(), p.values.end(),
                                             [](const std::string& v) { return has_control_character(v); });
                if (bad) {
                    diag.add(*n, "name",
                             "`{" + p.name + "}` has a sweep value with a control character; a job name has none");
                }
            }
        }
    }
    if (const auto* n = root.get("command")) {
        if (const auto* s = n->as_string()) {
            check_placeholders(*n, s->get(), "command", names, known, diag);
        } else if (const auto* arr = n->as_array()) {
            for (std::size_t i = 0; i < arr->size(); ++i) {
                if (const auto* s2 = arr->get(i)->as_string()) {
                    check_placeholders(*arr->get(i), s2->get(), "command[" + std::to_string(i) + "]", names, known,
                                       diag);
                }
            }
        }
    }
    if (const auto* env = root.get("env"); env != nullptr && env->is_table()) {
        for (auto&& [key, value] : *env->as_table()) {
            if (const auto* s = value.as_string()) {
                check_placeholders(value, s->get(), "env." + std::string(key.str()), names, known, diag);
            }
        }
    }
}

Result<Recipe> build(Loaded loaded, std::vector<std::string> chain, std::vector<Origin> origins,
                     const ParseOptions& options) {
    Diagnostics diag;
    toml::table& root = loaded.table;
    for (const auto& [path, value] : options.overrides) {
        apply_override(root, path, value, loaded.texts, diag);
    }
    Recipe recipe;
    recipe.source = loaded.source;
    recipe.extends = std::move(chain);

    const Explained explained = explained_by(check_keys(root, k_top_keys, "", diag), root);
    parse_top(root, loaded.source, explained, recipe.base, diag);
    if (const auto* n = root.get("tags")) {
        parse_tags(*n, recipe.tags, diag);
    }
    if (options.origin) {
        recipe.base.origins.push_back(*options.origin);
    }
    recipe.base.origins.insert(recipe.base.origins.end(), origins.begin(), origins.end());
    parse_tables(root, loaded.base_dir, loaded.texts, options, recipe, diag);
    check_all_placeholders(root, recipe, explained, diag);

    if (!diag.empty()) {
        return diag.take();
    }
    return recipe;
}

} // namespace

Result<Recipe> parse_recipe_text(std::string_view text, std::string_view source_name, const ParseOptions& options,
                                 const std::filesystem::path& base_dir) {
    auto loaded = parse_toml(text, std::string(source_name), base_dir);
    if (!loaded) {
        return loaded.error();
    }
    Loader loader{options, {std::string(source_name)}, {}};
    auto resolved = loader.load(std::move(*loaded), 0);
    if (!resolved) {
        return resolved.error();
    }
    std::vector<std::string> chain(loader.chain.begin() + 1, loader.chain.end());
    return build(std::move(*resolved), std::move(chain), std::move(loader.origins), options);
}

Result<Recipe> parse_recipe_file(const std::filesystem::path& path, const ParseOptions& options) {
    auto text = read_file(path);
    if (!text) {
        return text.error();
    }
    return parse_recipe_text(*text, path.string(), options, path.parent_path());
}

Result<std::vector<JobSpec>> expand(const Recipe& recipe, const ParseOptions& options) {
    const std::uint64_t count = recipe.sweep.job_count();
    if (count > options.max_sweep_jobs) {
        Error e = make_error(ErrorCode::invalid_input,
                             "the sweep expands to " + std::to_string(count) + " jobs, more than the cap of " +
                                 std::to_string(options.max_sweep_jobs),
                             "sweep");
        e.where = SourcePos{recipe.source, 0, 0};
        return e;
    }
    const bool name_has_params = !find_placeholders(recipe.base.name).empty();
    std::vector<JobSpec> jobs;
    jobs.reserve(count);
    const auto& params = recipe.sweep.params;
    std::vector<std::size_t> idx(params.size(), 0);
    for (std::uint64_t n = 0; n < count; ++n) {
        JobSpec job = recipe.base;
        job.sweep_index = static_cast<std::int64_t>(n);
        for (std::size_t p = 0; p < params.size(); ++p) {
            job.params.emplace_back(params[p].name, params[p].values[idx[p]]);
        }
        job.name = substitute(recipe.base.name, job.params);
        if (!params.empty() && !name_has_params && count > 1) {
            job.name += "-" + std::to_string(n);
        }
        for (auto& arg : job.command) {
            arg = substitute(arg, job.params);
        }
        for (auto& [k, v] : job.env) {
            v = substitute(v, job.params);
        }
        jobs.push_back(std::move(job));
        // Row-major: the last parameter varies fastest.
        for (std::size_t p = params.size(); p-- > 0;) {
            if (++idx[p] < params[p].values.size()) {
                break;
            }
            idx[p] = 0;
        }
    }
    return jobs;
}

Result<std::vector<JobSpec>> load_jobs(const std::filesystem::path& path, const ParseOptions& options) {
    auto recipe = parse_recipe_file(path, options);
    if (!recipe) {
        return recipe.error();
    }
    return expand(*recipe, options);
}

} // namespace gpupool::recipe
