// Starter projects for `gpupool recipe new --template T NAME`: a folder laid out as a repository
// recipe (recipe.toml, the script it runs, a README) that validates as written and, for the CPU
// templates, runs as written (`gpupool run NAME/recipe.toml`). The texts are compiled in, so the
// command works offline and matches this gpupool's recipe format. Pure apart from
// write_starter(); thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::catalog {

struct StarterFile {
    std::string path; // relative to the project folder
    std::string text;
};

// inspect, python, torch-cpu, transformerlens.
std::vector<std::string> starter_names();

// The files of template `name` for a recipe called `recipe_name` (a valid recipe name).
Result<std::vector<StarterFile>> starter_files(std::string_view name, std::string_view recipe_name);

// Writes them into `dest`, which must not exist yet.
Status write_starter(std::string_view name, std::string_view recipe_name, const std::filesystem::path& dest);

} // namespace gpupool::catalog
