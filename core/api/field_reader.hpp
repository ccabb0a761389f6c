// FieldReader: reads the members of one JSON object of a wire message with no silent conversions
// (1.9 is not an integer, "true" is not a bool), checking each against its range, and keeps the
// first problem as an Error naming the field with its path (`assignments[2].gpu_milli`).
//
// A parser reads every member it wants, then asks error(): a member that is wrong yields its
// fallback (or zero) so that reading goes on without branches, and only the first error is kept.
// Absent and null members are the same: the fallback when there is one, else "missing required
// field". Unknown members are ignored (an older peer meets a newer one). Every from_json in
// core/api reads through it.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpupool::api {

// The longest name, reason or label a wire message may carry (the service's limit for strings).
inline constexpr std::size_t k_max_text_bytes = 4096;
inline constexpr std::int64_t k_min_integer = std::numeric_limits<std::int64_t>::min();
inline constexpr std::int64_t k_max_integer = std::numeric_limits<std::int64_t>::max();

class FieldReader {
public:
    // `prefix` is the path of `j` itself ("" for a request body, whose members are named alone).
    FieldReader(const nlohmann::json& j, std::string prefix);

    // The member's path, as errors name it.
    std::string name(const char* key) const;

    std::int64_t integer(const char* key, std::int64_t min, std::int64_t max,
                         std::optional<std::int64_t> fallback = std::nullopt);
    // An optional integer: absent or null is nullopt.
    std::optional<std::int64_t> optional_integer(const char* key, std::int64_t min, std::int64_t max);
    std::string text(const char* key, std::size_t max_bytes, std::optional<std::string> fallback = std::nullopt);
    // An optional string: absent or null is nullopt.
    std::optional<std::string> optional_text(const char* key, std::size_t max_bytes);
    // No fallback: the member is required.
    bool boolean(const char* key, std::optional<bool> fallback);
    // Any JSON number (an integer too), as a double; no fallback: the member is required.
    double number(const char* key, std::optional<double> fallback);
    // An array of integers, each at least `min`; absent or null is empty unless `required`.
    // Errors name the element.
    std::vector<std::int64_t> integers(const char* key, std::int64_t min, bool required = false);
    // Each element of an array member with its path (`key[i]`); absent or null: none, unless
    // `required`. Returns false (and keeps the error) when the member is there but not an array.
    template <class Each>
    void elements(const char* key, bool required, Each each) {
        const nlohmann::json& v = member(key);
        if (v.is_null()) {
            if (required) {
                fail("missing required field", name(key));
            }
            return;
        }
        if (!v.is_array()) {
            fail(std::string("expected an array, got ") + v.type_name(), name(key));
            return;
        }
        for (std::size_t i = 0; i < v.size() && !m_error; ++i) {
            each(v[i], name(key) + "[" + std::to_string(i) + "]");
        }
    }
    // The member itself (null when absent), for one a reader of its own reads (`report`).
    const nlohmann::json& member_or_null(const char* key) const { return member(key); }
    // Fails unless the message itself is a JSON object.
    void object();
    // An array of strings; absent or null is empty.
    std::vector<std::string> texts(const char* key, std::size_t max_bytes);

    // The first problem met, if any.
    const std::optional<Error>& error() const { return m_error; }
    void fail(const std::string& what, const std::string& field);

private:
    // The member, or null when absent (or when `j` is not an object).
    const nlohmann::json& member(const char* key) const;
    std::optional<std::int64_t> checked_integer(const nlohmann::json& v, const std::string& field, std::int64_t min,
                                                std::int64_t max);

    const nlohmann::json& m_j;
    std::string m_prefix;
    std::optional<Error> m_error;
};

// Ids of the kind `Id` from an array of positive integers (errors name the element: `running[3]`).
template <class Id>
std::vector<Id> read_ids(FieldReader& r, const char* key, bool required = false) {
    std::vector<Id> out;
    for (std::int64_t v : r.integers(key, 1, required)) {
        out.emplace_back(v);
    }
    return out;
}

// The same, written as an array of integers.
template <class Id>
nlohmann::json ids_json(const std::vector<Id>& ids) {
    nlohmann::json out = nlohmann::json::array();
    for (const Id& id : ids) {
        out.push_back(id.value());
    }
    return out;
}

// An optional integer as the wire writes it: null when unset.
nlohmann::json or_null(const std::optional<std::int64_t>& v);

// An optional id the same way.
template <class Id>
nlohmann::json id_or_null(const std::optional<Id>& id) {
    return id ? nlohmann::json(id->value()) : nlohmann::json();
}

// An optional positive id: absent or null is nullopt.
template <class Id>
std::optional<Id> optional_id(FieldReader& r, const char* key) {
    auto v = r.optional_integer(key, 1, k_max_integer);
    return v ? std::optional<Id>(Id(*v)) : std::nullopt;
}

// Each element of an array member read by `read(element, path)` (a *_from_json taking a field
// prefix) into `out`; the first element that is wrong is the reader's error.
template <class T, class Read>
void read_each(FieldReader& r, const char* key, bool required, std::vector<T>& out, Read read) {
    r.elements(key, required, [&](const nlohmann::json& e, const std::string& at) {
        auto v = read(e, at);
        if (v) {
            out.push_back(std::move(*v));
        } else {
            r.fail(v.error().message, v.error().field);
        }
    });
}

// Each element's to_json, as an array.
template <class T>
nlohmann::json array_json(const std::vector<T>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const T& e : list) {
        out.push_back(to_json(e));
    }
    return out;
}

// What a parser returns once it has read everything: the first error, or the value.
template <class T>
Result<T> value_or_error(const FieldReader& r, T value) {
    if (r.error()) {
        return *r.error();
    }
    return value;
}

} // namespace gpupool::api
