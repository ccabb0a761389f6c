#include "cmd/jobs_view.hpp"

#include "cmd/recipe_sources.hpp"
#include "cmd/remote.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/sha256.hpp"
#include "core/util/strings.hpp"

#include <algorithm>
#include <iostream>

namespace gpupool::cmd {

namespace res = gpupool::resources;

void add_recipe_args(CLI::App* sub, RecipeArgs& args) {
    sub->add_option("recipe", args.file, "Recipe file (TOML), or the name of a recipe in a recipe repository")
        ->required();
    // One value per --set and per --repo, so neither swallows the positional after it.
    sub->add_option("--set", args.set, "Override a recipe key: --set resources.gpu=0.5 (value is TOML; repeatable)")
        ->allow_extra_args(false);
    sub->add_option("--max-jobs", args.max_jobs, "Refuse sweeps that expand to more jobs than this")
        ->capture_default_str();
    sub->add_flag("--allow-outside", args.allow_outside,
                  "Accept [inputs] paths outside the recipe's directory (they are uploaded with the job)");
    sub->add_option("--repo", args.repos,
                    "Recipe repository (URL or path, @REV to pin, #FOLDER for its recipes' folder) to find named "
                    "recipes in, instead of the config's `recipes` (repeatable; the first wins on a name clash)")
        ->allow_extra_args(false);
}

std::optional<std::pair<recipe::Recipe, std::vector<recipe::JobSpec>>> load_recipe(const GlobalOptions& global,
                                                                                   const RecipeArgs& args) {
    recipe::ParseOptions options;
    options.max_sweep_jobs = args.max_jobs;
    options.allow_outside_inputs = args.allow_outside;
    for (const auto& kv : args.set) {
        auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) {
            report_error(global, make_error(ErrorCode::invalid_input,
                                            "`--set " + kv + "`: expected KEY=VALUE, like resources.gpu=0.5", "--set"));
            return std::nullopt;
        }
        options.overrides.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    Result<recipe::Recipe> parsed = make_error(ErrorCode::internal, "not parsed");
    std::filesystem::path file = args.file; // the recipe file parsed, whose digest each job keeps
    if (catalog::names_a_recipe(args.file)) {
        auto cat = open_catalog(global, args.repos);
        if (!cat) {
            report_error(global, cat.error());
            return std::nullopt;
        }
        auto entry = catalog::find_recipe(*cat, args.file, "no recipe file `" + util::escape_control(args.file) + "`");
        if (!entry) {
            report_error(global, entry.error());
            return std::nullopt;
        }
        options = cat->parse_options(**entry, std::move(options));
        file = (*entry)->file();
        parsed = recipe::parse_recipe_file(file, options);
    } else {
        options.resolve_name = lazy_resolver(global, args.repos);
        parsed = recipe::parse_recipe_file(args.file, options);
    }
    if (!parsed) {
        report_error(global, parsed.error());
        return std::nullopt;
    }
    auto jobs = recipe::expand(*parsed, options);
    if (!jobs) {
        report_error(global, jobs.error());
        return std::nullopt;
    }
    // For the jobs' manifests (docs/evidence.md): the text as read just now (a built-in has no file).
    if (auto digest = util::sha256_file_hex(file)) {
        for (auto& job : *jobs) {
            job.recipe_sha256 = *digest;
        }
    }
    return std::make_pair(std::move(*parsed), std::move(*jobs));
}

namespace {

std::string gpu_cell(const recipe::Resources& r) {
    if (r.gpus == 0) {
        return "-";
    }
    if (r.gpu_memory_mib > 0) {
        return res::format_memory_mib(r.gpu_memory_mib);
    }
    return res::format_milli(r.gpu_milli);
}

std::string command_cell(const recipe::JobSpec& job) {
    std::string text;
    if (job.shell) {
        text = job.command.front();
    } else {
        std::vector<std::string> quoted;
        for (const auto& a : job.command) {
            quoted.push_back(util::shell_quote(a));
        }
        text = util::join(quoted, " ");
    }
    std::replace(text.begin(), text.end(), '\n', ' ');
    constexpr std::size_t k_max = 60;
    if (text.size() > k_max) {
        text = text.substr(0, k_max - 3) + "...";
    }
    return text;
}

} // namespace

void print_jobs(const GlobalOptions& global, const recipe::Recipe& recipe, const std::vector<recipe::JobSpec>& jobs,
                const nlohmann::json* estimate) {
    if (global.json) {
        nlohmann::ordered_json out = {
            {"recipe", recipe.source},  {"extends", recipe.extends},     {"max_parallel", recipe.sweep.max_parallel},
            {"job_count", jobs.size()}, {"jobs", recipe::to_json(jobs)},
        };
        if (estimate != nullptr) {
            out["estimate"] = *estimate;
        }
        std::cout << out.dump(2) << '\n';
        return;
    }
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"#", "NAME", "GPU", "CPUS", "MEMORY", "MAX_RUNTIME", "PRIORITY", "PARAMS", "COMMAND"});
    for (const auto& job : jobs) {
        std::vector<std::string> params;
        for (const auto& [k, v] : job.params) {
            params.push_back(k + "=" + v);
        }
        rows.push_back({std::to_string(job.sweep_index), job.name, gpu_cell(job.resources),
                        res::format_milli(job.resources.cpu_milli), res::format_memory_mib(job.resources.memory_mib),
                        res::format_duration_s(job.resources.max_runtime_s), recipe::to_string(job.priority),
                        params.empty() ? "-" : util::join(params, ","), command_cell(job)});
    }
    print_table(rows);
    std::cout << jobs.size() << (jobs.size() == 1 ? " job" : " jobs") << " from " << recipe.source;
    if (!recipe.extends.empty()) {
        std::cout << " (extends " << util::join(recipe.extends, " <- ") << ")";
    }
    if (!jobs.empty()) {
        std::cout << "; image " << jobs.front().image;
    }
    if (recipe.sweep.max_parallel > 0) {
        std::cout << "; at most " << recipe.sweep.max_parallel << " at a time";
    }
    std::cout << '\n';
}

} // namespace gpupool::cmd
