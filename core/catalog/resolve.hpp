// Where a command finds its recipe: a file, or a name in the shared recipe repositories.
//
// Rules:
// - An argument names a recipe (rather than a file) when no such file exists and it is a valid
//   recipe name (no `/`, no `.toml`); otherwise it is read as a file.
// - The repositories are the `--repo` values when a command is given some, else the configured list
//   (the client config's `recipes`), in that order; the first wins on a name clash (catalog.hpp).
// - Only a reference that does not parse is an Error here. A repository that cannot be read is one
//   of the Catalog's problems(), and the others still serve: the caller shows them.
// - A recipe read from a file opens the repositories only when its `extends` names one that is not
//   built in (lazy_resolver), so a file that extends only built-ins never touches git.
// Pure functions over their arguments, apart from the file system and git that they are handed;
// thread-compatible.
#pragma once

#include "core/catalog/catalog.hpp"
#include "core/recipe/parser.hpp"
#include "core/util/result.hpp"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace gpupool::catalog {

// The repositories to read, parsed: `flags` when not empty, else `configured`. An Error names the
// value it is about: `--repo`, or `recipes[I]` for the I-th configured one.
Result<std::vector<RepoRef>> recipe_repos(const std::vector<std::string>& flags,
                                          const std::vector<std::string>& configured);

// The catalog of those repositories (recipe_repos), cloning what is missing into `cache_dir`.
Result<Catalog> open_catalog(const std::vector<std::string>& flags, const std::vector<std::string>& configured,
                             Git& git, const std::filesystem::path& cache_dir);

// The recipe named `name` in `cat`, or a not_found Error that starts with `lead` (what else was
// tried, "no recipe file `NAME`") and says where it looked: the nearest name when there is one,
// how to add a repository when none is configured.
Result<const RecipeEntry*> find_recipe(const Catalog& cat, const std::string& name, const std::string& lead);

// True when `arg` should be read as a recipe name rather than a file (see the rules above).
bool names_a_recipe(const std::string& arg);

// An `extends` resolver that calls `open` on its first lookup and resolves in that catalog from
// then on. When `open` fails, `on_error` is told once and no name resolves.
recipe::NameResolver lazy_resolver(std::function<Result<Catalog>()> open, std::function<void(const Error&)> on_error);

} // namespace gpupool::catalog
