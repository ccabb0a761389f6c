#include "core/catalog/repository.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/util/strings.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

namespace gpupool::catalog {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_max_readme = 64 * 1024;
constexpr std::size_t k_max_description = 300;

Error path_error(const fs::path& path, const std::string& message) {
    Error e = make_error(ErrorCode::invalid_input, message);
    e.where = SourcePos{path.string(), 0, 0};
    return e;
}

std::string read_prefix(const fs::path& file, std::size_t limit) {
    std::ifstream in(file, std::ios::binary);
    std::string text(limit, '\0');
    in.read(text.data(), static_cast<std::streamsize>(limit));
    text.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return text;
}

// The README's description, when there is a README and it is a plain file.
std::string describe(const fs::path& dir) {
    std::error_code ec;
    const fs::path readme = dir / "README.md";
    if (!fs::is_regular_file(fs::symlink_status(readme, ec))) {
        return {};
    }
    return readme_description(read_prefix(readme, k_max_readme));
}

} // namespace

std::string readme_description(std::string_view markdown) {
    std::istringstream in{std::string(markdown)};
    std::string line;
    std::string out;
    bool in_paragraph = false;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        const auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos) {
            if (in_paragraph) {
                break;
            }
            continue;
        }
        if (!in_paragraph && (line[first] == '#' || line.compare(first, 4, "<!--") == 0)) {
            continue;
        }
        in_paragraph = true;
        out += (out.empty() ? "" : " ") + line.substr(first);
        if (out.size() > k_max_description * 2) {
            break;
        }
    }
    out = util::escape_control(out);
    if (out.size() > k_max_description) {
        out = out.substr(0, k_max_description - 3) + "...";
    }
    return out;
}

Found find_recipes(const fs::path& root, const std::string& repo, const std::string& revision) {
    Found found;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
        found.problems.push_back(path_error(root, "the recipe repository is not a folder"));
        return found;
    }
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path dir = it->path();
        const std::string name = dir.filename().string();
        if (name.starts_with(".")) {
            continue;
        }
        std::error_code ec2;
        const auto dir_status = fs::symlink_status(dir, ec2);
        const auto file_status = fs::symlink_status(dir / "recipe.toml", ec2);
        if (!fs::is_directory(dir_status)) {
            if (fs::is_symlink(dir_status) && fs::exists(dir / "recipe.toml", ec2)) {
                found.problems.push_back(path_error(dir, "a recipe folder that is a symlink is not read"));
            }
            continue;
        }
        if (!fs::exists(file_status)) {
            continue; // not a recipe (templates, docs, the built-ins)
        }
        if (!fs::is_regular_file(file_status)) {
            found.problems.push_back(
                path_error(dir / "recipe.toml", "recipe.toml must be a plain file, not a symlink"));
            continue;
        }
        if (auto st = recipe::check_recipe_name(name); !st) {
            found.problems.push_back(path_error(dir, "`" + util::escape_control(name) + "`: " + st.error().message));
            continue;
        }
        RecipeEntry e;
        e.name = name;
        e.dir = dir;
        e.description = describe(dir);
        e.origin = recipe::Origin{name, repo, revision};
        found.recipes.push_back(std::move(e));
    }
    if (ec) {
        found.problems.push_back(path_error(root, "cannot list the repository: " + ec.message()));
    }
    std::sort(found.recipes.begin(), found.recipes.end(),
              [](const RecipeEntry& a, const RecipeEntry& b) { return a.name < b.name; });
    return found;
}

namespace {

// A symlink's target, when it stays inside `root` (relative, and not leading out with `..`).
bool link_stays_inside(const fs::path& link, const fs::path& root) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(link, ec);
    if (ec || target.is_absolute()) {
        return false;
    }
    const fs::path resolved = (link.parent_path() / target).lexically_normal();
    const fs::path rel = resolved.lexically_relative(root.lexically_normal());
    return !rel.empty() && *rel.begin() != "..";
}

Status copy_tree(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(from, fs::directory_options::none, ec), end; !ec && it != end;
         it.increment(ec)) {
        const fs::path src = it->path();
        const fs::path rel = src.lexically_relative(from);
        const fs::path dst = to / rel;
        const auto st = fs::symlink_status(src, ec);
        if (ec) {
            break;
        }
        if (fs::is_symlink(st)) {
            if (!link_stays_inside(src, from)) {
                return path_error(src, "a symlink that leads outside the recipe's folder; not copied");
            }
            fs::copy_symlink(src, dst, ec);
        } else if (fs::is_directory(st)) {
            if (rel.filename() == ".git") {
                it.disable_recursion_pending();
                continue;
            }
            fs::create_directory(dst, ec);
        } else if (fs::is_regular_file(st)) {
            fs::copy_file(src, dst, ec);
        } else {
            return path_error(src, "neither a file, a folder nor a symlink; not copied");
        }
        if (ec) {
            return make_error(ErrorCode::io,
                              "cannot copy `" + src.string() + "` to `" + dst.string() + "`: " + ec.message());
        }
    }
    if (ec) {
        return make_error(ErrorCode::io, "cannot read `" + from.string() + "`: " + ec.message());
    }
    return {};
}

} // namespace

Status copy_recipe(const RecipeEntry& entry, const fs::path& dest) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dest, ec))) {
        return make_error(ErrorCode::conflict, "`" + dest.string() + "` already exists; name another folder");
    }
    if (dest.has_parent_path()) {
        fs::create_directories(dest.parent_path(), ec);
    }
    if (!fs::create_directory(dest, ec) || ec) {
        return make_error(ErrorCode::io, "cannot create `" + dest.string() + "`: " + ec.message());
    }
    auto st = copy_tree(entry.dir, dest);
    if (!st) {
        fs::remove_all(dest, ec);
    }
    return st;
}

} // namespace gpupool::catalog
