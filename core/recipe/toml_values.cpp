#include "core/recipe/toml_values.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/resources/quantity.hpp"

#include <array>
#include <charconv>
#include <system_error>

namespace gpupool::recipe::detail {

namespace res = gpupool::resources;

std::string type_phrase(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    case toml::node_type::none: break;
    }
    return "nothing";
}

std::string render_float(double v) {
    std::array<char, 64> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    if (ec != std::errc()) {
        return "0";
    }
    std::string s(buf.data(), end);
    return s;
}

const toml::table* expect_table(const toml::node& node, const std::string& field, Diagnostics& diag) {
    if (const auto* t = node.as_table()) {
        return t;
    }
    diag.add(node, field, "expected a table, got " + type_phrase(node));
    return nullptr;
}

std::optional<std::string> expect_string(const toml::node& node, const std::string& field, Diagnostics& diag,
                                         bool allow_empty) {
    const auto* s = node.as_string();
    if (s == nullptr) {
        diag.add(node, field, "expected a string, got " + type_phrase(node));
        return std::nullopt;
    }
    if (!allow_empty && s->get().empty()) {
        diag.add(node, field, "must not be empty");
        return std::nullopt;
    }
    if (auto st = check_no_nul(s->get()); !st) {
        diag.add(node, field, st.error().message);
        return std::nullopt;
    }
    return s->get();
}

std::optional<std::int64_t> expect_integer(const toml::node& node, const std::string& field, Diagnostics& diag,
                                           std::int64_t lo, std::int64_t hi) {
    const auto* i = node.as_integer();
    if (i == nullptr) {
        diag.add(node, field, "expected an integer, got " + type_phrase(node));
        return std::nullopt;
    }
    std::int64_t v = i->get();
    if (v < lo || v > hi) {
        diag.add(node, field,
                 "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
                     std::to_string(v));
        return std::nullopt;
    }
    return v;
}

std::optional<std::vector<std::string>> expect_string_list(const toml::node& node, const std::string& field,
                                                           Diagnostics& diag) {
    const auto* arr = node.as_array();
    if (arr == nullptr) {
        diag.add(node, field, "expected an array of strings, got " + type_phrase(node));
        return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (std::size_t i = 0; i < arr->size(); ++i) {
        const toml::node& el = *arr->get(i);
        auto s = expect_string(el, field + "[" + std::to_string(i) + "]", diag);
        if (s) {
            out.push_back(std::move(*s));
        } else {
            ok = false;
        }
    }
    if (!ok) {
        return std::nullopt;
    }
    return out;
}

std::optional<std::int64_t> expect_memory(const toml::node& node, const std::string& field, Diagnostics& diag) {
    if (node.is_integer() || node.is_floating_point()) {
        diag.add(node, field, "a size needs a unit: write it as a string like \"16GiB\" or \"512MiB\"");
        return std::nullopt;
    }
    auto s = expect_string(node, field, diag);
    if (!s) {
        return std::nullopt;
    }
    auto mib = res::parse_memory_mib(*s);
    if (!mib) {
        diag.add(node, field, mib.error().message);
        return std::nullopt;
    }
    if (*mib == 0) {
        diag.add(node, field, "must be larger than zero");
        return std::nullopt;
    }
    return *mib;
}

std::optional<std::int64_t> expect_duration(const toml::node& node, const std::string& field, Diagnostics& diag) {
    if (node.is_integer() || node.is_floating_point()) {
        diag.add(node, field, "a duration needs a unit: write it as a string like \"90m\", \"2h\" or \"45s\"");
        return std::nullopt;
    }
    auto s = expect_string(node, field, diag);
    if (!s) {
        return std::nullopt;
    }
    auto secs = res::parse_duration_s(*s);
    if (!secs) {
        diag.add(node, field, secs.error().message);
        return std::nullopt;
    }
    return *secs;
}

std::optional<std::int64_t> expect_milli(const toml::node& node, const std::string& field, Diagnostics& diag) {
    Result<std::int64_t> r = make_error(ErrorCode::internal, "unset");
    if (const auto* i = node.as_integer()) {
        if (i->get() < 0 || i->get() > 1'000'000) {
            diag.add(node, field, "expected a non-negative number, got " + std::to_string(i->get()));
            return std::nullopt;
        }
        r = i->get() * res::k_milli_per_unit;
    } else if (const auto* f = node.as_floating_point()) {
        r = res::milli_from_double(f->get());
    } else if (const auto* s = node.as_string()) {
        r = res::parse_milli(s->get());
    } else {
        diag.add(node, field, "expected a number like 0.25, got " + type_phrase(node));
        return std::nullopt;
    }
    if (!r) {
        diag.add(node, field, r.error().message);
        return std::nullopt;
    }
    return *r;
}

std::optional<std::string> scalar_text(const toml::node& node) {
    if (const auto* s = node.as_string()) {
        return s->get();
    }
    if (const auto* i = node.as_integer()) {
        return std::to_string(i->get());
    }
    if (const auto* f = node.as_floating_point()) {
        return render_float(f->get());
    }
    if (const auto* b = node.as_boolean()) {
        return b->get() ? std::string("true") : std::string("false");
    }
    return std::nullopt;
}

} // namespace gpupool::recipe::detail
