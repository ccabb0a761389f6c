#include "core/api/field_reader.hpp"

namespace gpupool::api {

using nlohmann::json;

namespace {

const json& null_json() {
    static const json k_null;
    return k_null;
}

std::string range_text(std::int64_t min, std::int64_t max) {
    if (min == k_min_integer && max == k_max_integer) {
        return "an integer";
    }
    if (max == k_max_integer) {
        return min == 1 ? "a positive integer" : "an integer of at least " + std::to_string(min);
    }
    return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

} // namespace

FieldReader::FieldReader(const json& j, std::string prefix) : m_j(j), m_prefix(std::move(prefix)) {}

std::string FieldReader::name(const char* key) const {
    return m_prefix.empty() ? key : m_prefix + "." + key;
}

void FieldReader::fail(const std::string& what, const std::string& field) {
    if (!m_error) {
        m_error = make_error(ErrorCode::invalid_input, what, field);
    }
}

const json& FieldReader::member(const char* key) const {
    if (!m_j.is_object()) {
        return null_json();
    }
    auto it = m_j.find(key);
    return it == m_j.end() ? null_json() : *it;
}

std::optional<std::int64_t> FieldReader::checked_integer(const json& v, const std::string& field, std::int64_t min,
                                                         std::int64_t max) {
    const bool too_big = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(k_max_integer);
    if (!v.is_number_integer() || too_big) {
        fail("expected " + range_text(min, max) + ", got " + (too_big ? std::string("a larger number") : v.type_name()),
             field);
        return std::nullopt;
    }
    const auto n = v.get<std::int64_t>();
    if (n < min || n > max) {
        fail("expected " + range_text(min, max) + ", got " + std::to_string(n), field);
        return std::nullopt;
    }
    return n;
}

std::int64_t FieldReader::integer(const char* key, std::int64_t min, std::int64_t max,
                                  std::optional<std::int64_t> fallback) {
    const json& v = member(key);
    if (v.is_null()) {
        if (!fallback) {
            fail("missing required field", name(key));
        }
        return fallback.value_or(0);
    }
    return checked_integer(v, name(key), min, max).value_or(fallback.value_or(0));
}

std::optional<std::int64_t> FieldReader::optional_integer(const char* key, std::int64_t min, std::int64_t max) {
    const json& v = member(key);
    return v.is_null() ? std::nullopt : checked_integer(v, name(key), min, max);
}

std::string FieldReader::text(const char* key, std::size_t max_bytes, std::optional<std::string> fallback) {
    const json& v = member(key);
    if (v.is_null()) {
        if (!fallback) {
            fail("missing required field", name(key));
        }
        return fallback.value_or(std::string());
    }
    if (!v.is_string()) {
        fail(std::string("expected a string, got ") + v.type_name(), name(key));
        return fallback.value_or(std::string());
    }
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() > max_bytes) {
        fail("longer than " + std::to_string(max_bytes) + " bytes", name(key));
        return fallback.value_or(std::string());
    }
    return s;
}

std::optional<std::string> FieldReader::optional_text(const char* key, std::size_t max_bytes) {
    if (member(key).is_null()) {
        return std::nullopt;
    }
    return text(key, max_bytes, std::string());
}

bool FieldReader::boolean(const char* key, std::optional<bool> fallback) {
    const json& v = member(key);
    if (v.is_null()) {
        if (!fallback) {
            fail("missing required field", name(key));
        }
        return fallback.value_or(false);
    }
    if (!v.is_boolean()) {
        fail(std::string("expected true or false, got ") + v.type_name(), name(key));
        return fallback.value_or(false);
    }
    return v.get<bool>();
}

double FieldReader::number(const char* key, std::optional<double> fallback) {
    const json& v = member(key);
    if (v.is_null()) {
        if (!fallback) {
            fail("missing required field", name(key));
        }
        return fallback.value_or(0.0);
    }
    if (!v.is_number()) {
        fail(std::string("expected a number, got ") + v.type_name(), name(key));
        return fallback.value_or(0.0);
    }
    return v.get<double>();
}

void FieldReader::object() {
    if (!m_j.is_object()) {
        fail(std::string("expected a JSON object, got ") + m_j.type_name(), m_prefix.empty() ? "body" : m_prefix);
    }
}

std::vector<std::int64_t> FieldReader::integers(const char* key, std::int64_t min, bool required) {
    const json& v = member(key);
    std::vector<std::int64_t> out;
    if (v.is_null()) {
        if (required) {
            fail("missing required field", name(key));
        }
        return out;
    }
    if (!v.is_array()) {
        fail(std::string("expected an array of integers, got ") + v.type_name(), name(key));
        return out;
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
        auto n = checked_integer(v[i], name(key) + "[" + std::to_string(i) + "]", min, k_max_integer);
        if (!n) {
            return {};
        }
        out.push_back(*n);
    }
    return out;
}

std::vector<std::string> FieldReader::texts(const char* key, std::size_t max_bytes) {
    const json& v = member(key);
    std::vector<std::string> out;
    if (v.is_null()) {
        return out;
    }
    if (!v.is_array()) {
        fail(std::string("expected an array of strings, got ") + v.type_name(), name(key));
        return out;
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string at = name(key) + "[" + std::to_string(i) + "]";
        if (!v[i].is_string() || v[i].get_ref<const std::string&>().size() > max_bytes) {
            fail("expected a string of at most " + std::to_string(max_bytes) + " bytes", at);
            return {};
        }
        out.push_back(v[i].get<std::string>());
    }
    return out;
}

json or_null(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(); }

} // namespace gpupool::api
