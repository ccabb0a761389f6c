// Cost estimates for a recipe, shared by `gpupool price` and `gpupool submit --dry-run`: what it
// costs in credits on each GPU model of the rate catalog (offline, from the embedded catalog), what
// the pool estimates from its history and the team's balance (when a coordinator is configured),
// and what the same GPU-hours would cost on-demand at cloud providers (data/prices.toml).
#pragma once

#include "cmd/cli.hpp"
#include "core/recipe/recipe.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gpupool::cmd {

// The estimate as JSON (see docs/credits.md); `pool` is the coordinator's /v1/estimate answer or null.
nlohmann::json price_estimate(const std::string& source, const std::vector<recipe::JobSpec>& jobs,
                              const nlohmann::json& pool);

// Asks the configured coordinator for its estimate; null when none is configured or reachable
// (`why` says which).
nlohmann::json pool_estimate(const GlobalOptions& global, const std::string& source,
                             const std::vector<recipe::JobSpec>& jobs, std::string& why);

// price_estimate with the pool's part when a coordinator answers (never when `offline`); otherwise
// `pool` is null and `pool_note` says why.
nlohmann::json estimate_recipe(const GlobalOptions& global, const std::string& source,
                               const std::vector<recipe::JobSpec>& jobs, bool offline);

void print_price_estimate(const nlohmann::json& estimate);

} // namespace gpupool::cmd
