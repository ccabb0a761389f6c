#include "cmd/recipe.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/jobs_view.hpp"
#include "core/catalog/starters.hpp"
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

// A built-in prints as its TOML; any other name is looked up in the repositories.
int run_recipe_show(const RecipeOptions& options) {
    auto text = recipe::builtin_recipe(options.name);
    if (!text) {
        return run_recipe_show_repo(options);
    }
    if (options.global.json) {
        std::cout << nlohmann::json{{"name", options.name}, {"builtin", true}, {"recipe", std::string(*text)}}.dump()
                  << '\n';
    } else {
        std::cout << *text;
    }
    return k_exit_ok;
}

} // namespace

int run_recipe(const RecipeOptions& options) {
    switch (options.action) {
    case RecipeAction::validate: return run_recipe_validate(options.global, options.recipe);
    case RecipeAction::builtins: return run_recipe_builtins(options.global);
    case RecipeAction::show: return run_recipe_show(options);
    case RecipeAction::list: return run_recipe_list(options);
    case RecipeAction::get: return run_recipe_get(options);
    case RecipeAction::create: return run_recipe_new(options);
    case RecipeAction::update: return run_recipe_update(options);
    }
    return k_exit_usage;
}

namespace {

void add_repo_option(CLI::App* sub, RecipeOptions& opts) {
    // One value per --repo (allow_extra_args(false)): `get NAME --repo R DIR` leaves DIR to `dir`.
    sub->add_option("--repo", opts.repos,
                    "Recipe repository (URL or path, @REV to pin a revision, #FOLDER for the folder its recipes are "
                    "in) instead of the config's `recipes` (repeatable; the first wins on a name clash)")
        ->allow_extra_args(false);
}

} // namespace

void register_recipe(Cli& cli) {
    CLI::App* sub = add_command(cli, "recipe", "Find, copy, start and check recipes (no coordinator needed)");
    add_help_footer(sub,
                    "gpupool recipe list --tag eval          # the shared repositories' recipes\n"
                    "gpupool recipe show toy-eval\n"
                    "gpupool recipe get toy-eval my-eval     # a copy to edit\n"
                    "gpupool recipe new --template torch-cpu my-probe\n"
                    "gpupool recipe validate eval.toml --set n=3\n"
                    "gpupool recipe update                   # pull the repositories",
                    "docs/recipes.md", Reach::local);
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

    CLI::App* show = sub->add_subcommand("show", "Print a recipe: a built-in, or one from the recipe repositories");
    show->fallthrough();
    show->add_option("name", opts->name, "Recipe name")->required();
    add_repo_option(show, *opts);
    show->callback(run_as(RecipeAction::show));

    CLI::App* list = sub->add_subcommand("list", "List the recipes of the recipe repositories");
    list->fallthrough();
    list->add_option("--tag", opts->tag, "Only recipes with this tag");
    add_repo_option(list, *opts);
    list->callback(run_as(RecipeAction::list));

    CLI::App* get = sub->add_subcommand("get", "Copy a repository recipe's folder to edit it");
    get->fallthrough();
    get->add_option("name", opts->name, "Recipe name")->required();
    get->add_option("dir", opts->dest, "Folder to create (default: ./NAME)");
    add_repo_option(get, *opts);
    get->callback(run_as(RecipeAction::get));

    CLI::App* create = sub->add_subcommand("new", "Start a recipe project from a template");
    create->fallthrough();
    create->add_option("--template", opts->template_name, "Template")
        ->capture_default_str()
        ->check(CLI::IsMember(catalog::starter_names()));
    create->add_option("name", opts->name, "Recipe name (lowercase letters, digits, . _ -)")->required();
    create->add_option("dir", opts->dest, "Folder to create (default: ./NAME)");
    create->callback(run_as(RecipeAction::create));

    CLI::App* update = sub->add_subcommand("update", "Fetch the recipe repositories again (git pull for each clone)");
    update->fallthrough();
    add_repo_option(update, *opts);
    update->callback(run_as(RecipeAction::update));
}

} // namespace gpupool::cmd
