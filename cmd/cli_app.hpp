// The CLI11 application object shared by the subcommand files that declare options.
#pragma once

#include "cmd/cli.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace gpupool::cmd {

struct Cli {
    CLI::App app{"gpupool: pool the GPUs your teams own and run containerized batch jobs on them", "gpupool"};
    GlobalOptions global;
    int exit_code = k_exit_ok;
};

// A subcommand with the project's conventions (global flags accepted after it).
CLI::App* add_command(Cli& cli, const std::string& name, const std::string& description);

} // namespace gpupool::cmd
