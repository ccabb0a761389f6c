// One recipe repository on disk: a folder with one folder per recipe, each holding `recipe.toml`,
// the files it ships as `[inputs]`, and a `README.md` whose first paragraph describes it.
//
// find_recipes() only looks (names, descriptions); parsing the recipes is the catalog's job,
// because a recipe may `extends` one from another repository. Everything in a repository is
// someone else's text: a folder whose name is not a recipe name (field_rules.hpp) is skipped, a
// recipe folder or `recipe.toml` that is a symlink is refused (it could point anywhere on the
// reader's disk), a README is read up to 64 KiB and its description made printable and cut to 300
// characters. copy_recipe() copies regular files and folders, and symlinks only when they stay
// inside the recipe's folder. Errors name the path. Thread-safe: no shared state.
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/util/result.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::catalog {

struct RecipeEntry {
    std::string name;              // the folder's name
    std::filesystem::path dir;     // the recipe's folder
    std::string description;       // README.md's first paragraph; empty without one
    std::vector<std::string> tags; // from recipe.toml (filled in when the catalog parses it)
    recipe::Origin origin;         // name, repository and revision, as jobs record it

    std::filesystem::path file() const { return dir / "recipe.toml"; }
};

struct Found {
    std::vector<RecipeEntry> recipes; // sorted by name
    std::vector<Error> problems;      // folders that look like recipes and are not usable
};

// The recipes directly under `root`; `repo` and `revision` go into each entry's origin.
Found find_recipes(const std::filesystem::path& root, const std::string& repo, const std::string& revision);

// The first paragraph of a Markdown text that is not a heading, joined into one line.
std::string readme_description(std::string_view markdown);

// Copies the recipe's folder to `dest`, which must not exist yet (its parent is created). On an
// error nothing is left at `dest`.
Status copy_recipe(const RecipeEntry& entry, const std::filesystem::path& dest);

} // namespace gpupool::catalog
