// `gpupool recipe validate|builtins|show`: checks a recipe and prints the jobs it expands to, lists
// the built-in recipes, prints one. No coordinator needed.
// run_recipe does the work for parsed options (tests call it without argv); register_recipe
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"
#include "cmd/jobs_view.hpp"

#include <cstdint>
#include <string>

namespace gpupool::cmd {

enum class RecipeAction : std::uint8_t { validate, builtins, show };

struct RecipeOptions {
    GlobalOptions global{};
    RecipeAction action = RecipeAction::validate;
    RecipeArgs recipe{}; // validate
    std::string name{};  // show: a built-in recipe's name
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_recipe(const RecipeOptions& options);

} // namespace gpupool::cmd
