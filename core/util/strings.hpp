// Small text helpers shared by the parsers and the CLI. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::util {

// Levenshtein distance (insertions, deletions, substitutions each cost 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate a user most likely meant by `word` (for "did you mean ...?"), or nothing when no
// candidate is close: within an edit distance of max(2, len/3), or sharing a run of at least
// three characters with it (one contains the other).
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates);

// True for [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view s);

std::string join(const std::vector<std::string>& parts, std::string_view sep);

// Quote for a POSIX shell when needed (used to print commands, never to run them).
std::string shell_quote(std::string_view s);

} // namespace gpupool::util
