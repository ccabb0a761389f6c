#include "core/catalog/resolve.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/util/strings.hpp"

#include <memory>
#include <optional>
#include <system_error>

namespace gpupool::catalog {

namespace fs = std::filesystem;

Result<std::vector<RepoRef>> recipe_repos(const std::vector<std::string>& flags,
                                          const std::vector<std::string>& configured) {
    const bool from_flags = !flags.empty();
    const std::vector<std::string>& texts = from_flags ? flags : configured;
    std::vector<RepoRef> refs;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        auto ref = parse_repo_ref(texts[i], from_flags ? std::string("--repo") : "recipes[" + std::to_string(i) + "]");
        if (!ref) {
            return ref.error();
        }
        refs.push_back(std::move(*ref));
    }
    return refs;
}

Result<Catalog> open_catalog(const std::vector<std::string>& flags, const std::vector<std::string>& configured,
                             Git& git, const fs::path& cache_dir) {
    auto refs = recipe_repos(flags, configured);
    if (!refs) {
        return refs.error();
    }
    return Catalog::open(*refs, git, cache_dir);
}

Result<const RecipeEntry*> find_recipe(const Catalog& cat, const std::string& name, const std::string& lead) {
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

recipe::NameResolver lazy_resolver(std::function<Result<Catalog>()> open, std::function<void(const Error&)> on_error) {
    struct State {
        std::function<Result<Catalog>()> open;
        std::function<void(const Error&)> on_error;
        std::optional<recipe::NameResolver> resolve;
    };
    auto state = std::make_shared<State>(State{std::move(open), std::move(on_error), std::nullopt});
    return [state](const std::string& name) -> std::optional<recipe::NamedRecipe> {
        if (!state->resolve) {
            auto cat = state->open();
            if (!cat) {
                state->on_error(cat.error());
                state->resolve = [](const std::string&) { return std::optional<recipe::NamedRecipe>(); };
            } else {
                state->resolve = cat->resolver();
            }
        }
        return (*state->resolve)(name);
    };
}

} // namespace gpupool::catalog
