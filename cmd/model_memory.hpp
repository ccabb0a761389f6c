// `gpupool model-memory PATH`: how much GPU memory a model needs, from its Hugging Face config.json
// (core/resources/model_memory.hpp; docs/evidence.md, "GPU memory from the model"), and the
// recipe's `gpu_memory` line that asks for it. PATH is a config.json or a folder holding one (a
// model's snapshot: ~/.cache/huggingface/hub/models--ORG--NAME/snapshots/REVISION). Nothing is
// downloaded. run_model_memory does the work for parsed options (tests call it without argv);
// register_model_memory (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <string>

namespace gpupool::cmd {

struct ModelMemoryOptions {
    GlobalOptions global{};
    std::string path;
    std::string dtype;           // empty: the config's torch_dtype, else bfloat16
    std::int64_t max_tokens = 0; // tokens per sequence, prompt and output
    std::int64_t batch = 1;      // sequences at once
};

int run_model_memory(const ModelMemoryOptions& options);

} // namespace gpupool::cmd
