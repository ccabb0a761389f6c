// Printing expanded jobs (for `recipe validate` and `submit --dry-run`) as a table or JSON.
#pragma once

#include "cmd/cli_app.hpp"
#include "core/recipe/parser.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace gpupool::cmd {

// Options shared by every command that reads a recipe file.
struct RecipeArgs {
    std::string file;
    std::vector<std::string> set; // key=value
    std::uint64_t max_jobs = recipe::k_default_max_sweep_jobs;
    bool allow_outside = false;     // inputs outside the recipe's directory
    std::vector<std::string> repos; // --repo: recipe repositories instead of the config's
};

void add_recipe_args(CLI::App* sub, RecipeArgs& args);

// Parses and expands the recipe (a file, or a name in the recipe repositories: core/catalog/resolve.hpp);
// prints problems and returns nothing on failure.
std::optional<std::pair<recipe::Recipe, std::vector<recipe::JobSpec>>> load_recipe(const GlobalOptions& global,
                                                                                   const RecipeArgs& args);

// The expanded jobs as a table, or as JSON with --json (then with `estimate` when one is given).
void print_jobs(const GlobalOptions& global, const recipe::Recipe& recipe, const std::vector<recipe::JobSpec>& jobs,
                const nlohmann::json* estimate = nullptr);

} // namespace gpupool::cmd
