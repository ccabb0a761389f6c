// `gpupool status`: a job's state, attempts and why it is waiting.
// run_status does the work for parsed options (tests call it without argv); register_status
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>

namespace gpupool::cmd {

struct StatusOptions {
    GlobalOptions global{};
    std::int64_t job = 0;
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_status(const StatusOptions& options);

} // namespace gpupool::cmd
