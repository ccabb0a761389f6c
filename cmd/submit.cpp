#include "cmd/cli_app.hpp"
#include "cmd/jobs_view.hpp"

#include <memory>

namespace gpupool::cmd {

struct SubmitOptions {
    RecipeArgs recipe;
    bool dry_run = false;
    bool wait = false;
    bool follow = false;
};

int run_submit(const GlobalOptions& global, const SubmitOptions& opts) {
    auto loaded = load_recipe(global, opts.recipe);
    if (!loaded) {
        return k_exit_failed;
    }
    if (opts.dry_run) {
        print_jobs(global, loaded->first, loaded->second);
        return k_exit_ok;
    }
    report_error(global, make_error(ErrorCode::not_implemented,
                                    "submitting to a coordinator is not implemented yet (it lands with issue #3); "
                                    "the recipe is valid: use --dry-run to see its jobs"));
    return k_exit_usage;
}

void register_submit(Cli& cli) {
    auto opts = std::make_shared<SubmitOptions>();
    CLI::App* sub = add_command(cli, "submit", "Submit a recipe (one job or a whole sweep) to the pool");
    add_recipe_args(sub, opts->recipe);
    sub->add_flag("--dry-run", opts->dry_run, "Validate and print the jobs without contacting the coordinator");
    sub->add_flag("--wait", opts->wait, "Wait for the jobs to finish");
    sub->add_flag("--follow,-f", opts->follow, "Stream the logs of a single job");
    sub->callback([&cli, opts] { cli.exit_code = run_submit(cli.global, *opts); });
}

} // namespace gpupool::cmd
