// A secret kept in a file of its own (a database password, a scrape token), so that it never sits
// on a command line every user of the machine can read.
#pragma once

#include "core/util/result.hpp"

#include <string>

namespace gpupool::cmd {

// The secret in `file`: its first line, trailing whitespace removed; invalid_input naming `field` when
// the file cannot be read, is empty, or holds more than one line.
Result<std::string> read_secret_file(const std::string& file, const std::string& field);

} // namespace gpupool::cmd
