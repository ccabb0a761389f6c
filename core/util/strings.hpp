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

// `s` without its leading and trailing whitespace: a view into `s`, so `s` must outlive it.
std::string_view trim(std::string_view s);

// `s` with its ASCII letters in lower case.
std::string lower(std::string_view s);

// Quote for a POSIX shell when needed (used to print commands, never to run them).
std::string shell_quote(std::string_view s);

// Makes text that came from someone else (a worker's name, a job's log, an error message from
// the network) safe to print on a terminal or in a log line: C0 control characters, DEL and the
// C1 controls (U+0080..U+009F, which some terminals obey) become visible escapes (\n, \r, \t,
// \x1b, \u009b), so nobody can forge a log line or send a terminal escape sequence. With
// `keep_lines`, newlines and tabs pass through (a job's multi-line output). Bytes that are not
// valid UTF-8 become \xNN too.
std::string escape_control(std::string_view s, bool keep_lines = false);

} // namespace gpupool::util
