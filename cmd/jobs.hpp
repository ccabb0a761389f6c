// `gpupool jobs`: lists jobs, filtered by state, sweep, team or submitter.
// run_jobs does the work for parsed options (tests call it without argv); register_jobs
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <string>

namespace gpupool::cmd {

struct JobsOptions {
    GlobalOptions global{};
    std::string state{};
    std::int64_t sweep = 0;
    std::int64_t limit = 50;
    bool all_teams = false;
    std::string by{};    // submitter label
    bool mine = false; // submitted with the token in use
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_jobs(const JobsOptions& options);

} // namespace gpupool::cmd
