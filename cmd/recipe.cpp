#include "cmd/recipe.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/jobs_view.hpp"
#include "core/recipe/builtin.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace {

int run_recipe_validate(const GlobalOptions& global, const RecipeArgs& args) {
    auto loaded = load_recipe(global, args);
    if (!loaded) {
        return k_exit_failed;
    }
    print_jobs(global, loaded->first, loaded->second);
    return k_exit_ok;
}

int run_recipe_builtins(const GlobalOptions& global) {
    auto names = recipe::builtin_recipe_names();
    if (global.json) {
        std::cout << nlohmann::json(names).dump() << '\n';
    } else {
        for (const auto& n : names) {
            std::cout << n << '\n';
        }
    }
    return k_exit_ok;
}

int run_recipe_show(const GlobalOptions& global, const std::string& name) {
    auto text = recipe::builtin_recipe(name);
    if (!text) {
        report_error(global, make_error(ErrorCode::not_found, "no built-in recipe `" + name +
                                                                  "`; `gpupool recipe builtins` lists them"));
        return k_exit_failed;
    }
    std::cout << *text;
    return k_exit_ok;
}

} // namespace

int run_recipe(const RecipeOptions& options) {
    switch (options.action) {
    case RecipeAction::validate: return run_recipe_validate(options.global, options.recipe);
    case RecipeAction::builtins: return run_recipe_builtins(options.global);
    case RecipeAction::show: return run_recipe_show(options.global, options.name);
    }
    return k_exit_usage;
}

void register_recipe(Cli& cli) {
    CLI::App* sub = add_command(cli, "recipe", "Check recipes and list the built-in ones (no coordinator needed)");
    add_help_footer(sub, "gpupool recipe validate eval.toml --set n=3\ngpupool recipe builtins\ngpupool recipe show inspect", "docs/recipes.md", Reach::local);
    sub->require_subcommand(1);

    auto opts = std::make_shared<RecipeOptions>();
    auto run_as = [&cli, opts](RecipeAction action) {
        return [&cli, opts, action] {
            opts->global = cli.global;
            opts->action = action;
            cli.exit_code = run_recipe(*opts);
        };
    };
    CLI::App* validate = sub->add_subcommand("validate", "Validate a recipe and print the jobs it expands to");
    validate->fallthrough();
    add_recipe_args(validate, opts->recipe);
    validate->callback(run_as(RecipeAction::validate));

    CLI::App* builtins = sub->add_subcommand("builtins", "List the built-in recipes that `extends` may name");
    builtins->fallthrough();
    builtins->callback(run_as(RecipeAction::builtins));

    CLI::App* show = sub->add_subcommand("show", "Print a built-in recipe");
    show->fallthrough();
    show->add_option("name", opts->name, "Built-in recipe name")->required();
    show->callback(run_as(RecipeAction::show));
}

} // namespace gpupool::cmd
