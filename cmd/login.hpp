// `gpupool login`: stores a coordinator URL and token in the client configuration.
// run_login does the work for parsed options (tests call it without argv); register_login
// (cli.hpp) wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <string>

namespace gpupool::cmd {

struct LoginOptions {
    GlobalOptions global{};
    std::string url{};
};

// The exit code (cli.hpp); problems are printed as it goes.
int run_login(const LoginOptions& options);

} // namespace gpupool::cmd
