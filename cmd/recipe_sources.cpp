#include "cmd/recipe_sources.hpp"

#include "cmd/remote.hpp"
#include "core/util/strings.hpp"

#include <iostream>

namespace gpupool::cmd {

namespace {

// The config's `recipes`, read only when no `--repo` was given (the flags replace it).
Result<std::vector<std::string>> configured_repos(const GlobalOptions& global, const std::vector<std::string>& flags) {
    if (!flags.empty()) {
        return std::vector<std::string>{};
    }
    auto cfg = config::load_client_config(overrides(global));
    if (!cfg) {
        return cfg.error();
    }
    return cfg->recipes;
}

} // namespace

Result<std::vector<catalog::RepoRef>> recipe_repos(const GlobalOptions& global, const std::vector<std::string>& flags) {
    auto configured = configured_repos(global, flags);
    if (!configured) {
        return configured.error();
    }
    return catalog::recipe_repos(flags, *configured);
}

Result<catalog::Catalog> open_catalog(const GlobalOptions& global, const std::vector<std::string>& flags) {
    auto configured = configured_repos(global, flags);
    if (!configured) {
        return configured.error();
    }
    catalog::GitCommand git;
    auto cat = catalog::open_catalog(flags, *configured, git, catalog::default_cache_dir());
    if (!cat) {
        return cat.error();
    }
    for (const auto& p : cat->problems()) {
        std::cerr << "warning: " << p.describe() << '\n';
    }
    for (const auto& n : cat->notes()) {
        std::cerr << "note: " << util::escape_control(n) << '\n';
    }
    return cat;
}

recipe::NameResolver lazy_resolver(const GlobalOptions& global, const std::vector<std::string>& flags) {
    return catalog::lazy_resolver([global, flags] { return open_catalog(global, flags); },
                                  [](const Error& e) { std::cerr << "warning: " << e.describe() << '\n'; });
}

} // namespace gpupool::cmd
