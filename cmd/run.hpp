// `gpupool run RECIPE.toml`: the embedded default — a coordinator on loopback and a worker in this
// process run the recipe's jobs, in a container engine when one answers, else as bare processes;
// logs and outputs come back under --out, never over an earlier run's unless --force. register_run(Cli&)
// (cli.hpp) declares the options; run_run does the work and returns the exit code (0 when every job
// succeeded, 1 otherwise, 2 for a usage error), so tests call it without argv.
#pragma once

#include "cmd/cli.hpp"
#include "cmd/jobs_view.hpp"
#include "cmd/model_sizing.hpp"

#include <string>
#include <vector>

namespace gpupool::cmd {

// --runtime auto: the first container engine that answers (podman, then docker), else process.
inline constexpr const char* k_auto_runtime = "auto";

struct RunOptions {
    RecipeArgs recipe{};
    std::string runtime = k_auto_runtime;
    std::vector<std::string> runtime_args{};
    std::string out_dir = "gpupool-out";
    std::string data_dir{};
    bool force = false; // replace what an earlier run left in out_dir
    SizingArgs sizing{}; // where the models' config.json come from (GPU memory sized as submit does)
};

int run_run(const GlobalOptions& global, const RunOptions& o);

} // namespace gpupool::cmd
