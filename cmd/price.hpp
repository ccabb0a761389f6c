// `gpupool price`: estimates a recipe's cost in credits and at cloud prices.
// run_price does the work for parsed options (tests call it without argv); register_price
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"
#include "cmd/jobs_view.hpp"
#include "cmd/model_sizing.hpp"

namespace gpupool::cmd {

struct PriceOptions {
    GlobalOptions global{};
    RecipeArgs recipe{};
    SizingArgs sizing{}; // where the models' config.json come from (GPU memory from the model)
    bool offline = false;
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_price(const PriceOptions& options);

} // namespace gpupool::cmd
