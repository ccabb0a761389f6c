#include "cmd/model_sizing.hpp"

#include "cmd/remote.hpp"
#include "cmd/secret_file.hpp"
#include "core/client/model_config.hpp"
#include "core/client/model_sizing.hpp"
#include "core/credits/catalog.hpp"
#include "core/net/url.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace gpupool::cmd {

namespace {

using nlohmann::ordered_json;

const char* sizing_outcome_name(client::SizingOutcome o) {
    switch (o) {
    case client::SizingOutcome::none:
        return "none";
    case client::SizingOutcome::estimated:
        return "estimated";
    case client::SizingOutcome::checked:
        return "checked";
    case client::SizingOutcome::skipped:
        return "skipped";
    case client::SizingOutcome::refused:
        return "refused";
    }
    return "none";
}

Error sizing_usage_error(const std::string& option, const std::string& message) {
    return make_error(ErrorCode::invalid_input, message, option);
}

// Where configs come from: --model-config paths, the local cache, the hub with its token.
Result<client::ModelConfigOptions> config_options(const SizingArgs& args, const std::vector<std::string>& models,
                                                  bool offline) {
    client::ModelConfigOptions o;
    for (const auto& given : args.model_configs) {
        const auto eq = given.find('=');
        const std::string named = eq == std::string::npos ? std::string() : given.substr(0, eq);
        if (std::find(models.begin(), models.end(), named) != models.end()) {
            o.paths[named] = given.substr(eq + 1);
        } else if (models.size() == 1) {
            o.paths[models.front()] = given;
        } else {
            return sizing_usage_error("--model-config", "the recipe names " + std::to_string(models.size()) +
                                                            " models in [cache] models; write MODEL=PATH");
        }
    }
    o.hub_cache = client::hub_cache_from_env();
    o.offline = offline;
    const char* env_endpoint = std::getenv("HF_ENDPOINT");
    if (!args.hf_endpoint.empty()) {
        o.endpoint = args.hf_endpoint;
    } else if (env_endpoint != nullptr && *env_endpoint != '\0') {
        o.endpoint = env_endpoint;
    }
    if (!net::is_http_url_list(o.endpoint) || o.endpoint.find(',') != std::string::npos) {
        return sizing_usage_error(args.hf_endpoint.empty() ? "HF_ENDPOINT" : "--hf-endpoint",
                                  "expected an http:// or https:// URL, got `" + o.endpoint + "`");
    }
    if (!args.hf_token_file.empty()) {
        auto token = read_secret_file(args.hf_token_file, "--hf-token-file");
        if (!token) {
            return token.error();
        }
        o.token = *token;
    } else if (const char* t = std::getenv("HF_TOKEN"); t != nullptr && *t != '\0') {
        o.token = t;
    }
    return o;
}

// Each model's shape, read once however many jobs name it; "model: why" for those not read.
client::ModelShapes read_shapes(const std::vector<std::string>& models, const client::ModelConfigOptions& o,
                                ordered_json& configs) {
    client::ModelShapes out;
    for (const auto& model : models) {
        auto config = client::find_model_config(model, o);
        if (!config) {
            out.unavailable.push_back(config.error().message);
            configs.push_back({{"model", model}, {"error", config.error().message}});
            continue;
        }
        auto shape = resources::model_shape_from_config(config->text);
        if (!shape) {
            const Error& e = shape.error();
            out.unavailable.push_back(model + ": " + config->from + ": " + (e.field.empty() ? "" : e.field + ": ") +
                                      e.message);
            configs.push_back({{"model", model}, {"from", config->from}, {"error", e.message}});
            continue;
        }
        configs.push_back({{"model", model}, {"from", config->from}, {"model_type", shape->model_type}});
        out.shapes.push_back({model, std::move(*shape)});
    }
    return out;
}

ordered_json sizing_json(const client::GpuSizing& s, const recipe::JobSpec& job, ordered_json configs) {
    ordered_json j = {{"outcome", sizing_outcome_name(s.outcome)}, {"models", job.cache_models}};
    if (s.memory) {
        const resources::ModelMemory& m = *s.memory;
        j["estimate_mib"] = s.estimate_mib;
        j["parameters"] = m.parameters;
        j["dtype"] = m.dtype;
        j["max_tokens"] = job.model_use.max_tokens;
        j["batch"] = job.model_use.batch;
        j["weight_bytes"] = m.weight_bytes;
        j["kv_cache_bytes"] = m.kv_cache_bytes;
        j["overhead_bytes"] = m.overhead_bytes;
        j["total_bytes"] = m.total_bytes();
        j["basis"] = m.basis;
    }
    if (!s.asked_by.empty()) {
        j["asked_mib"] = s.asked_mib;
        j["asked_by"] = s.asked_by;
    }
    if (!s.message.empty()) {
        j["message"] = s.message;
    }
    j["configs"] = std::move(configs);
    return j;
}

std::vector<std::string> sizing_lines(const client::GpuSizing& s, const recipe::JobSpec& job) {
    std::vector<std::string> lines;
    switch (s.outcome) {
    case client::SizingOutcome::none:
    case client::SizingOutcome::refused:
        return lines;
    case client::SizingOutcome::estimated:
        lines.push_back("gpu_memory estimated: " + client::gib_of_bytes(s.memory->total_bytes()) + " (" +
                        s.memory->basis + ")");
        break;
    case client::SizingOutcome::checked:
        lines.push_back("gpu_memory checked: the recipe asks " + client::gib_of_bytes(s.asked_mib << 20) + " (" +
                        s.asked_by + "); the models need " + client::gib_of_bytes(s.memory->weight_bytes) +
                        " of weights, " + client::gib_of_bytes(s.memory->total_bytes()) + " in all (" +
                        s.memory->basis + ")");
        if (!s.message.empty()) {
            lines.push_back("warning: " + s.message);
        }
        break;
    case client::SizingOutcome::skipped:
        lines.push_back((job.resources.gpu_memory_mib == 0 && job.resources.gpu_milli == resources::k_milli_per_unit
                             ? "gpu_memory not estimated: "
                             : "gpu_memory not checked: ") +
                        s.message);
        break;
    }
    if (s.memory && job.model_use.max_tokens == 0) {
        lines.push_back("note: [cache] sets no max_tokens, so the estimate counts no KV cache");
    }
    return lines;
}

} // namespace

