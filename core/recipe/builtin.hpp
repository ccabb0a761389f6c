// Built-in recipes: the base recipes that `extends = "NAME"` may name, compiled into the binary
// from recipes/builtin/*.toml so that they work wherever gpupool runs. Pure lookups, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::recipe {

// The TOML text of built-in recipe `name`, or nothing.
std::optional<std::string_view> builtin_recipe(std::string_view name);

} // namespace gpupool::recipe
