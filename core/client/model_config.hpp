// Where the client finds a model's Hugging Face `config.json`, to size a job's GPU memory before it
// is submitted (issue 43; core/resources/model_memory.hpp does the sizing, model_sizing.hpp the rules).
//
// For a model id `org/name` (a recipe's `[cache] models`), in this order:
//   1. a path the user gave for it (`--model-config`): a config.json, or the folder holding one;
//   2. the local Hugging Face cache: `<hub>/models--org--name/snapshots/<rev>/config.json`, where
//      `<rev>` is the commit `refs/main` names, else the newest snapshot holding a config.json.
//      `<hub>` is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
//      ~/.cache/huggingface/hub (hub_cache_from_env());
//   3. the hub, unless `offline`: GET {endpoint}/{org/name}/resolve/main/config.json over
//      net::HttpClient, answered within `timeout`, at most k_max_config_bytes.
//
// Hub rules (the same as the worker's, worker/cache/hub_fetch.hpp):
// - Redirects are followed by hand, at most 5, to http and https URLs only; the token goes only to
//   the endpoint's scheme, host and port, never to a host a redirect leads to.
// - 401/403 say the model is gated or private and how to give a token (HF_TOKEN, --hf-token-file);
//   404 that the hub has no such model or file; a network failure is ErrorCode::unavailable.
// - The bytes are returned as they came: model_shape_from_config() checks every field it reads.
// Errors say which of the places were tried. Blocking; one call at a time per thread (each call
// makes its own HttpClient).
#pragma once

#include "core/util/result.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

namespace gpupool::client {

inline constexpr std::int64_t k_max_config_bytes = std::int64_t{1} << 20; // 1 MiB
inline constexpr std::string_view k_default_hub_endpoint = "https://huggingface.co";

struct ModelConfigOptions {
    std::map<std::string, std::filesystem::path> paths; // model id -> its config.json or folder
    std::filesystem::path hub_cache;                    // empty: no local cache is read
    std::string endpoint{k_default_hub_endpoint};
    std::string token; // empty: none sent
    std::string ca_cert;
    bool offline = false; // the hub is not asked
    std::chrono::milliseconds timeout{15'000};
};

struct ModelConfig {
    std::string text; // the config.json, unchecked
    std::string from; // the file it was read from, or the URL it was downloaded from
};

// The config.json of `model` (already a valid model id), from the first place above that has it.
Result<ModelConfig> find_model_config(const std::string& model, const ModelConfigOptions& options);

// The local hub cache the environment names (rule 2); empty when no HOME either.
std::filesystem::path hub_cache_from_env();

} // namespace gpupool::client