void add_sizing_args(CLI::App* sub, SizingArgs& args) {
    sub->add_option("--model-config", args.model_configs,
                    "[MODEL=]PATH: the config.json (or its folder) of a model in [cache] models, instead of the "
                    "local Hugging Face cache or the hub (MODEL= may be left out when the recipe names one model)");
    sub->add_option("--hf-endpoint", args.hf_endpoint,
                    "The Hugging Face hub to read models' config.json from (default: $HF_ENDPOINT, else "
                    "https://huggingface.co)");
    sub->add_option("--hf-token-file", args.hf_token_file,
                    "A file holding the hub token for gated models (default: $HF_TOKEN); sent to the hub's host only");
}

std::optional<RecipeSizing> size_recipe(const GlobalOptions& global, const SizingArgs& args,
                                        const recipe::Recipe& recipe, std::vector<recipe::JobSpec>& jobs,
                                        bool offline) {
    RecipeSizing out;
    out.json = nullptr;
    std::vector<std::string> models;
    for (const auto& job : jobs) {
        for (const auto& m : job.cache_models) {
            if (job.resources.gpus > 0 && std::find(models.begin(), models.end(), m) == models.end()) {
                models.push_back(m);
            }
        }
    }
    if (models.empty()) {
        return out;
    }
    auto options = config_options(args, models, offline);
    if (!options) {
        report_error(global, options.error());
        return std::nullopt;
    }
    ordered_json configs = ordered_json::array();
    const client::ModelShapes all = read_shapes(models, *options, configs);
    const auto& catalog = credits::default_rate_catalog();
    for (auto& job : jobs) {
        // This job's models, in its order, out of the ones read.
        client::ModelShapes mine;
        for (const auto& m : job.cache_models) {
            auto it = std::find_if(all.shapes.begin(), all.shapes.end(),
                                   [&](const resources::NamedShape& s) { return s.model == m; });
            if (it != all.shapes.end()) {
                mine.shapes.push_back(*it);
            }
        }
        if (mine.shapes.size() < job.cache_models.size()) {
            mine.unavailable = all.unavailable;
        }
        const client::GpuSizing sizing = client::size_gpu_memory(job, mine, catalog);
        if (sizing.outcome == client::SizingOutcome::refused) {
            Error e = make_error(ErrorCode::invalid_input, sizing.message,
                                 sizing.asked_by.starts_with("resources.gpu_memory") ? "resources.gpu_memory"
                                                                                     : "resources.gpu");
            e.where = SourcePos{recipe.source, 0, 0};
            report_error(global, e);
            return std::nullopt;
        }
        if (out.json.is_null() && sizing.outcome != client::SizingOutcome::none) {
            out.json = sizing_json(sizing, job, configs);
            out.lines = sizing_lines(sizing, job);
        }
        client::apply_gpu_sizing(job, sizing);
    }
    return out;
}

void print_sizing(const RecipeSizing& sizing, std::ostream& out, bool spaced) {
    for (const auto& line : sizing.lines) {
        out << printable(line) << '\n';
    }
    if (spaced && !sizing.lines.empty()) {
        out << '\n';
    }
}

} // namespace gpupool::cmd
