// A recipe's GPU memory sized from its models, for `price`, `submit` and `submit --dry-run`
// (docs/evidence.md, "GPU memory from the model"): the options that say where each model's
// config.json comes from (core/client/model_config.hpp), the rules that size or refuse each job
// (core/client/model_sizing.hpp), and what is shown: one line in text, a `gpu_memory` object in JSON.
#pragma once

#include "cmd/cli.hpp"
#include "core/recipe/recipe.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace gpupool::cmd {

struct SizingArgs {
    std::vector<std::string> model_configs; // --model-config [MODEL=]PATH
    std::string hf_endpoint;                // --hf-endpoint; else $HF_ENDPOINT; else huggingface.co
    std::string hf_token_file;              // --hf-token-file; else $HF_TOKEN
};

void add_sizing_args(CLI::App* sub, SizingArgs& args);

struct RecipeSizing {
    nlohmann::json json;            // the `gpu_memory` object of --json outputs; null without models
    std::vector<std::string> lines; // what the text output shows (possibly none)
};

// Sizes every job that names models, setting the estimate as gpu_memory where the rules say so.
// `offline`: the hub is not asked (local configs still are). A recipe the rules refuse, or a bad
// option, is reported here (naming the recipe file) and gives nothing back.
std::optional<RecipeSizing> size_recipe(const GlobalOptions& global, const SizingArgs& args,
                                        const recipe::Recipe& recipe, std::vector<recipe::JobSpec>& jobs, bool offline);

// The lines, each escaped for the terminal; then an empty line when `spaced` and there were any.
void print_sizing(const RecipeSizing& sizing, std::ostream& out, bool spaced);

} // namespace gpupool::cmd
