// Reading the members of a JSON object that came over the wire, for the api/ types' from_json:
// each reader checks the member's JSON type (no silent conversions: 1.9 is not an integer, "1" is
// not a number), leaves `out` as it is when the member is absent or null (unless it is required;
// the std::optional forms become nullopt) and names the member in its error (`at.key`, or `key` at
// the top level). Never throws.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace gpupool::api {

// The longest a name, label or key in a request body may be (the service's rule for every string
// field it reads).
inline constexpr std::size_t k_max_string_field_bytes = 4096;

namespace fields {

// "at.key", or "key" when `at` is empty (the top level).
std::string path(const std::string& at, const char* key);

Status integer(const nlohmann::json& j, const char* key, std::int64_t& out, const std::string& at,
               bool required = false);
Status integer(const nlohmann::json& j, const char* key, std::optional<std::int64_t>& out, const std::string& at);
// `max_bytes` > 0: a longer string is refused.
Status text(const nlohmann::json& j, const char* key, std::string& out, const std::string& at, bool required = false,
            std::size_t max_bytes = 0);
Status text(const nlohmann::json& j, const char* key, std::optional<std::string>& out, const std::string& at);
Status boolean(const nlohmann::json& j, const char* key, bool& out, const std::string& at, bool required = false);

// An error unless `j` is an object (`at` names it; "body" at the top level).
Status object(const nlohmann::json& j, const std::string& at);

// The integer as null when unset.
nlohmann::json or_null(const std::optional<std::int64_t>& v);

} // namespace fields

} // namespace gpupool::api
