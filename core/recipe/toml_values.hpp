// Reading typed values out of toml++ nodes for the recipe parser (internal to core/recipe).
//
// Each expect_* returns the value, or nullopt after adding one problem to `diag` at the node's
// position under `field` (the dotted path the messages name). Sizes and durations must carry a
// unit; strings never hold a NUL. Pure apart from `diag`; thread-safe on distinct Diagnostics.
#pragma once

#include "core/recipe/diagnostics.hpp"

#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::recipe::detail {

// "a string", "an integer", ... for messages.
std::string type_phrase(const toml::node& n);
// The shortest text that reads back as `v`.
std::string render_float(double v);

const toml::table* expect_table(const toml::node& node, const std::string& field, Diagnostics& diag);
std::optional<std::string> expect_string(const toml::node& node, const std::string& field, Diagnostics& diag,
                                         bool allow_empty = false);
std::optional<std::int64_t> expect_integer(const toml::node& node, const std::string& field, Diagnostics& diag,
                                           std::int64_t lo, std::int64_t hi);
std::optional<std::vector<std::string>> expect_string_list(const toml::node& node, const std::string& field,
                                                           Diagnostics& diag);
// A size given as a string with a unit ("16GiB"), in MiB; larger than zero.
std::optional<std::int64_t> expect_memory(const toml::node& node, const std::string& field, Diagnostics& diag);
// A duration given as a string with a unit ("90m"), in seconds.
std::optional<std::int64_t> expect_duration(const toml::node& node, const std::string& field, Diagnostics& diag);
// A share in milli-units from an integer, float, or string ("0.25", "25%").
std::optional<std::int64_t> expect_milli(const toml::node& node, const std::string& field, Diagnostics& diag);

// The text of every TOML document a recipe was read from (the file, the recipes it `extends`, each
// `--set` override), by the source name toml++ gave its nodes.
using SourceTexts = std::map<std::string, std::string, std::less<>>;

// A number as the recipe wrote it (`1.0`, `0.10`, `1e-3`, `1_000`), cut out of its document by the
// node's source region and read back with toml++ to check it is that very value; nullopt when the
// node is no number or its text cannot be recovered that way.
std::optional<std::string> number_spelling(const toml::node& node, const SourceTexts& texts);

// Text of a scalar used as a sweep value or env value: a string as it is, a number as written
// (number_spelling; rendered when its text is not at hand), true or false; nullopt for arrays,
// tables and dates.
std::optional<std::string> scalar_text(const toml::node& node, const SourceTexts& texts = {});

} // namespace gpupool::recipe::detail
