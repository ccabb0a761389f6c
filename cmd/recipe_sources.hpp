// Where the CLI finds recipes: a file, or a name in the shared recipe repositories (core/catalog).
//
// The repositories are the `--repo` flags when a command is given some, else the client config's
// `recipes` list. They are opened only when a command needs them (a recipe named rather than a
// file, an `extends` that is not built in), so a recipe file that extends only built-ins never
// touches git. Problems with one repository are printed as warnings and the others still serve.
#pragma once

#include "cmd/cli.hpp"
#include "core/catalog/catalog.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::cmd {

// The repositories to read, in order: `flags` when not empty, else the config's.
Result<std::vector<catalog::RepoRef>> recipe_repos(const GlobalOptions& global, const std::vector<std::string>& flags);

// Opens the catalog of those repositories (cloning what is missing), printing each problem as a
// warning on stderr (in --json mode too: stdout stays one JSON document).
Result<catalog::Catalog> open_catalog(const GlobalOptions& global, const std::vector<std::string>& flags);

// An `extends` resolver that opens the catalog on its first call, for recipes read from files.
recipe::NameResolver lazy_resolver(const GlobalOptions& global, const std::vector<std::string>& flags);

// A recipe named `name` in the catalog, or an Error that says so (with the nearest name); `lead`
// says what else was tried ("no recipe file `NAME`").
Result<const catalog::RecipeEntry*> find_recipe(const catalog::Catalog& cat, const std::string& name,
                                                const std::string& lead);

// True when `arg` should be read as a recipe name rather than a file: no such file exists and it is
// a valid recipe name (no `/`, no `.toml`).
bool names_a_recipe(const std::string& arg);

} // namespace gpupool::cmd
