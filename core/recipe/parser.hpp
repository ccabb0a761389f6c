// Recipe parser: TOML text -> validated Recipe, and Recipe -> JobSpecs.
//
// Every problem is reported as an Error whose `where` names the file, line and column of the
// offending key or value and whose `field` is its dotted path (`resources.gpu_memory`); all
// problems found in one pass are returned (the first in the Error, the rest in Error::more), root
// causes first: problems that follow from others (a missing required key, a placeholder no sweep
// defines) come after the rest, and those a misspelt key explains (`imgae`, `[sweeps]`) are left
// out. Unknown keys get the nearest valid key as a suggestion. A problem in a `--set KEY=VALUE`
// override names `--set KEY` as its file, with no line or column. The parser never throws: toml++ parse
// errors are converted here. It reads files only to follow `extends` and to check `[inputs]`, and
// both can be switched off (the fuzz target does).
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/util/result.hpp"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::recipe {

inline constexpr std::uint64_t k_default_max_sweep_jobs = 10000;
// The coordinator stores an input archive as one SQLite blob (under 1e9 bytes, with room left for
// tar headers): 900 MiB of files.
inline constexpr std::int64_t k_max_inputs_mib = 900;
inline constexpr std::int64_t k_max_outputs_mib = 900; // outputs are stored as one SQLite blob (1e9 bytes max)
inline constexpr std::int64_t k_max_log_mib = 64 * 1024; // logs.max_size, before the pool's own limit
inline constexpr int k_max_extends_depth = 8;

// A recipe that `extends` names and that is not built in, found in the shared recipe repositories
// (core/catalog): its recipe.toml and where it came from.
struct NamedRecipe {
    std::filesystem::path file;
    Origin origin;
};
// Looks a name up; nothing when no repository has it.
using NameResolver = std::function<std::optional<NamedRecipe>(const std::string& name)>;

struct ParseOptions {
    std::uint64_t max_sweep_jobs = k_default_max_sweep_jobs;
    bool allow_file_access = true; // follow `extends` paths and check `[inputs]` on disk
    // `[inputs] paths` are uploaded with the job: outside the recipe's directory (`../`, an absolute
    // path, a symlink that leads out) they are refused unless this is set (--allow-outside).
    bool allow_outside_inputs = false;
    // `--set key=value` overrides, applied on top of the file (value is TOML: 0.5, "x", [1, 2]).
    std::vector<std::pair<std::string, std::string>> overrides;
    // `extends = "NAME"` when NAME is not built in (unset: built-ins only). Used only with
    // allow_file_access.
    NameResolver resolve_name;
    // The recipe's own origin, when it was named from a repository rather than given as a file.
    std::optional<Origin> origin;
};

Result<Recipe> parse_recipe_file(const std::filesystem::path& path, const ParseOptions& options = {});

// `source_name` is used in messages; relative `extends`/`[inputs]` paths resolve against
// `base_dir` (the recipe's directory; the current directory when empty).
Result<Recipe> parse_recipe_text(std::string_view text, std::string_view source_name,
                                 const ParseOptions& options = {}, const std::filesystem::path& base_dir = {});

// One JobSpec per sweep point, in row-major order of the parameters as written.
Result<std::vector<JobSpec>> expand(const Recipe& recipe, const ParseOptions& options = {});

// Convenience: parse + expand.
Result<std::vector<JobSpec>> load_jobs(const std::filesystem::path& path, const ParseOptions& options = {});

// Names of the built-in recipes that `extends` may name (e.g. "inspect").
std::vector<std::string> builtin_recipe_names();

} // namespace gpupool::recipe
