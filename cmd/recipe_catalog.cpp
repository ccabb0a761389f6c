// The recipe repository commands: list, show (of a repository recipe), get, new, update.
#include "cmd/recipe.hpp"
#include "cmd/recipe_sources.hpp"
#include "cmd/remote.hpp"
#include "core/api/credits.hpp"
#include "core/catalog/starters.hpp"
#include "core/client/read_answer.hpp"
#include "core/credits/money.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/strings.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace gpupool::cmd {

namespace fs = std::filesystem;
namespace res = gpupool::resources;

namespace {

std::string short_commit(const std::string& commit) {
    return commit.empty() ? "-" : commit.substr(0, 12);
}

nlohmann::json entry_json(const catalog::RecipeEntry& e) {
    return {{"name", e.name},        {"description", e.description},  {"tags", e.tags},
            {"repo", e.origin.repo}, {"revision", e.origin.revision}, {"path", e.dir.string()}};
}

std::string cut(const std::string& text, std::size_t max) {
    return text.size() <= max ? text : text.substr(0, max - 3) + "...";
}

int fail(const GlobalOptions& global, const Error& e) {
    report_error(global, e);
    return k_exit_failed;
}

std::string read_text(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The files of a recipe's folder, relative, sorted (not following symlinks).
std::vector<std::string> files_of(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (!it->is_directory(ec)) {
            out.push_back(it->path().lexically_relative(dir).string());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

struct History {
    std::int64_t runs = 0;
    std::int64_t median_runtime_s = 0;
    std::int64_t median_cost_micro = 0;
};
using HistoryMap = std::map<std::pair<std::string, std::string>, History>; // (repo, recipe)

// The pool's history of the listed recipes, when a coordinator and a token are configured; a
// coordinator that cannot answer is a warning, not a failure of the listing.
HistoryMap pool_history(const GlobalOptions& global, const std::vector<const catalog::RecipeEntry*>& shown) {
    auto cfg = config::load_client_config(overrides(global));
    if (!cfg || cfg->token.empty() || shown.empty()) {
        return {};
    }
    wire::RecipeHistoryRequest asked;
    for (const auto* e : shown) {
        asked.recipes.push_back({e->name, e->origin.repo, ""});
    }
    client::ApiClient api(*cfg);
    auto r = client::read_answer(api.post("/v1/recipes/history", wire::to_json(asked)), "POST /v1/recipes/history",
                                 wire::recipe_history_reply_from_json);
    if (!r) {
        std::cerr << "warning: the pool's history of these recipes is unavailable: " << r.error().describe() << '\n';
        return {};
    }
    HistoryMap out;
    for (const auto& h : r->recipes) {
        out[{h.repo, h.recipe}] = History{h.runs, h.median_runtime_s, h.median_cost_micro};
    }
    return out;
}

} // namespace

int run_recipe_list(const RecipeOptions& options) {
    const auto& global = options.global;
    auto cat = open_catalog(global, options.repos);
    if (!cat) {
        return fail(global, cat.error());
    }
    std::vector<const catalog::RecipeEntry*> shown;
    for (const auto& e : cat->recipes()) {
        if (options.tag.empty() || std::find(e.tags.begin(), e.tags.end(), options.tag) != e.tags.end()) {
            shown.push_back(&e);
        }
    }
    const HistoryMap history = pool_history(global, shown);
    const auto history_of = [&](const catalog::RecipeEntry& e) -> const History* {
        auto h = history.find({e.origin.repo, e.name});
        return h == history.end() ? nullptr : &h->second;
    };
    if (global.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto* e : shown) {
            nlohmann::json j = entry_json(*e);
            if (const History* h = history_of(*e)) {
                j["history"] = {{"runs", h->runs},
                                {"median_runtime_s", h->median_runtime_s},
                                {"median_cost_micro", h->median_cost_micro}};
            }
            out.push_back(std::move(j));
        }
        std::cout << out.dump() << '\n';
        return cat->problems().empty() ? k_exit_ok : k_exit_failed;
    }
    if (cat->repositories().empty() && cat->problems().empty()) { // none configured (not: none could be read)
        std::cout << "No recipe repositories: add `recipes = [\"URL or path\"]` to the client config ("
                  << config::default_config_path(config::real_env).string()
                  << ") or pass --repo. `gpupool recipe builtins` lists the built-in bases.\n";
        return k_exit_ok;
    }
    std::vector<std::vector<std::string>> rows{{"NAME", "DESCRIPTION", "TAGS", "REPOSITORY"}};
    if (!history.empty()) {
        rows[0].insert(rows[0].end(), {"RUNS", "TYPICAL", "COST"});
    }
    for (const auto* e : shown) {
        rows.push_back({e->name, cut(e->description, 60), util::join(e->tags, ","), e->origin.repo});
        if (history.empty()) {
            continue;
        }
        const History* h = history_of(*e);
        if (h == nullptr || h->runs == 0) {
            rows.back().insert(rows.back().end(), {"0", "-", "-"});
        } else {
            rows.back().insert(rows.back().end(), {std::to_string(h->runs), res::format_duration_s(h->median_runtime_s),
                                                   credits::format_credits(h->median_cost_micro)});
        }
    }
    print_table(rows);
    for (const auto& s : cat->shadowed()) {
        const auto* winner = cat->find(s.name);
        std::cout << "(" << printable(s.name) << " in " << printable(s.origin.repo) << " is hidden by the one in "
                  << printable(winner != nullptr ? winner->origin.repo : std::string("an earlier repository")) << ")\n";
    }
    return cat->problems().empty() ? k_exit_ok : k_exit_failed;
}

int run_recipe_show_repo(const RecipeOptions& options) {
    const auto& global = options.global;
    auto cat = open_catalog(global, options.repos);
    if (!cat) {
        return fail(global, cat.error());
    }
    auto entry = catalog::find_recipe(*cat, options.name, "no built-in recipe `" + options.name + "`");
    if (!entry) {
        return fail(global, entry.error());
    }
    const catalog::RecipeEntry& e = **entry;
    const std::string toml = read_text(e.file());
    if (global.json) {
        nlohmann::json out = entry_json(e);
        out["files"] = files_of(e.dir);
        out["recipe"] = toml;
        std::cout << out.dump() << '\n';
        return k_exit_ok;
    }
    std::cout << "# " << printable(e.name) << ": from " << printable(e.origin.repo) << " at "
              << short_commit(e.origin.revision) << " (" << printable(e.dir.string()) << ")\n";
    if (!e.description.empty()) {
        std::cout << "# " << e.description << '\n';
    }
    if (!e.tags.empty()) {
        std::cout << "# tags: " << util::join(e.tags, ", ") << '\n';
    }
    std::cout << "# files: " << printable(util::join(files_of(e.dir), ", ")) << "\n\n"
              << util::escape_control(toml, true);
    return k_exit_ok;
}

int run_recipe_get(const RecipeOptions& options) {
    const auto& global = options.global;
    auto cat = open_catalog(global, options.repos);
    if (!cat) {
        return fail(global, cat.error());
    }
    auto entry = catalog::find_recipe(*cat, options.name, "no recipe `" + options.name + "`");
    if (!entry) {
        return fail(global, entry.error());
    }
    const fs::path dest = options.dest.empty() ? fs::path(options.name) : fs::path(options.dest);
    if (auto st = catalog::copy_recipe(**entry, dest); !st) {
        return fail(global, st.error());
    }
    const auto& o = (*entry)->origin;
    if (global.json) {
        nlohmann::json out = entry_json(**entry);
        out["dest"] = dest.string();
        std::cout << out.dump() << '\n';
    } else {
        std::cout << "Copied " << printable(o.recipe) << " from " << printable(o.repo) << " at "
                  << short_commit(o.revision) << " to " << printable(dest.string()) << "/\n"
                  << "Next: gpupool recipe validate " << printable((dest / "recipe.toml").string()) << '\n';
    }
    return k_exit_ok;
}

int run_recipe_new(const RecipeOptions& options) {
    const auto& global = options.global;
    const fs::path dest = options.dest.empty() ? fs::path(options.name) : fs::path(options.dest);
    if (auto st = catalog::write_starter(options.template_name, options.name, dest); !st) {
        return fail(global, st.error());
    }
    if (global.json) {
        std::cout << nlohmann::json{{"name", options.name},
                                    {"template", options.template_name},
                                    {"dest", dest.string()},
                                    {"files", files_of(dest)}}
                         .dump()
                  << '\n';
    } else {
        std::cout << "Wrote " << printable(dest.string()) << "/ (" << printable(util::join(files_of(dest), ", "))
                  << ") from the " << options.template_name << " template.\nNext: gpupool recipe validate "
                  << printable((dest / "recipe.toml").string()) << '\n';
    }
    return k_exit_ok;
}

int run_recipe_update(const RecipeOptions& options) {
    const auto& global = options.global;
    auto refs = recipe_repos(global, options.repos);
    if (!refs) {
        return fail(global, refs.error());
    }
    catalog::GitCommand git;
    auto results = catalog::update_repositories(*refs, git, catalog::default_cache_dir());
    int code = k_exit_ok;
    nlohmann::json out = nlohmann::json::array();
    for (const auto& u : results) {
        const std::string repo = printable(u.ref.text());
        if (!u.error) {
            std::cerr << "error: " << u.error.error().describe() << '\n';
            code = k_exit_failed;
        }
        out.push_back({{"repo", u.ref.text()},
                       {"before", u.before},
                       {"after", u.after},
                       {"in_place", u.in_place},
                       {"ok", u.error.has_value()}});
        if (global.json) {
            continue;
        }
        if (u.in_place) {
            std::cout << repo << ": a local folder, read as it is\n";
        } else if (u.before.empty()) {
            std::cout << repo << ": cloned at " << short_commit(u.after) << '\n';
        } else if (u.before == u.after) {
            std::cout << repo << ": up to date at " << short_commit(u.after) << '\n';
        } else {
            std::cout << repo << ": " << short_commit(u.before) << " -> " << short_commit(u.after) << '\n';
        }
    }
    if (global.json) {
        std::cout << out.dump() << '\n';
    } else if (results.empty()) {
        std::cout << "No recipe repositories to update (the config has no `recipes`, and no --repo was given).\n";
    }
    return code;
}

} // namespace gpupool::cmd
