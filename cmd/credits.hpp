// `gpupool credits`: the team's balance and what its jobs cost.
// run_credits does the work for parsed options (tests call it without argv); register_credits
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace gpupool::cmd {

struct CreditsOptions {
    GlobalOptions global{};
    std::string team{}; // admins
    std::int64_t limit = 20;
    bool ledger = false; // the raw ledger rows instead of one row per job
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_credits(const CreditsOptions& options);

// A budget cap as the API gives it (micro-credits, or unset for none): "50" or "none".
std::string cap_text(const std::optional<std::int64_t>& micro);

} // namespace gpupool::cmd
