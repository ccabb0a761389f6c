// Usage errors: CLI11's exceptions for a bad command line turned into the project's Errors, so that
// they go through report_error like every other failure (`error:` prefix, --json, exit 2).
//
// CLI11 (2.1) reports a bad command line with its own words and carries only that text, so the
// option's name and the value given are read from it and the rest (which subcommand, its options)
// from the App. A message form not recognised here falls back to CLI11's text with a help hint.
#pragma once

#include "core/util/result.hpp"

#include <CLI/CLI.hpp>

namespace gpupool::cmd {

// `--json` anywhere on the command line (parsing may have failed before CLI11 read it).
bool json_in_argv(int argc, char** argv);

// "Could not convert: job = abc" -> `job: expected a job id, got "abc"`, and the like.
Error usage_error(const CLI::ParseError& e, const CLI::App& app);

} // namespace gpupool::cmd
