// `gpupool retry`: runs failed or cancelled jobs again, as the same jobs (their earlier attempts
// stay in `gpupool status`), priced and held to the budgets as a new submission of them would be.
// run_retry does the work for parsed options (tests call it without argv); register_retry
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <vector>

namespace gpupool::cmd {

struct RetryOptions {
    GlobalOptions global{};
    std::vector<std::int64_t> jobs{};
    std::int64_t sweep = 0;
    bool failed = false;    // with --sweep: its failed jobs (the default when neither is given)
    bool cancelled = false; // with --sweep: its cancelled jobs
    bool allow_unfunded = false;
    bool wait = false;
};

// The exit code (cli.hpp): 0 when the jobs were queued again (and, with --wait, all succeeded), 1
// when the coordinator refused (nothing was retried) or a job did not succeed, 2 for bad usage.
int run_retry(const RetryOptions& options);

} // namespace gpupool::cmd
