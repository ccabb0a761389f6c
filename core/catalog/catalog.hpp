// The catalog: every recipe in the recipe repositories a fellow configured, in order, with the
// clones they need kept in the user's cache directory (docs/recipes.md, "Sharing recipes").
//
// Rules:
// - A repository is a local folder read in place when it names an existing folder and pins no
//   revision; anything else (a URL, or a pinned revision) is cloned once into
//   `cache_dir/<clone_dir_name>` and read from there until `update` fetches it again. A pinned
//   revision is checked out detached and recorded as its commit.
// - Recipes are read from the reference's folder (`URL#FOLDER`) when it names one: a folder of the
//   checkout that must exist and is not reached through a symlink. Without one, from the top level,
//   or from `recipes/` when the top level holds no recipe and `recipes/` is a folder (a project
//   that keeps its recipes beside its code, like gpupool's own repository).
// - A repository that yields no recipe at all (and no problem) gets a note that says where it
//   looked and how to name a folder: an empty list never goes without a reason.
// - Repositories are searched in the order given: on a name clash the first wins, and the others
//   are kept in shadowed() so that `recipe list` can say so.
// - One broken repository (git fails, a path is missing) or recipe (its recipe.toml does not
//   parse) is a problem, reported with its path and line; it does not hide the others.
// - Recipes are parsed with the catalog as their `extends` resolver, so a recipe may extend one
//   from another repository; built-in names come first (recipe::builtin_recipe).
// A Catalog is a value once built: thread-compatible, and find()/resolver() are const.
#pragma once

#include "core/catalog/git.hpp"
#include "core/catalog/repo_ref.hpp"
#include "core/catalog/repository.hpp"
#include "core/recipe/parser.hpp"
#include "core/util/result.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::catalog {

struct RepoState {
    RepoRef ref;
    std::filesystem::path root; // where its recipes are read from (the checkout's folder, when one is read)
    std::string commit;         // the commit read (empty for a folder read in place)
    bool cloned = false;        // root is a clone in the cache
};

class Catalog {
public:
    // Opens the repositories (cloning the missing ones) and parses their recipes.
    static Catalog open(const std::vector<RepoRef>& refs, Git& git, const std::filesystem::path& cache_dir);

    const std::vector<RepoState>& repositories() const { return m_repos; }
    const std::vector<RecipeEntry>& recipes() const { return m_recipes; } // the winners, repository order
    const std::vector<RecipeEntry>& shadowed() const { return m_shadowed; }
    const std::vector<Error>& problems() const { return m_problems; }
    // Why a repository lists nothing, one line each (not failures).
    const std::vector<std::string>& notes() const { return m_notes; }
    const RecipeEntry* find(std::string_view name) const;
    std::vector<std::string> names() const;

    // For recipe::ParseOptions::resolve_name.
    recipe::NameResolver resolver() const;

    // ParseOptions for a recipe of this catalog: `extends` resolves here, and the jobs record the
    // recipe's origin.
    recipe::ParseOptions parse_options(const RecipeEntry& entry, recipe::ParseOptions base = {}) const;

private:
    std::vector<RepoState> m_repos;
    std::vector<RecipeEntry> m_recipes;
    std::vector<RecipeEntry> m_shadowed;
    std::vector<Error> m_problems;
    std::vector<std::string> m_notes;
};

// A repository's clone, made when it is missing. `fresh` says whether this call cloned it.
struct Checkout {
    RepoState state;
    bool fresh = false;
};
Result<Checkout> ensure_checkout(const RepoRef& ref, Git& git, const std::filesystem::path& cache_dir);

// `gpupool recipe update`: fetches each cloned repository and checks its revision out again (the
// default branch's newest commit when it pins none). A repository that cannot be fetched keeps the
// checkout it had; its error is in `error`.
struct Updated {
    RepoRef ref;
    std::string before; // commit; empty when it was not cloned yet
    std::string after;
    bool in_place = false; // a local folder, read as it is: nothing to fetch
    Status error;
};
std::vector<Updated> update_repositories(const std::vector<RepoRef>& refs, Git& git,
                                         const std::filesystem::path& cache_dir);

// The default cache directory for clones: $XDG_CACHE_HOME/gpupool/recipes, else
// ~/.cache/gpupool/recipes.
std::filesystem::path default_cache_dir();

} // namespace gpupool::catalog
