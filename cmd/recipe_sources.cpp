#include "cmd/recipe_sources.hpp"

#include "cmd/remote.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/util/strings.hpp"

#include <iostream>
#include <system_error>

namespace gpupool::cmd {

namespace fs = std::filesystem;

Result<std::vector<catalog::RepoRef>> recipe_repos(const GlobalOptions& global, const std::vector<std::string>& flags) {
    std::vector<std::string> texts = flags;
    std::string field = "--repo";
    if (texts.empty()) {
        auto cfg = config::load_client_config(overrides(global));
        if (!cfg) {
            return cfg.error();
        }
        texts = cfg->recipes;
        field = "recipes";
    }
    std::vector<catalog::RepoRef> refs;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        auto ref = catalog::parse_repo_ref(texts[i], field == "--repo" ? field : field + "[" + std::to_string(i) + "]");
        if (!ref) {
            return ref.error();
        }
        refs.push_back(std::move(*ref));
    }
    return refs;
}

Result<catalog::Catalog> open_catalog(const GlobalOptions& global, const std::vector<std::string>& flags) {
    auto refs = recipe_repos(global, flags);
    if (!refs) {
        return refs.error();
    }
    catalog::GitCommand git;
    auto cat = catalog::Catalog::open(*refs, git, catalog::default_cache_dir());
    for (const auto& p : cat.problems()) {
        std::cerr << "warning: " << p.describe() << '\n';
    }
    for (const auto& n : cat.notes()) {
        std::cerr << "note: " << util::escape_control(n) << '\n';
    }
    return cat;
}

recipe::NameResolver lazy_resolver(const GlobalOptions& global, const std::vector<std::string>& flags) {
    struct State {
        std::optional<recipe::NameResolver> resolve;
    };
    auto state = std::make_shared<State>();
    return [state, global, flags](const std::string& name) -> std::optional<recipe::NamedRecipe> {
        if (!state->resolve) {
            auto cat = open_catalog(global, flags);
            if (!cat) {
                std::cerr << "warning: " << cat.error().describe() << '\n';
                state->resolve = [](const std::string&) { return std::optional<recipe::NamedRecipe>(); };
            } else {
                state->resolve = cat->resolver();
            }
        }
        return (*state->resolve)(name);
    };
}

Result<const catalog::RecipeEntry*> find_recipe(const catalog::Catalog& cat, const std::string& name,
                                                const std::string& lead) {
    if (const auto* e = cat.find(name)) {
        return e;
    }
    std::string msg = lead + ", and no recipe of that name in ";
    if (cat.repositories().empty()) {
        msg += "any recipe repository (none is configured: add `recipes = [\"URL\"]` to the client config, or pass "
               "--repo)";
    } else {
        msg += "the recipe repositories";
        if (auto s = util::nearest(name, cat.names())) {
            msg += "; did you mean `" + *s + "`?";
        } else {
            msg += "; `gpupool recipe list` shows them";
        }
    }
    return make_error(ErrorCode::not_found, std::move(msg));
}

bool names_a_recipe(const std::string& arg) {
    std::error_code ec;
    return !fs::exists(arg, ec) && recipe::check_recipe_name(arg).has_value() && !arg.ends_with(".toml");
}

} // namespace gpupool::cmd
