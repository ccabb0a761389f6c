// A transformer's parameters and GPU memory from its config.json (model_memory.hpp).
#include "core/resources/model_memory.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>
#include <vector>

namespace gpupool::resources {

namespace {

using nlohmann::json;

// A config's fields, each read once, each error naming the field.
class ConfigFields {
public:
    explicit ConfigFields(const json& j) : m_j(j) {}

    // A positive integer the type needs.
    Result<std::int64_t> need(const char* key) const {
        auto v = find(key);
        if (!v) {
            return invalid_input(
                std::string("config.json has no `") + key + "`, which a `" + type() + "` model needs to be sized", key);
        }
        return *v;
    }
    // A positive integer, or `fallback` when absent or null.
    Result<std::int64_t> maybe(const char* key, std::int64_t fallback) const {
        if (!m_j.contains(key) || m_j.at(key).is_null()) {
            return fallback;
        }
        auto v = find(key);
        if (!v) {
            return invalid_input(std::string("`") + key + "` must be a positive whole number", key);
        }
        return *v;
    }
    bool flag(const char* key, bool fallback) const {
        auto it = m_j.find(key);
        return it != m_j.end() && it->is_boolean() ? it->get<bool>() : fallback;
    }
    std::string text(const char* key) const {
        auto it = m_j.find(key);
        return it != m_j.end() && it->is_string() ? it->get<std::string>() : std::string();
    }
    std::string type() const { return text("model_type"); }

private:
    std::optional<std::int64_t> find(const char* key) const {
        auto it = m_j.find(key);
        if (it == m_j.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
            it->get<std::int64_t>() > (std::int64_t{1} << 40)) {
            return std::nullopt;
        }
        return it->get<std::int64_t>();
    }
    const json& m_j;
};

// Reads `key` into `out`; false (and `err` set) when it cannot.
bool read(const Result<std::int64_t>& r, std::int64_t& out, std::optional<Error>& err) {
    if (!r) {
        if (!err) {
            err = r.error();
        }
        return false;
    }
    out = *r;
    return true;
}

// The fields every type shares under the Llama-style names.
void read_llama_style(const ConfigFields& f, ModelShape& s, std::optional<Error>& err) {
    read(f.need("hidden_size"), s.hidden, err);
    read(f.need("num_hidden_layers"), s.layers, err);
    read(f.need("num_attention_heads"), s.heads, err);
    read(f.need("intermediate_size"), s.intermediate, err);
    read(f.need("vocab_size"), s.vocab, err);
    if (!err) {
        read(f.maybe("num_key_value_heads", s.heads), s.kv_heads, err);
        read(f.maybe("head_dim", s.hidden / s.heads), s.head_dim, err);
    }
}

const char* const k_known_types = "gpt2, gpt_neox, llama, mistral, qwen2, gemma, phi, opt";

std::string gib_text(std::int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30));
    return buf;
}

std::string parameters_text(std::int64_t n) {
    char buf[32];
    if (n >= 1'000'000'000) {
        std::snprintf(buf, sizeof buf, "%.2f B", static_cast<double>(n) / 1e9);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f M", static_cast<double>(n) / 1e6);
    }
    return buf;
}

// Bits per weight of a dtype as recipes and configs write it; 0 for one not known.
int bits_of(const std::string& dtype) {
    if (dtype == "float32" || dtype == "fp32") {
        return 32;
    }
    if (dtype == "float16" || dtype == "fp16" || dtype == "bfloat16" || dtype == "bf16") {
        return 16;
    }
    if (dtype == "int8" || dtype == "fp8") {
        return 8;
    }
    if (dtype == "int4") {
        return 4;
    }
    return 0;
}

// A config from the network is hostile: widths, depths and vocabularies far beyond any real model's
// are refused, which also keeps every product in parameter_count() and model_memory() inside 64 bits
// (at most 2^12 layers of 7 x 2^40 weights: 2^55 parameters, 2^60 bits).
Status check_plausible(const ModelShape& s) {
    struct Limit {
        std::int64_t value;
        std::int64_t max;
        const char* field;
    };
    const Limit limits[] = {
        {s.hidden, std::int64_t{1} << 20, "hidden_size"},
        {s.heads * s.head_dim, std::int64_t{1} << 20, "head_dim"},
        {s.intermediate, std::int64_t{1} << 20, "intermediate_size"},
        {s.layers, std::int64_t{1} << 12, "num_hidden_layers"},
        {s.vocab, std::int64_t{1} << 24, "vocab_size"},
        {s.embed_dim, std::int64_t{1} << 20, "word_embed_proj_dim"},
        {s.learned_positions, std::int64_t{1} << 24, "max_position_embeddings"},
    };
    for (const auto& l : limits) {
        if (l.value > l.max) {
            return invalid_input("is " + std::to_string(l.value) + ", more than any model gpupool can size (at most " +
                                     std::to_string(l.max) + ")",
                                 l.field);
        }
    }
    return {};
}

