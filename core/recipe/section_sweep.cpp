#include "core/recipe/field_rules.hpp"
#include "core/recipe/sections.hpp"
#include "core/recipe/toml_values.hpp"
#include "core/util/strings.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>

namespace gpupool::recipe::detail {

namespace {

using Entry = std::pair<const toml::key*, const toml::node*>;

// The table's entries in the order they are written (toml++ tables iterate in key order).
std::vector<Entry> entries_as_written(const toml::table& t) {
    std::vector<Entry> entries;
    for (auto&& [key, value] : t) {
        entries.emplace_back(&key, &value);
    }
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
        const auto& sa = a.first->source().begin;
        const auto& sb = b.first->source().begin;
        return std::tie(sa.line, sa.column) < std::tie(sb.line, sb.column);
    });
    return entries;
}

// Appends the values of one parameter's array to `param`, numbers as written; false when any of
// them is bad. Two values that are the same value however written (`1.0` and `1.00`) are duplicates.
bool read_sweep_values(const toml::array& arr, const std::string& field, const SourceTexts& texts, SweepParam& param,
                       Diagnostics& diag) {
    bool ok = true;
    std::vector<std::string> rendered; // each value as the same value always reads
    for (std::size_t i = 0; i < arr.size(); ++i) {
        const toml::node& el = *arr.get(i);
        std::string efield = field + "[" + std::to_string(i) + "]";
        auto text = scalar_text(el, texts);
        if (!text) {
            diag.add(el, efield, "sweep values must be strings, numbers or booleans, got " + type_phrase(el));
            ok = false;
            continue;
        }
        if (auto st = check_no_nul(*text); !st) {
            diag.add(el, efield, st.error().message);
            ok = false;
            continue;
        }
        std::string same = *scalar_text(el);
        if (auto at = std::find(rendered.begin(), rendered.end(), same); at != rendered.end()) {
            const std::string& before = param.values[static_cast<std::size_t>(at - rendered.begin())];
            diag.add(el, efield,
                     "duplicate sweep value `" + *text + "`" +
                         (before == *text ? "" : " (the same as `" + before + "`)") +
                         " (it would run the same job twice)");
            ok = false;
            continue;
        }
        rendered.push_back(std::move(same));
        param.values.push_back(std::move(*text));
    }
    return ok;
}

// One `name = [values]` entry; nullopt after reporting a problem.
std::optional<SweepParam> read_sweep_param(const toml::key& key, const toml::node& value, const SourceTexts& texts,
                                           Diagnostics& diag) {
    std::string k(key.str());
    std::string field = "sweep." + k;
    if (!util::is_identifier(k)) {
        diag.add(key.source(), field, "sweep parameter names use letters, digits and _ (they are used as `{" + k + "}`)");
        return std::nullopt;
    }
    const auto* arr = value.as_array();
    if (arr == nullptr) {
        diag.add(value, field, "expected an array of values to sweep over, got " + type_phrase(value) +
                                   " (write `" + k + " = [ ... ]`)");
        return std::nullopt;
    }
    if (arr->empty()) {
        diag.add(value, field, "a sweep parameter needs at least one value");
        return std::nullopt;
    }
    SweepParam param{k, {}};
    if (!read_sweep_values(*arr, field, texts, param, diag)) {
        return std::nullopt;
    }
    return param;
}

} // namespace

void parse_sweep(const toml::table& t, Sweep& sweep, const ParseOptions& options, const SourceTexts& texts,
                 Diagnostics& diag) {
    std::uint64_t count = 1;
    bool overflow = false;
    for (const auto& [key, value] : entries_as_written(t)) {
        if (key->str() == "max_parallel") {
            std::string field = "sweep." + std::string(key->str());
            if (value->is_array()) {
                diag.add(key->source(), field, "`max_parallel` is a setting, not a parameter name; rename the parameter");
            } else if (auto v = expect_integer(*value, field, diag, 1, 1'000'000)) {
                sweep.max_parallel = *v;
            }
            continue;
        }
        auto param = read_sweep_param(*key, *value, texts, diag);
        if (!param) {
            continue;
        }
        if (count > std::numeric_limits<std::uint64_t>::max() / param->values.size()) {
            overflow = true;
        } else {
            count *= param->values.size();
        }
        sweep.params.push_back(std::move(*param));
    }
    if (overflow || count > options.max_sweep_jobs) {
        diag.add(t, "sweep",
                 "the sweep expands to " + (overflow ? std::string("more than 2^64") : std::to_string(count)) +
                     " jobs, more than the cap of " + std::to_string(options.max_sweep_jobs) +
                     " (split the sweep, or raise the cap with --max-jobs)");
    }
}

} // namespace gpupool::recipe::detail
