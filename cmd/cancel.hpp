// `gpupool cancel`: cancels jobs, or every job of a sweep.
// run_cancel does the work for parsed options (tests call it without argv); register_cancel
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <vector>

namespace gpupool::cmd {

struct CancelOptions {
    GlobalOptions global{};
    std::vector<std::int64_t> jobs{};
    std::int64_t sweep = 0;
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_cancel(const CancelOptions& options);

} // namespace gpupool::cmd
