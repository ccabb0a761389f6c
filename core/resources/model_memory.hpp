// How much GPU memory a transformer needs, from its Hugging Face `config.json` (issue 43, part 3):
// its parameter count, the bytes of its weights in a dtype, the KV cache for a number of tokens, and
// a stated overhead.
//
// The shape comes from the config's own fields (hidden size, layers, attention and key-value heads,
// head size, intermediate size, vocabulary, tied embeddings, learned positions), read by the
// config's `model_type`: gpt2, gpt_neox (Pythia), llama, mistral, qwen2, gemma, phi, opt. Each type
// names its fields and its layout (which layers carry biases, LayerNorm or RMSNorm, a gated MLP of
// three matrices or a plain one of two). Another type is refused with the types known, never
// guessed: the recipe then says its `gpu_memory` itself. The counts are exact for these layouts
// (tests/core/resources/test_model_memory.cpp checks them against the published counts).
//
// The estimate (docs/evidence.md, "GPU memory from the model"):
//   weights  = parameters x bytes per parameter of the dtype (the recipe's, else the config's
//              torch_dtype, else bfloat16);
//   KV cache = 2 (keys, values) x layers x key-value heads x head size x max_tokens x batch x 2 bytes
//              (16-bit, also for weights quantised to 8 or 4 bits);
//   overhead = 1 GiB (CUDA context, kernels) + 10 % of the weights and KV cache (the allocator's
//              slack, activations of a forward pass): a stated allowance, not a measurement.
// Pure functions; thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::resources {

// A decoder's dimensions and layout, as its config.json says them.
struct ModelShape {
    std::string model_type;
    std::int64_t hidden = 0; // the residual stream's width
    std::int64_t layers = 0;
    std::int64_t heads = 0;        // query heads
    std::int64_t kv_heads = 0;     // key-value heads (grouped-query attention: fewer than heads)
    std::int64_t head_dim = 0;     // per head (hidden / heads unless the config says otherwise)
    std::int64_t intermediate = 0; // the MLP's inner width
    std::int64_t vocab = 0;
    std::int64_t embed_dim = 0;         // the token embeddings' width (OPT may project it to hidden)
    std::int64_t learned_positions = 0; // rows of a learned position table (0: rotary or none)
    bool tied_embeddings = false;       // the output head reuses the token embeddings
    bool qkv_bias = false;              // query, key and value projections carry biases
    bool out_bias = false;              // the attention output projection carries a bias
    int mlp_matrices = 2;               // 3: gated (gate, up, down), no biases; 2: up and down
    bool mlp_bias = false;
    bool layer_norm = false; // LayerNorm (weight and bias) rather than RMSNorm (weight only)
    int norms_per_layer = 2; // 1 where attention and MLP read one norm in parallel (phi)
    bool final_norm = true;
    bool head_bias = false;  // the output head carries a bias (phi)
    std::string torch_dtype; // as the config says it ("bfloat16"), or empty
};

// The shape from a config.json's text. Errors are invalid_input naming the field (`hidden_size`)
// and, for a type not listed above, the types that are.
Result<ModelShape> model_shape_from_config(std::string_view config_json);

// Every weight and bias, embeddings and output head included (a tied head counted once).
std::int64_t parameter_count(const ModelShape& shape);

// What the job will do with the model: `dtype` as a recipe writes it (float32, float16, bfloat16,
// int8, int4; empty: the config's torch_dtype, else bfloat16); the tokens each sequence may reach
// (prompt and output; 0: no KV cache is counted) and how many sequences at once. A recipe's
// `[cache]` dtype, max_tokens and batch (recipe.hpp keeps one in every JobSpec).
struct ModelUse {
    std::string dtype;
    std::int64_t max_tokens = 0;
    std::int64_t batch = 1;
    bool operator==(const ModelUse&) const = default;
};

// The dtypes a recipe may name, and whether `dtype` is one of them.
inline constexpr const char* k_model_dtypes = "float32, float16, bfloat16, int8, int4";
bool is_model_dtype(std::string_view dtype);

// Limits that keep every product of the estimate inside 64 bits, whatever a config says.
inline constexpr std::int64_t k_max_model_tokens = std::int64_t{1} << 24; // 16 Mi tokens per sequence
inline constexpr std::int64_t k_max_model_batch = std::int64_t{1} << 16;

struct ModelMemory {
    std::int64_t parameters = 0;
    std::string dtype; // the one the estimate used
    std::int64_t weight_bytes = 0;
    std::int64_t kv_cache_bytes = 0;
    std::int64_t overhead_bytes = 0;
    std::int64_t total_bytes() const { return weight_bytes + kv_cache_bytes + overhead_bytes; }
    // "6.74 B parameters in bfloat16: 12.6 GiB of weights + 2.0 GiB of KV cache (4096 tokens x 1)
    // + 2.5 GiB overhead (1 GiB + 10 %) = 17.0 GiB" (the test checks this line)
    std::string basis;
};

inline constexpr std::int64_t k_model_overhead_fixed_bytes = std::int64_t{1} << 30; // 1 GiB
inline constexpr std::int64_t k_model_overhead_percent = 10;

// The estimate; invalid_input naming `dtype` for one it does not know, or `max_tokens` / `batch`
// below 0 / 1 or above their limits.
Result<ModelMemory> model_memory(const ModelShape& shape, const ModelUse& use);

// Several models in one job (a recipe's `[cache] models`): their weights and KV caches add up, with
// one overhead, since they share one process and one CUDA context. Each model has its own dtype
// unless `use` names one. The basis names each model: "gpt2: 124 M parameters in float32: 0.5 GiB of
// weights + 0.1 GiB of KV cache (4096 tokens x 1); ... + 1.2 GiB overhead (1 GiB + 10 %) = 1.8 GiB";
// `dtype` is the one they share, else "mixed". Errors as model_memory's, naming the model.
struct NamedShape {
    std::string model; // "meta-llama/Llama-2-7b-hf"
    ModelShape shape;
};
Result<ModelMemory> models_memory(const std::vector<NamedShape>& models, const ModelUse& use);

} // namespace gpupool::resources
