#include "core/api/inventory.hpp"

#include "core/recipe/field_rules.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

namespace gpupool::api {

namespace {

using nlohmann::json;

// Upper bounds far above any machine, so that sums over a pool of them stay in 64 bits.
constexpr std::int64_t k_max_cpu_milli = std::int64_t{1} << 30;  // a million cores
constexpr std::int64_t k_max_mib = std::int64_t{1} << 40;        // an exbibyte, in MiB
constexpr std::int64_t k_max_slots = std::int64_t{1} << 20;
constexpr std::int64_t k_max_model_bytes = std::int64_t{1} << 50; // a pebibyte
constexpr std::size_t k_max_revision_bytes = 128;
constexpr std::int64_t k_max_integer_value = std::numeric_limits<std::int64_t>::max();

Error invalid(const std::string& what, const std::string& field) {
    return make_error(ErrorCode::invalid_input, what, field);
}

std::string at_most(const std::string& what, std::int64_t max) {
    return "expected " + what + " of at most " + std::to_string(max);
}

// An integer member from `min` to `max`, optional with a default of `fallback`.
Result<std::int64_t> integer(const json& j, const char* key, const std::string& field, std::int64_t min,
                             std::int64_t max, std::optional<std::int64_t> fallback, const std::string& expected) {
    auto it = j.find(key);
    if (it == j.end() || (fallback && it->is_null())) {
        if (!fallback) {
            return invalid(expected, field + "." + key);
        }
        return *fallback;
    }
    const bool too_big =
        it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(k_max_integer_value);
    if (!it->is_number_integer() || too_big || it->get<std::int64_t>() < min || it->get<std::int64_t>() > max) {
        return invalid(expected, field + "." + key);
    }
    return it->get<std::int64_t>();
}

// A string member of at most `max_bytes` of printable text; absent or null is empty.
Result<std::string> text(const json& j, const char* key, const std::string& field, std::size_t max_bytes) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return std::string();
    }
    const std::string at = field + "." + key;
    if (!it->is_string()) {
        return invalid(std::string("expected a string, got ") + it->type_name(), at);
    }
    const auto& s = it->get_ref<const std::string&>();
    if (s.size() > max_bytes) {
        return invalid("expected at most " + std::to_string(max_bytes) + " bytes, got " + std::to_string(s.size()), at);
    }
    if (!is_printable_text(s)) {
        return invalid("expected printable text (no control characters)", at);
    }
    return s;
}

Result<GpuInventory> gpu_from_json(const json& g, std::size_t i, std::size_t count, const std::string& field) {
    const std::string at = field + ".gpus[" + std::to_string(i) + "]";
    if (!g.is_object() || !g.contains("memory_mib")) {
        return invalid("expected {model, memory_mib > 0}", at + ".memory_mib");
    }
    GpuInventory out;
    auto memory = integer(g, "memory_mib", at, 1, k_max_gpu_memory_mib, std::nullopt,
                          "expected an integer from 1 to " + std::to_string(k_max_gpu_memory_mib) + " (16 TiB)");
    if (!memory) {
        return memory.error();
    }
    out.memory_mib = *memory;
    if (!g.contains("model") || !g["model"].is_string()) {
        return invalid("expected a string", at + ".model");
    }
    // Absent: its position (workers before `index` was sent).
    auto index = integer(g, "index", at, 0, static_cast<std::int64_t>(count) - 1, static_cast<std::int64_t>(i),
                         "expected an integer from 0 to " + std::to_string(count - 1) +
                             ": a worker's GPUs are numbered 0 to n-1 (n = " + std::to_string(count) + "), each once");
    if (!index) {
        return index.error();
    }
    out.index = *index;
    for (auto [key, value] : {std::pair{"model", &out.model}, std::pair{"uuid", &out.uuid},
                              std::pair{"memory_enforcement", &out.memory_enforcement}}) {
        auto t = text(g, key, at, k_max_inventory_text_bytes);
        if (!t) {
            return t.error();
        }
        *value = std::move(*t);
    }
    return out;
}

// Each GPU once, indexes 0..n-1 (gpu_from_json checks the range: n distinct indexes in it are all of
// them), sorted by index.
Result<std::vector<GpuInventory>> gpus_from_json(const json& j, const std::string& field) {
    std::vector<GpuInventory> out;
    auto it = j.find("gpus");
    if (it == j.end() || it->is_null()) {
        return out;
    }
    if (!it->is_array() || it->size() > k_max_gpus) {
        return invalid("expected an array of at most " + std::to_string(k_max_gpus) + " GPUs" +
                           (it->is_array() ? ", got " + std::to_string(it->size()) : std::string()),
                       field + ".gpus");
    }
    std::vector<std::size_t> at_index(it->size(), it->size()); // index -> where it was met
    for (std::size_t i = 0; i < it->size(); ++i) {
        auto gpu = gpu_from_json((*it)[i], i, it->size(), field);
        if (!gpu) {
            return gpu.error();
        }
        const auto index = static_cast<std::size_t>(gpu->index);
        if (at_index[index] != it->size()) {
            return invalid("GPU index " + std::to_string(index) + " is named twice (gpus[" +
                               std::to_string(at_index[index]) + "] has it too)",
                           field + ".gpus[" + std::to_string(i) + "].index");
        }
        at_index[index] = i;
        out.push_back(std::move(*gpu));
    }
    std::sort(out.begin(), out.end(), [](const GpuInventory& a, const GpuInventory& b) { return a.index < b.index; });
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
        auto revision = text(m, "revision", at, k_max_revision_bytes);
        if (!revision) {
            return revision.error();
        }
        c.revision = std::move(*revision);
        auto bytes =
            integer(m, "bytes", at, 0, k_max_model_bytes, 0, at_most("a non-negative integer", k_max_model_bytes));
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
    const std::string cpus_expected = at_most("a positive integer", k_max_cpu_milli);
    auto cpu = integer(j, "cpu_milli", field, 1, k_max_cpu_milli, std::nullopt, cpus_expected);
    if (!cpu) {
        return cpu.error();
    }
    auto memory = integer(j, "memory_mib", field, 1, k_max_mib, std::nullopt, at_most("a positive integer", k_max_mib));
    if (!memory) {
        return memory.error();
    }
    auto slots =
        integer(j, "slots", field, 0, k_max_slots, 0, at_most("a non-negative integer (0: no cap)", k_max_slots));
    if (!slots) {
        return slots.error();
    }
    out.cpu_milli = *cpu;
    out.memory_mib = *memory;
    out.slots = *slots;
    auto gpus = gpus_from_json(j, field);
    if (!gpus) {
        return gpus.error();
    }
    out.gpus = std::move(*gpus);
    auto runtime = text(j, "runtime", field, k_max_inventory_text_bytes);
    if (!runtime) {
        return runtime.error();
    }
    out.runtime = std::move(*runtime);
    auto models = cached_models_from_json(j, field);
    if (!models) {
        return models.error();
    }
    out.cached_models = std::move(*models);
    auto free = integer(j, "cache_free_mib", field, -1, k_max_mib, -1, at_most("an integer (-1: not said)", k_max_mib));
    if (!free) {
        return free.error();
    }
    out.cache_free_mib = *free;
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

bool is_printable_text(std::string_view s) {
    if (recipe::has_control_character(s)) {
        return false;
    }
    // C1 controls are two bytes in UTF-8 (the JSON reader already refused text that is not UTF-8).
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        if (static_cast<unsigned char>(s[i]) == 0xC2 && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
            static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
            return false;
        }
    }
    return true;
}

} // namespace gpupool::api
