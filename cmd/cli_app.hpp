// The CLI11 application object shared by the subcommand files that declare options.
#pragma once

#include "cmd/cli.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace gpupool::cmd {

struct Cli {
    CLI::App app{"gpupool: pool the GPUs your teams own and run containerized batch jobs on them", "gpupool"};
    GlobalOptions global;
    int exit_code = k_exit_ok;
};

// A subcommand with the project's conventions (global flags accepted after it).
CLI::App* add_command(Cli& cli, const std::string& name, const std::string& description);

// The top-level command argv names: its first argument that is neither a global option of `app`
// nor the value of one. Empty when there is none, when an argument before it is not a global option,
// or with `--` or `--help-all` (then main() declares every command).
std::string_view command_in_argv(const CLI::App& app, int argc, const char* const* argv);

// Which global options a command's help lists: those of every command, or also the ones that say
// where the coordinator is and who is asking.
enum class Reach : std::uint8_t { local, coordinator };

// The end of a command's --help: its examples (one per line, a comment after `#` allowed), the
// global options that apply to it, and the doc to read.
void add_help_footer(CLI::App* sub, const std::string& examples, const std::string& doc, Reach reach);

} // namespace gpupool::cmd
