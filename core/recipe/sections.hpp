// The recipe's sections, each read from its TOML table into the Recipe (internal to core/recipe).
//
// One function per section (ninja's ParsePool/ParseRule shape): each checks its table's keys,
// reads what is valid into the JobSpec and adds every problem it finds to `diag`; none stops at
// the first problem and none throws. parser.cpp walks the document and calls them.
#pragma once

#include "core/recipe/diagnostics.hpp"
#include "core/recipe/parser.hpp"
#include "core/recipe/recipe.hpp"
#include "core/recipe/toml_values.hpp"

#include <toml++/toml.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::recipe::detail {

// The GPU request is one choice: setting one of these (in `extends` or `--set`) drops the others.
inline const std::vector<std::string> k_gpu_choice{"gpu", "gpus", "gpu_memory"};

// [resources]: section_resources.cpp.
void parse_resources(const toml::table& t, Resources& r, Diagnostics& diag);

// [inputs], [outputs], [logs], [cache]: section_files.cpp. Inputs are checked on disk (relative to
// `base_dir`) unless options.allow_file_access is off.
void parse_inputs(const toml::table& t, Inputs& in, const std::filesystem::path& base_dir,
                  const ParseOptions& options, Diagnostics& diag);
void parse_outputs(const toml::table& t, Outputs& out, Diagnostics& diag);
void parse_logs(const toml::table& t, Logs& logs, Diagnostics& diag);
// [cache]: `models`, and how the job uses them (`dtype`, `max_tokens`, `batch`) for its GPU memory.
void parse_cache(const toml::table& t, std::vector<std::string>& models, resources::ModelUse& use, Diagnostics& diag);

// [sweep]: section_sweep.cpp. Parameters in the order they are written; each number as written
// (`texts`: the recipe's documents, for number_spelling).
void parse_sweep(const toml::table& t, Sweep& sweep, const ParseOptions& options, const SourceTexts& texts,
                 Diagnostics& diag);

// The top level, [env] and [retry]: section_job.cpp.
// What the top level's misspelt keys account for: a required key they were meant to be, and the
// placeholders a misspelt `[sweep]` would have defined.
struct Explained {
    std::vector<std::string> keys{};
    std::vector<std::string> placeholders{};

    bool has_key(std::string_view key) const;
};
Explained explained_by(const std::vector<Misspelt>& misspelt, const toml::table& root);
// The top-level scalars: format, name, description, image, command, priority.
void parse_top(const toml::table& root, const std::string& source, const Explained& explained, JobSpec& job,
               Diagnostics& diag);
// Numbers as written, like sweep values.
void parse_env(const toml::table& t, EnvList& env, const SourceTexts& texts, Diagnostics& diag);
// `tags`: up to 16 short lowercase words (letters, digits, `-`), for `gpupool recipe list --tag`.
void parse_tags(const toml::node& n, std::vector<std::string>& tags, Diagnostics& diag);
void parse_retry(const toml::table& t, Retry& retry, Diagnostics& diag);
void parse_checkpoint(const toml::table& t, Checkpoint& checkpoint, Diagnostics& diag);
// [verify]: compare ("exact", "json", "none"), tolerance (json only), files.
void parse_verify(const toml::table& t, Verify& verify, Diagnostics& diag);

// Lays one `--set path=value` over the recipe's table (overrides.cpp). The GPU request is one
// choice, as in `extends`: setting one of gpu/gpus/gpu_memory drops the recipe's others. The
// override's own TOML text goes into `texts` (under the source name its nodes carry).
void apply_override(toml::table& root, const std::string& path, const std::string& value, SourceTexts& texts,
                    Diagnostics& diag);

} // namespace gpupool::recipe::detail
