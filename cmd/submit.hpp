// `gpupool submit`: submits a recipe's jobs (or prices them with --dry-run).
// run_submit does the work for parsed options (tests call it without argv); register_submit
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"
#include "cmd/jobs_view.hpp"
#include "cmd/model_sizing.hpp"

#include <string>

namespace gpupool::cmd {

struct SubmitOptions {
    GlobalOptions global{};
    RecipeArgs recipe{};
    SizingArgs sizing{}; // where the models' config.json come from (GPU memory from the model)
    bool dry_run = false;
    bool wait = false;
    bool follow = false;
    bool allow_unfunded = false;
    std::string team{};
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_submit(const SubmitOptions& options);

} // namespace gpupool::cmd
