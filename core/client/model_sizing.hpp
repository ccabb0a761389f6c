// How a job's GPU memory follows from the models it names (issue 43, part 3): the rules `price`,
// `submit` and `submit --dry-run` apply to each job before it leaves the researcher's machine. The
// models' shapes come in from the caller (model_config.hpp finds their config.json); the sizing is
// core/resources/model_memory.hpp's models_memory(): the models' weights and KV caches added up,
// with one overhead. Pure functions; thread-safe.
//
// Rules, for a job whose `[cache] models` is not empty:
// - gpus = 0 (a CPU-only job): not sized, not checked.
// - A model whose config could not be had or read: nothing is estimated and nothing refused; the
//   note names the model and why, and asks for `[resources] gpu_memory`.
// - A whole GPU (`gpus = 1` or `gpu = 1`) and no `gpu_memory`: the job asks the estimate, rounded up
//   to the MiB, as its gpu_memory (so it may share a GPU, or land on a smaller one).
// - `gpu_memory` stated: refused when it is below the models' weights alone; a note when it is below
//   the whole estimate (the weights fit; the KV cache or the overhead may not).
// - A share (`gpu` below 1) with `gpu_models`: its memory is the share of the largest of those GPUs
//   the catalog knows (the most it can ever get); refused when that is below the weights alone.
//   A share without gpu_models, or with none the catalog knows, is not checked (a note says so):
//   its memory depends on the GPU it lands on.
#pragma once

#include "core/credits/rates.hpp"
#include "core/recipe/recipe.hpp"
#include "core/resources/model_memory.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::client {

// What the configs gave for a job's models: the shapes read, and for each one not read, "model: why".
struct ModelShapes {
    std::vector<resources::NamedShape> shapes;
    std::vector<std::string> unavailable;
};

enum class SizingOutcome {
    none,      // no models, or a CPU-only job
    estimated, // gpu_memory set to the estimate
    checked,   // the recipe's own request holds the weights
    skipped,   // not estimated or not checked: `message` says why
    refused,   // the request is below the weights: `message` says by how much
};

struct GpuSizing {
    SizingOutcome outcome = SizingOutcome::none;
    std::optional<resources::ModelMemory> memory; // the estimate, when every model was sized
    std::int64_t estimate_mib = 0;                // memory's total, rounded up
    std::int64_t asked_mib = 0;                   // what the recipe asks, when it says (or its share gives) one
    std::string asked_by;                         // "resources.gpu_memory", or the share and the GPU
    // For skipped and refused: the reason. For checked: a warning when the request is below the
    // estimate, else empty. E.g. "meta-llama/Llama-2-7b-hf in bfloat16: 12.6 GiB of weights; the
    // recipe asks 8.0 GiB (resources.gpu_memory)".
    std::string message;
};

// The rules above for one job.
GpuSizing size_gpu_memory(const recipe::JobSpec& job, const ModelShapes& models, const credits::RateCatalog& catalog);

// An `estimated` sizing's gpu_memory in the job (its whole-GPU share dropped); others change nothing.
void apply_gpu_sizing(recipe::JobSpec& job, const GpuSizing& sizing);

// "17.0 GiB"
std::string gib_of_bytes(std::int64_t bytes);

} // namespace gpupool::client
