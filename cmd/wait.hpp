// `gpupool wait`: waits until jobs (or a sweep) finish; fails when any did not succeed.
// run_wait does the work for parsed options (tests call it without argv); register_wait
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <vector>

namespace gpupool::cmd {

struct WaitOptions {
    GlobalOptions global{};
    std::vector<std::int64_t> ids{};
    std::int64_t sweep = 0;
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_wait(const WaitOptions& options);

} // namespace gpupool::cmd
