// Reading recipe TOML and following `extends` (internal to core/recipe).
//
// parse_toml turns toml++'s parse_error into an Error with the file position; Loader follows a
// recipe's `extends` chain (built-in names, or file paths when ParseOptions::allow_file_access)
// and deep-merges each child over its parent. Problems come back as Errors, never exceptions.
#pragma once

#include "core/recipe/parser.hpp"
#include "core/recipe/toml_values.hpp"
#include "core/util/result.hpp"

#include <toml++/toml.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::recipe::detail {

struct Loaded {
    toml::table table;
    std::string source;
    std::filesystem::path base_dir;
    SourceTexts texts{}; // this document's text, and those of the documents merged into it
};

Result<Loaded> parse_toml(std::string_view text, std::string source, std::filesystem::path base_dir);

// The whole file; not_found (with "does not exist" or "cannot be read") or io.
Result<std::string> read_file(const std::filesystem::path& path);

// Deep merge: keys of `child` override `parent`; tables merge recursively; arrays and scalars are
// replaced. The GPU request is one choice, so a child that sets any of gpu/gpus/gpu_memory drops
// the parent's others. Child nodes are moved, not copied: toml++ keeps a node's source position
// only on move, and error messages need it.
void merge_into(toml::table& parent, toml::table& child, bool is_resources);

struct Loader {
    const ParseOptions& options;
    std::vector<std::string> chain; // sources, outermost first
    std::vector<Origin> origins;     // the repository recipes followed, nearest first

    // `self` with its `extends` chain resolved and merged (at most k_max_extends_depth deep).
    Result<Loaded> load(Loaded self, int depth);

private:
    Result<Loaded> parent_from_file(const Loaded& self, const toml::node& ext, const std::string& name);
    Result<Loaded> parent_from_builtin(const Loaded& self, const toml::node& ext, const std::string& name);
    Result<Loaded> parent_from_repository(const toml::node& ext, const std::string& name, const NamedRecipe& found);
};

} // namespace gpupool::recipe::detail
