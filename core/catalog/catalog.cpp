#include "core/catalog/catalog.hpp"

#include "core/recipe/builtin.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <system_error>
#include <unistd.h>

namespace gpupool::catalog {

namespace fs = std::filesystem;

namespace {

// A local folder, read as it is.
bool in_place(const RepoRef& ref) {
    std::error_code ec;
    return ref.revision.empty() && fs::is_directory(ref.location, ec);
}

Error about_repo(const RepoRef& ref, Error e) {
    e.message = "recipe repository `" + ref.text() + "`: " + e.message;
    return e;
}

// A local path is cloned by its absolute name, so the same folder from two working directories
// is one clone.
std::string clone_source(const RepoRef& ref) {
    std::error_code ec;
    if (fs::is_directory(ref.location, ec)) {
        return fs::absolute(ref.location, ec).string();
    }
    return ref.location;
}

// The folder `ref` names inside the checkout at `top`: it must be a folder and stay inside the
// checkout once symlinks are followed.
Result<fs::path> named_folder(const RepoRef& ref, const fs::path& top) {
    std::error_code ec;
    const fs::path dir = top / ref.subdir;
    if (!fs::is_directory(dir, ec)) {
        return about_repo(ref, make_error(ErrorCode::not_found, "it has no folder `" + ref.subdir + "`"));
    }
    const fs::path real_top = fs::canonical(top, ec);
    const fs::path real_dir = fs::canonical(dir, ec);
    const fs::path rel = real_dir.lexically_relative(real_top);
    if (ec || rel.empty() || *rel.begin() == "..") {
        return about_repo(
            ref, make_error(ErrorCode::invalid_input, "its folder `" + ref.subdir + "` leads outside the repository"));
    }
    return dir;
}

// The recipes of one checkout: in the named folder, else at the top level, else under recipes/.
Result<Found> read_checkout(const RepoRef& ref, RepoState& state) {
    const std::string repo = ref.origin_repo();
    if (!ref.subdir.empty()) {
        auto dir = named_folder(ref, state.root);
        if (!dir) {
            return dir.error();
        }
        state.root = *dir;
        return find_recipes(state.root, repo, state.commit);
    }
    Found found = find_recipes(state.root, repo, state.commit);
    std::error_code ec;
    const fs::path nested = state.root / "recipes";
    if (found.recipes.empty() && found.problems.empty() && fs::is_directory(fs::symlink_status(nested, ec))) {
        state.root = nested;
        found = find_recipes(state.root, repo, state.commit);
    }
    return found;
}

std::string empty_note(const RepoRef& ref) {
    std::string where = ref.subdir.empty() ? "at its top level or in `recipes/`" : "in `" + ref.subdir + "/`";
    std::string note = "recipe repository `" + ref.text() + "` has no recipes " + where +
                       " (a recipe is a folder holding a recipe.toml)";
    if (ref.subdir.empty()) {
        note += "; if they are in another folder, name it: `" + ref.text() + "#FOLDER`";
    }
    return note;
}

} // namespace

Result<Checkout> ensure_checkout(const RepoRef& ref, Git& git, const fs::path& cache_dir) {
    if (in_place(ref)) {
        return Checkout{RepoState{ref, fs::path(ref.location), "", false}, false};
    }
    const fs::path dir = cache_dir / clone_dir_name(ref);
    std::error_code ec;
    bool fresh = false;
    if (!fs::exists(dir / ".git", ec)) {
        fs::create_directories(cache_dir, ec);
        // Cloned under a temporary name and renamed: a clone cut short is never read as a repository.
        const fs::path tmp = cache_dir / ("." + dir.filename().string() + ".partial-" + std::to_string(::getpid()));
        fs::remove_all(tmp, ec);
        Status st = git.clone(clone_source(ref), tmp);
        if (st && !ref.revision.empty()) {
            st = git.checkout(tmp, ref.revision);
        }
        if (!st) {
            fs::remove_all(tmp, ec);
            return about_repo(ref, st.error());
        }
        fs::rename(tmp, dir, ec);
        if (ec) {
            fs::remove_all(tmp, ec); // another gpupool cloned it at the same time: theirs is as good
        }
        fresh = true;
    }
    auto commit = git.head(dir);
    if (!commit) {
        return about_repo(ref, commit.error());
    }
    return Checkout{RepoState{ref, dir, *commit, true}, fresh};
}

Catalog Catalog::open(const std::vector<RepoRef>& refs, Git& git, const fs::path& cache_dir) {
    Catalog c;
    for (const auto& ref : refs) {
        auto co = ensure_checkout(ref, git, cache_dir);
        if (!co) {
            c.m_problems.push_back(co.error());
            continue;
        }
        auto read = read_checkout(ref, co->state);
        if (!read) {
            c.m_problems.push_back(read.error());
            continue;
        }
        Found& found = *read;
        if (found.recipes.empty() && found.problems.empty()) {
            c.m_notes.push_back(empty_note(ref));
        }
        c.m_problems.insert(c.m_problems.end(), found.problems.begin(), found.problems.end());
        for (auto& e : found.recipes) {
            (c.find(e.name) != nullptr ? c.m_shadowed : c.m_recipes).push_back(std::move(e));
        }
        c.m_repos.push_back(std::move(co->state));
    }
    // Tags come from the parsed recipe; one that does not parse is a problem, not a listing.
    std::vector<RecipeEntry> usable;
    for (auto& e : c.m_recipes) {
        auto parsed = recipe::parse_recipe_file(e.file(), c.parse_options(e));
        if (!parsed) {
            c.m_problems.push_back(parsed.error());
            continue;
        }
        e.tags = parsed->tags;
        usable.push_back(std::move(e));
    }
    c.m_recipes = std::move(usable);
    return c;
}

const RecipeEntry* Catalog::find(std::string_view name) const {
    auto it = std::find_if(m_recipes.begin(), m_recipes.end(), [&](const RecipeEntry& e) { return e.name == name; });
    return it == m_recipes.end() ? nullptr : &*it;
}

std::vector<std::string> Catalog::names() const {
    std::vector<std::string> out;
    for (const auto& e : m_recipes) {
        out.push_back(e.name);
    }
    return out;
}

recipe::NameResolver Catalog::resolver() const {
    // A copy, so that the resolver outlives (and ignores moves of) this catalog.
    auto entries = std::make_shared<const std::vector<RecipeEntry>>(m_recipes);
    return [entries](const std::string& name) -> std::optional<recipe::NamedRecipe> {
        for (const auto& e : *entries) {
            if (e.name == name) {
                return recipe::NamedRecipe{e.file(), e.origin};
            }
        }
        return std::nullopt;
    };
}

recipe::ParseOptions Catalog::parse_options(const RecipeEntry& entry, recipe::ParseOptions base) const {
    base.resolve_name = resolver();
    base.origin = entry.origin;
    return base;
}

std::vector<Updated> update_repositories(const std::vector<RepoRef>& refs, Git& git, const fs::path& cache_dir) {
    std::vector<Updated> out;
    for (const auto& ref : refs) {
        Updated u{ref, "", "", in_place(ref), {}};
        if (u.in_place) {
            out.push_back(std::move(u));
            continue;
        }
        const fs::path dir = cache_dir / clone_dir_name(ref);
        std::error_code ec;
        if (fs::exists(dir / ".git", ec)) {
            if (auto h = git.head(dir)) {
                u.before = *h;
            }
            Status st = git.fetch(dir);
            if (st) {
                st = git.checkout(dir, ref.revision);
            }
            if (!st) {
                u.error = about_repo(ref, st.error());
            }
            auto h = git.head(dir);
            u.after = h ? *h : u.before;
        } else {
            auto co = ensure_checkout(ref, git, cache_dir);
            if (co) {
                u.after = co->state.commit;
            } else {
                u.error = co.error();
            }
        }
        out.push_back(std::move(u));
    }
    return out;
}

fs::path default_cache_dir() {
    // NOLINTBEGIN(concurrency-mt-unsafe): read once per command
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
        return fs::path(xdg) / "gpupool" / "recipes";
    }
    if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
        return fs::path(home) / ".cache" / "gpupool" / "recipes";
    }
    // NOLINTEND(concurrency-mt-unsafe)
    return fs::temp_directory_path() / "gpupool-recipes";
}

} // namespace gpupool::catalog
