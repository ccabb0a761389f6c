#include "core/api/inventory.hpp"

#include "core/recipe/field_rules.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::api {

namespace {

using nlohmann::json;

Error invalid(const std::string& what, const std::string& field) {
    return make_error(ErrorCode::invalid_input, what, field);
}

// An integer member, optional with a default; `min` is the least value accepted.
Result<std::int64_t> integer(const json& j, const char* key, const std::string& field, std::int64_t min,
                             bool required, const char* expected) {
    auto it = j.find(key);
    if (it == j.end()) {
        if (required) {
            return invalid(expected, field + "." + key);
        }
        return std::int64_t{0};
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() < min) {
        return invalid(expected, field + "." + key);
    }
    return it->get<std::int64_t>();
}

std::string text(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<GpuInventory> gpu_from_json(const json& g, std::size_t i, const std::string& field) {
    const std::string at = field + ".gpus[" + std::to_string(i) + "]";
    if (!g.is_object() || !g.contains("memory_mib") || !g["memory_mib"].is_number_integer() ||
        g["memory_mib"].get<std::int64_t>() <= 0) {
        return invalid("expected {model, memory_mib > 0}", at + ".memory_mib");
    }
    if (!g.contains("model") || !g["model"].is_string()) {
        return invalid("expected a string", at + ".model");
    }
    GpuInventory out;
    out.index = static_cast<std::int64_t>(i);
    if (auto it = g.find("index"); it != g.end() && it->is_number_integer()) {
        out.index = it->get<std::int64_t>();
    }
    out.model = g["model"].get<std::string>();
    out.memory_mib = g["memory_mib"].get<std::int64_t>();
    out.uuid = text(g, "uuid");
    out.memory_enforcement = text(g, "memory_enforcement");
    return out;
}

Result<std::vector<CachedModelInfo>> cached_models_from_json(const json& j, const std::string& field) {
    std::vector<CachedModelInfo> out;
    auto it = j.find("cached_models");
    if (it == j.end() || it->is_null()) {
        return out;
    }
    if (!it->is_array() || it->size() > k_max_cached_models) {
        return invalid("expected an array of at most " + std::to_string(k_max_cached_models) + " models",
                       field + ".cached_models");
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
        const json& m = (*it)[i];
        const std::string at = field + ".cached_models[" + std::to_string(i) + "]";
        if (!m.is_object() || !m.contains("model") || !m["model"].is_string() ||
            !recipe::check_model_id(m["model"].get<std::string>())) {
            return invalid("expected {model: \"org/name\", revision, bytes}", at + ".model");
        }
        CachedModelInfo c;
        c.model = m["model"].get<std::string>();
        c.revision = text(m, "revision");
        if (c.revision.size() > 128) {
            return invalid("at most 128 bytes", at + ".revision");
        }
        auto bytes = integer(m, "bytes", at, 0, false, "expected a non-negative integer");
        if (!bytes) {
            return bytes.error();
        }
        c.bytes = *bytes;
        out.push_back(std::move(c));
    }
    return out;
}

} // namespace

Result<Inventory> inventory_from_json(const json& j, const std::string& field) {
    if (!j.is_object()) {
        return invalid("expected an object", field);
    }
    Inventory out;
    auto cpu = integer(j, "cpu_milli", field, 1, true, "expected a positive integer");
    if (!cpu) {
        return cpu.error();
    }
    auto memory = integer(j, "memory_mib", field, 1, true, "expected a positive integer");
    if (!memory) {
        return memory.error();
    }
    auto slots = integer(j, "slots", field, 0, false, "expected a non-negative integer (0: no cap)");
    if (!slots) {
        return slots.error();
    }
    out.cpu_milli = *cpu;
    out.memory_mib = *memory;
    out.slots = *slots;
    if (auto it = j.find("gpus"); it != j.end()) {
        if (!it->is_array()) {
            return invalid("expected an array", field + ".gpus");
        }
        for (std::size_t i = 0; i < it->size(); ++i) {
            auto gpu = gpu_from_json((*it)[i], i, field);
            if (!gpu) {
                return gpu.error();
            }
            out.gpus.push_back(std::move(*gpu));
        }
    }
    out.runtime = text(j, "runtime");
    auto models = cached_models_from_json(j, field);
    if (!models) {
        return models.error();
    }
    out.cached_models = std::move(*models);
    if (auto it = j.find("cache_free_mib"); it != j.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<std::int64_t>() < -1) {
            return invalid("expected an integer (-1: not said)", field + ".cache_free_mib");
        }
        out.cache_free_mib = it->get<std::int64_t>();
    }
    return out;
}

json to_json(const Inventory& inv) {
    json gpus = json::array();
    for (const auto& g : inv.gpus) {
        gpus.push_back({{"index", g.index},
                        {"model", g.model},
                        {"memory_mib", g.memory_mib},
                        {"uuid", g.uuid},
                        {"memory_enforcement", g.memory_enforcement}});
    }
    json models = json::array();
    for (const auto& m : inv.cached_models) {
        models.push_back({{"model", m.model}, {"revision", m.revision}, {"bytes", m.bytes}});
    }
    return {{"cpu_milli", inv.cpu_milli},       {"memory_mib", inv.memory_mib}, {"gpus", gpus},
            {"slots", inv.slots},               {"runtime", inv.runtime},       {"cached_models", models},
            {"cache_free_mib", inv.cache_free_mib}};
}

std::string to_text(const Inventory& inventory) { return to_json(inventory).dump(); }

Result<Inventory> inventory_from_text(std::string_view text) {
    return inventory_from_json(json::parse(text, nullptr, false));
}

} // namespace gpupool::api
