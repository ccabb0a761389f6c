// `gpupool fetch`: downloads a job's (or a sweep's) outputs.
// run_fetch does the work for parsed options (tests call it without argv); register_fetch
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::cmd {

struct FetchOptions {
    GlobalOptions global{};
    std::vector<std::string> args{}; // [JOB] [DIR], or [DIR] with --sweep
    std::int64_t sweep = 0;
    bool tar = false;
    bool force = false;
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_fetch(const FetchOptions& options);

} // namespace gpupool::cmd
