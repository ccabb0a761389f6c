// Whether two runs of one job agree, by the job's `[verify]` rule (recipe::Verify, docs/evidence.md):
// the comparison a spot check makes between a worker's result and the same job run again on another
// owner's worker.
//
// What a run's result is here: its exit status, and what the coordinator itself measured of its
// outputs archive when the worker uploaded it (never what the worker says of it):
// - `outputs`: the archive's listing (archive::to_json of archive::Listing: each file's path, type,
//   size and SHA-256, `tree_sha256` over all of them), null when the run uploaded no outputs;
// - `json_files`: the texts of its small `*.json` files ({"files": {path: text}, "skipped": [path]}:
//   archive::Listing::json_texts and json_skipped), null when not kept.
//
// The rules (`a` is the first result, `b` the second, in `detail` too):
// - Both: the exit statuses must be equal (both absent counts as equal). No outputs on both sides is
//   equal; on one side only is a difference.
// - exact: with `files` empty, the two `tree_sha256` must be equal. With `files`, each listed entry
//   matching one of the patterns (fnmatch, FNM_PATHNAME: "*.json" does not reach into "sub/") must be
//   on both sides with the same type, files with the same SHA-256, links with the same target; a
//   pattern that matches nothing on either side is nothing to compare.
// - json: the entries compared are those matching `files`, or with `files` empty every listed path
//   ending in ".json"; each must be on both sides, and both texts must parse (at most
//   k_max_compare_depth deep: the outermost array or object is depth 1) to values equal within
//   `tolerance`: numbers (integer or not) a and b with |a - b| <= tolerance x max(1, |a|, |b|) (two
//   integers are compared exactly first; NaN equals only NaN, an infinity only itself), strings,
//   booleans and null equal, arrays of the same length element by element, objects with the same
//   keys member by member. A text that parses on one side only is a difference; on neither side
//   (invalid, or too deep), the two files are compared by their SHA-256. So is a file whose text
//   either side did not keep (json_files' "skipped": too large; or json_files null), and a matched
//   entry that is not a file (a link by its target). Other files are not compared (a recipe
//   chooses json because the rest differs run to run). A negative tolerance is 0.
// - exact and json: a truncated listing (more entries than it kept) on either side falls back to
//   `tree_sha256`: the listing no longer says what is there.
// - none: always agrees (the coordinator never samples such a job; this is for completeness).
// The first difference is reported, in path order of the files.
// The inputs are hostile (a lying worker chose the bytes): malformed evidence or JSON never throws;
// it is a difference, with what was wrong in `detail` ("malformed evidence: ..."); the whole listing
// is checked in every mode. A `detail` is at most about 200 bytes of UTF-8, with control characters
// and other bytes from the inputs escaped (util::escape_control). Pure; thread-safe.
#pragma once

#include "core/recipe/recipe.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace gpupool::verify {

inline constexpr std::size_t k_max_compare_depth = 64;

struct RunResult {
    std::optional<std::int64_t> exit_code; // nullopt: ended without an exit status
    nlohmann::json outputs;                // the listing's JSON, or null: no outputs uploaded
    nlohmann::json json_files;             // {"files": {path: text}, "skipped": [path]}, or null
};

struct Comparison {
    bool agree = false;
    // When they differ, the first difference, naming the file and the JSON path
    // ("results.json: $.scores[2]: 0.51 vs 0.93"); when they agree, what was compared
    // ("exit 0; 3 JSON files within 0.001").
    std::string detail;
};

Comparison compare_results(const recipe::Verify& rule, const RunResult& a, const RunResult& b);

// Two JSON values equal within `tolerance` (the rule above); `where` gets the path of the first
// difference ("$.scores[2]") and what differs, printable as `detail` is. Values nested deeper than
// k_max_compare_depth differ.
bool json_close(const nlohmann::json& a, const nlohmann::json& b, double tolerance, std::string* where = nullptr);

} // namespace gpupool::verify
