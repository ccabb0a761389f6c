#include "core/recipe/toml_values.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/resources/quantity.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
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

namespace {

// The byte offset of (line, column) in `text`: toml++ counts lines from 1 at each '\n' and columns
// from 1 in code points. npos when the text has no such place.
std::size_t byte_offset(std::string_view text, std::size_t line, std::size_t column) {
    if (line == 0 || column == 0) {
        return std::string_view::npos;
    }
    std::size_t at = 0;
    for (std::size_t l = 1; l < line; ++l) {
        at = text.find('\n', at);
        if (at == std::string_view::npos) {
            return at;
        }
        ++at;
    }
    for (std::size_t c = 1; c < column; ++c) {
        if (at >= text.size() || text[at] == '\n') {
            return std::string_view::npos;
        }
        ++at;
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0U) == 0x80U) {
            ++at; // a UTF-8 continuation byte: the same code point
        }
    }
    return at;
}

// True when `spelling`, read by toml++ as a value, is `node`'s type and value.
bool reads_back_as(const std::string& spelling, const toml::node& node) {
    try {
        const toml::table t = toml::parse("v = " + spelling);
        const toml::node* v = t.get("v");
        if (t.size() != 1 || v == nullptr) {
            return false;
        }
        if (const auto* i = node.as_integer()) {
            return v->is_integer() && v->as_integer()->get() == i->get();
        }
        if (const auto* f = node.as_floating_point()) {
            if (!v->is_floating_point()) {
                return false;
            }
            const double a = f->get();
            const double b = v->as_floating_point()->get();
            return std::isnan(a) ? std::isnan(b) && std::signbit(a) == std::signbit(b)
                                 : std::memcmp(&a, &b, sizeof a) == 0;
        }
    } catch (const toml::parse_error&) {
    }
    return false;
}

} // namespace

std::optional<std::string> number_spelling(const toml::node& node, const SourceTexts& texts) {
    if (!node.is_integer() && !node.is_floating_point()) {
        return std::nullopt;
    }
    const toml::source_region& where = node.source();
    if (!where.path || where.begin.line != where.end.line) {
        return std::nullopt;
    }
    const auto text = texts.find(*where.path);
    if (text == texts.end()) {
        return std::nullopt;
    }
    const std::size_t begin = byte_offset(text->second, where.begin.line, where.begin.column);
    const std::size_t end = byte_offset(text->second, where.end.line, where.end.column);
    if (begin == std::string_view::npos || end == std::string_view::npos || end <= begin) {
        return std::nullopt;
    }
    std::string spelling = text->second.substr(begin, end - begin);
    if (!reads_back_as(spelling, node)) {
        return std::nullopt;
    }
    return spelling;
}

std::optional<std::string> scalar_text(const toml::node& node, const SourceTexts& texts) {
    if (const auto* s = node.as_string()) {
        return s->get();
    }
    if (auto spelt = number_spelling(node, texts)) {
        return spelt;
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