// "6.74 B parameters in bfloat16: 12.6 GiB of weights + 2.0 GiB of KV cache (4096 tokens x 1)"
std::string weights_and_kv_text(const ModelMemory& m, const ModelUse& use) {
    return parameters_text(m.parameters) + " parameters in " + m.dtype + ": " + gib_text(m.weight_bytes) +
           " of weights + " + gib_text(m.kv_cache_bytes) + " of KV cache (" + std::to_string(use.max_tokens) +
           " tokens x " + std::to_string(use.batch) + ")";
}

// " + 2.5 GiB overhead (1 GiB + 10 %) = 17.0 GiB", with the overhead set from the rest.
std::string add_overhead(ModelMemory& m) {
    m.overhead_bytes =
        k_model_overhead_fixed_bytes + (m.weight_bytes + m.kv_cache_bytes) * k_model_overhead_percent / 100;
    return " + " + gib_text(m.overhead_bytes) + " overhead (1 GiB + " + std::to_string(k_model_overhead_percent) +
           " %) = " + gib_text(m.total_bytes());
}

} // namespace

bool is_model_dtype(std::string_view dtype) {
    return dtype == "float32" || dtype == "float16" || dtype == "bfloat16" || dtype == "int8" || dtype == "int4";
}

Result<ModelShape> model_shape_from_config(std::string_view config_json) {
    json j = json::parse(config_json, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return invalid_input("config.json is not a JSON object");
    }
    const ConfigFields f(j);
    ModelShape s;
    s.model_type = f.type();
    s.torch_dtype = f.text("torch_dtype");
    std::optional<Error> err;
    const std::string& t = s.model_type;
    if (t == "gpt2") {
        read(f.need("n_embd"), s.hidden, err);
        read(f.need("n_layer"), s.layers, err);
        read(f.need("n_head"), s.heads, err);
        read(f.need("vocab_size"), s.vocab, err);
        read(f.need("n_positions"), s.learned_positions, err);
        if (!err) {
            read(f.maybe("n_inner", 4 * s.hidden), s.intermediate, err);
            s.kv_heads = s.heads;
            s.head_dim = s.hidden / s.heads;
        }
        s.tied_embeddings = f.flag("tie_word_embeddings", true);
        s.qkv_bias = s.out_bias = s.mlp_bias = s.layer_norm = true;
    } else if (t == "gpt_neox") {
        read_llama_style(f, s, err);
        s.tied_embeddings = f.flag("tie_word_embeddings", false);
        s.qkv_bias = s.out_bias = f.flag("attention_bias", true);
        s.mlp_bias = s.layer_norm = true;
    } else if (t == "llama" || t == "mistral" || t == "qwen2" || t == "gemma") {
        read_llama_style(f, s, err);
        s.tied_embeddings = f.flag("tie_word_embeddings", t == "gemma");
        s.qkv_bias = t == "qwen2" || f.flag("attention_bias", false);
        s.out_bias = f.flag("attention_bias", false);
        s.mlp_matrices = 3;
        s.mlp_bias = f.flag("mlp_bias", false);
    } else if (t == "phi") {
        read_llama_style(f, s, err);
        s.tied_embeddings = f.flag("tie_word_embeddings", false);
        s.qkv_bias = s.out_bias = s.mlp_bias = s.layer_norm = s.head_bias = true;
        s.norms_per_layer = 1;
    } else if (t == "opt") {
        read(f.need("hidden_size"), s.hidden, err);
        read(f.need("num_hidden_layers"), s.layers, err);
        read(f.need("num_attention_heads"), s.heads, err);
        read(f.need("ffn_dim"), s.intermediate, err);
        read(f.need("vocab_size"), s.vocab, err);
        read(f.need("max_position_embeddings"), s.learned_positions, err);
        if (!err) {
            read(f.maybe("word_embed_proj_dim", s.hidden), s.embed_dim, err);
            s.kv_heads = s.heads;
            s.head_dim = s.hidden / s.heads;
            s.learned_positions += 2; // OPT's position table is offset by two rows
        }
        s.tied_embeddings = f.flag("tie_word_embeddings", true);
        s.qkv_bias = s.out_bias = s.mlp_bias = s.layer_norm = f.flag("enable_bias", true);
        s.final_norm = f.flag("do_layer_norm_before", true);
    } else {
        return invalid_input("config.json's model_type `" + t + "` is not one gpupool can size (it knows " +
                                 k_known_types + "); set the recipe's resources.gpu_memory instead",
                             "model_type");
    }
    if (err) {
        return *err;
    }
    if (s.embed_dim == 0) {
        s.embed_dim = s.hidden;
    }
    if (s.heads > 0 && s.kv_heads > s.heads) {
        return invalid_input("has more key-value heads than attention heads", "num_key_value_heads");
    }
    if (auto st = check_plausible(s); !st) {
        return st.error();
    }
    return s;
}

