// The CLI's side of finding recipes (the rules are core/catalog/resolve.hpp's): the repositories a
// command reads come from its `--repo` flags or else the client config, and each problem a
// repository has is printed as a warning on stderr (in --json mode too: stdout stays one JSON
// document) while the others still serve.
#pragma once

#include "cmd/cli.hpp"
#include "core/catalog/catalog.hpp"
#include "core/catalog/resolve.hpp"

#include <string>
#include <vector>

namespace gpupool::cmd {

// The repositories to read, in order: `flags` when not empty, else the config's `recipes`.
Result<std::vector<catalog::RepoRef>> recipe_repos(const GlobalOptions& global, const std::vector<std::string>& flags);

// Opens the catalog of those repositories (cloning what is missing into the user's cache), printing
// each problem and note.
Result<catalog::Catalog> open_catalog(const GlobalOptions& global, const std::vector<std::string>& flags);

// An `extends` resolver that opens the catalog on its first call, for recipes read from files; a
// catalog that cannot be opened is a warning, and then no name resolves.
recipe::NameResolver lazy_resolver(const GlobalOptions& global, const std::vector<std::string>& flags);

} // namespace gpupool::cmd
