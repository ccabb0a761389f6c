// `gpupool logs`: prints (or follows) a job's logs, or a sweep's.
// run_logs does the work for parsed options (tests call it without argv); register_logs
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>

namespace gpupool::cmd {

struct LogsOptions {
    GlobalOptions global{};
    std::int64_t job = 0;
    std::int64_t sweep = 0;
    bool follow = false;
    bool raw = false;
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_logs(const LogsOptions& options);

} // namespace gpupool::cmd
