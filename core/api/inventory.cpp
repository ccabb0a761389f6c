#include "core/api/inventory.hpp"

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
    return {{"cpu_milli", inv.cpu_milli},
            {"memory_mib", inv.memory_mib},
            {"gpus", gpus},
            {"slots", inv.slots},
            {"runtime", inv.runtime}};
}

std::string to_text(const Inventory& inventory) { return to_json(inventory).dump(); }

Result<Inventory> inventory_from_text(std::string_view text) {
    return inventory_from_json(json::parse(text, nullptr, false));
}

} // namespace gpupool::api