std::int64_t parameter_count(const ModelShape& s) {
    const std::int64_t d = s.hidden;
    const std::int64_t q = s.heads * s.head_dim;
    const std::int64_t kv = s.kv_heads * s.head_dim;
    std::int64_t attention = d * q + 2 * d * kv + q * d;
    if (s.qkv_bias) {
        attention += q + 2 * kv;
    }
    if (s.out_bias) {
        attention += d;
    }
    std::int64_t mlp = s.mlp_matrices * d * s.intermediate;
    if (s.mlp_bias) {
        mlp += (s.mlp_matrices - 1) * s.intermediate + d;
    }
    const std::int64_t norm = s.layer_norm ? 2 * d : d;
    const std::int64_t layer = attention + mlp + s.norms_per_layer * norm;

    std::int64_t total = s.layers * layer;
    total += s.vocab * s.embed_dim;   // token embeddings
    total += s.learned_positions * d; // a learned position table
    if (s.embed_dim != d) {
        total += 2 * s.embed_dim * d; // projections in and out of the embeddings' width
    }
    if (s.final_norm) {
        total += norm;
    }
    if (!s.tied_embeddings) {
        total += s.vocab * s.embed_dim; // the output head
    }
    if (s.head_bias) {
        total += s.vocab;
    }
    return total;
}

Result<ModelMemory> model_memory(const ModelShape& shape, const ModelUse& use) {
    ModelMemory m;
    m.dtype = !use.dtype.empty() ? use.dtype : !shape.torch_dtype.empty() ? shape.torch_dtype : "bfloat16";
    const int bits = bits_of(m.dtype);
    if (bits == 0) {
        return invalid_input("unknown dtype `" + m.dtype + "`: one of float32, float16, bfloat16, int8, int4", "dtype");
    }
    if (use.max_tokens < 0 || use.max_tokens > k_max_model_tokens) {
        return invalid_input("must be from 0 to " + std::to_string(k_max_model_tokens), "max_tokens");
    }
    if (use.batch < 1 || use.batch > k_max_model_batch) {
        return invalid_input("must be from 1 to " + std::to_string(k_max_model_batch), "batch");
    }
    // Within check_plausible's limits a config's layers x kv width is below 2^32; the tokens and the
    // batch could still take the product past 2^63.
    const double kv_estimate = 4.0 * static_cast<double>(shape.layers) * static_cast<double>(shape.kv_heads) *
                               static_cast<double>(shape.head_dim) * static_cast<double>(use.max_tokens) *
                               static_cast<double>(use.batch);
    if (kv_estimate > static_cast<double>(std::int64_t{1} << 60)) {
        return invalid_input("with this batch gives a KV cache over 1 EiB", "max_tokens");
    }
    m.parameters = parameter_count(shape);
    m.weight_bytes = (m.parameters * bits + 7) / 8;
    const std::int64_t kv_bytes_per_value = 2; // 16-bit keys and values, also beside quantised weights
    m.kv_cache_bytes =
        2 * shape.layers * shape.kv_heads * shape.head_dim * use.max_tokens * use.batch * kv_bytes_per_value;
    m.basis = weights_and_kv_text(m, use);
    m.basis += add_overhead(m);
    return m;
}

Result<ModelMemory> models_memory(const std::vector<NamedShape>& models, const ModelUse& use) {
    ModelMemory sum;
    for (const auto& named : models) {
        auto one = model_memory(named.shape, use);
        if (!one) {
            Error e = one.error();
            e.message = named.model + ": " + e.message;
            return e;
        }
        sum.parameters += one->parameters;
        sum.weight_bytes += one->weight_bytes;
        sum.kv_cache_bytes += one->kv_cache_bytes;
        sum.dtype = sum.dtype.empty() || sum.dtype == one->dtype ? one->dtype : "mixed";
        sum.basis += (sum.basis.empty() ? "" : "; ") + named.model + ": " + weights_and_kv_text(*one, use);
    }
    sum.basis += add_overhead(sum);
    return sum;
}

} // namespace gpupool::resources
