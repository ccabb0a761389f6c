// Field rules: the checks that every job field which ends up on a worker's command line, in a
// job's environment or in its file paths must pass, shared by the TOML parser (parser.cpp) and the
// JSON reader (recipe_json.cpp) so that both accept exactly the same values. The image reference
// has its own module (image_ref.hpp).
//
// Rules:
// - No string field holds a NUL byte: the engines and execve() take C strings, so a NUL would
//   silently cut the value short.
// - Environment names are identifiers ([A-Za-z_][A-Za-z0-9_]*): `-e NAME=value` must not be read
//   with another `=` split or a missing value (which makes the engines copy the worker's own
//   variable). The GPUPOOL_ prefix is the worker's.
// - Model ids are `name` or `org/name`, each part [A-Za-z0-9][A-Za-z0-9._-]*, at most 96 long.
// - Output paths are relative to the job's output directory, without `..`.
// Pure functions, thread-safe. Each returns an invalid_input Error whose message says what is
// wrong; the caller sets the field (and, in the parser, the position).
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/util/result.hpp"

#include <string>
#include <string_view>

namespace gpupool::recipe {

bool has_nul(std::string_view text);
// C0 controls (NUL included) and DEL.
bool has_control_character(std::string_view text);

Status check_no_nul(std::string_view text);
Status check_env_name(std::string_view name);
// "org/name", or "org/name@revision" (a pinned revision, check_model_revision's rule).
Status check_model_id(std::string_view id);
// A model's revision: a branch, tag or commit of [A-Za-z0-9._-/], at most 128 characters, without
// "..", empty or "." segments. The one rule: recipes and the worker's model cache both check it.
Status check_model_revision(std::string_view rev);
// A model id without its pinned revision ("org/name@rev" -> "org/name").
std::string model_repo(std::string_view id);
// What ran, pinned: a model to `revision` ("org/name@rev", replacing a pin it had) and an image
// reference to `digest` ("ref:tag@sha256:...", replacing a digest it had). `gpupool repro` and the
// coordinator's spot checks pin a job with these.
std::string pinned_model(std::string_view model, std::string_view revision);
std::string pinned_image(std::string_view image, std::string_view digest);
Status check_output_path(std::string_view path);
// A recipe's name in a shared repository (its folder): 1 to 64 lowercase letters, digits, `.`, `_`
// and `-`, starting with a letter or digit.
Status check_recipe_name(std::string_view name);
// Where a repository recipe came from, as a job carries it (JobSpec::origins).
Status check_origin(const Origin& origin);

} // namespace gpupool::recipe
