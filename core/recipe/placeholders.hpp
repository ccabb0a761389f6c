// Sweep placeholders in recipe strings (internal to core/recipe).
//
// `{ident}` is a sweep parameter; `{{ident}}` is the literal text `{ident}`; `${ident}` (a shell
// variable) and any other brace are left alone. Pure functions apart from `diag`.
#pragma once

#include "core/recipe/diagnostics.hpp"
#include "core/recipe/recipe.hpp"

#include <toml++/toml.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::recipe::detail {

struct Placeholder {
    std::size_t begin = 0; // index of '{'
    std::size_t end = 0;   // one past '}'
    std::string name{};
    bool escaped = false;  // written as {{name}}
};

std::vector<Placeholder> find_placeholders(std::string_view s);

// `s` with every `{param}` replaced by its value and every `{{name}}` by `{name}`; placeholders
// that name no parameter stay as written.
std::string substitute(std::string_view s, const EnvList& params);

// Reports each placeholder of `text` (the value of `node`) that names none of `params`.
// `explained` are names a problem already reported accounts for (a parameter with a bad value, one
// in a misspelt `[sweeps]` table): not reported again.
void check_placeholders(const toml::node& node, std::string_view text, const std::string& field,
                        const std::vector<std::string>& params, const std::vector<std::string>& explained,
                        Diagnostics& diag);

} // namespace gpupool::recipe::detail
