// `gpupool version`: the version and the recipe format this binary reads.
// run_version does the work for parsed options (tests call it without argv); register_version
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

namespace gpupool::cmd {

struct VersionOptions {
    GlobalOptions global{};
};

int run_version(const VersionOptions& options);

} // namespace gpupool::cmd
