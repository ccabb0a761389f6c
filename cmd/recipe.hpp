// `gpupool recipe validate|builtins|show|list|get|new|update`: check a recipe and print the jobs it
// expands to; list, show and copy the recipes of the shared recipe repositories (core/catalog) and
// the built-ins; start a new project from a template; pull the repositories. No coordinator needed.
// run_recipe does the work for parsed options (tests call it without argv); register_recipe
// (cli.hpp) wires it to the command line. recipe.cpp holds validate, builtins and show;
// recipe_catalog.cpp the repository commands.
#pragma once

#include "cmd/cli.hpp"
#include "cmd/jobs_view.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::cmd {

enum class RecipeAction : std::uint8_t { validate, builtins, show, list, get, create, update };

struct RecipeOptions {
    GlobalOptions global{};
    RecipeAction action = RecipeAction::validate;
    RecipeArgs recipe{};              // validate
    std::string name{};               // show, get, new: a recipe's name
    std::vector<std::string> repos{}; // --repo, instead of the config's `recipes`
    std::string tag{};                // list --tag
    std::string dest{};               // get, new: the folder to write (default ./NAME)
    std::string template_name{"python"}; // new --template
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_recipe(const RecipeOptions& options);

// The repository commands (recipe_catalog.cpp).
int run_recipe_list(const RecipeOptions& options);
int run_recipe_show_repo(const RecipeOptions& options); // a name that is not built in
int run_recipe_get(const RecipeOptions& options);
int run_recipe_new(const RecipeOptions& options);
int run_recipe_update(const RecipeOptions& options);

} // namespace gpupool::cmd
