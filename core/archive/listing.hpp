// What an outputs archive holds, file by file, as the coordinator reads it when a worker uploads it
// (issue 43): each entry's path, kind, size and SHA-256, and one digest over all of them that two
// attempts' outputs can be compared by. The listing comes from the archive the researcher will
// fetch, not from what the worker says of it.
//
// The archive is hostile: entries are read, never written anywhere; names are checked as
// unpack_archive checks them (relative, no "..", bounded); the entry count and the bytes read are
// bounded. A name unpack_archive would refuse makes the listing fail (the whole archive would be
// refused on fetch too). Directories are not listed; links are listed with their target; hard
// links, devices, fifos and sockets are listed as "other" (unpack skips them).
// Pure file-system functions, safe from any thread.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpupool::util {
class Sha256;
} // namespace gpupool::util

namespace gpupool::archive {

struct ListedEntry {
    std::string path;       // as unpacked: components joined by '/', no "./"
    std::string type;       // "file", "link" or "other"
    std::int64_t size = 0;  // a file's bytes
    std::string sha256;     // a file's contents, lowercase hex; empty for the rest
    std::string target;     // a link's target
    bool operator==(const ListedEntry&) const = default;
};

struct Listing {
    std::vector<ListedEntry> entries; // sorted by path; at most `max_listed` (ListLimits)
    std::int64_t entry_count = 0;     // every entry, listed or not
    std::int64_t file_bytes = 0;      // the files' bytes, all of them
    // SHA-256 over every entry (listed or not) in path order: "path\0type\0sha256-or-target\n" each.
    // Equal for two archives that unpack to the same files and links, whatever their order or times.
    std::string tree_sha256;
    // The texts of the small `*.json` files, by path, for spot checks that compare results by value
    // (verify/compare.hpp): regular files of at most ListLimits::json_file_bytes whose text is UTF-8,
    // taken in path order (whatever the archive's order) until the first that would pass
    // json_total_bytes. json_skipped (sorted): every other regular `*.json` file, compared by its
    // SHA-256 instead. Both stay empty when either limit is 0. Not in to_json().
    std::map<std::string, std::string> json_texts;
    std::vector<std::string> json_skipped;
    bool truncated() const { return entry_count > static_cast<std::int64_t>(entries.size()); }
};

struct ListLimits {
    std::int64_t max_entries = 100'000; // more fail the listing (unpack refuses them too)
    std::size_t max_listed = 10'000;    // entries kept in `entries`; the digest covers all
    // Regular files whose path ends in ".json" with at most this many bytes are kept whole in
    // Listing::json_texts, up to json_total_bytes in all (0: none kept).
    std::int64_t json_file_bytes = 0;
    std::int64_t json_total_bytes = 0;
};
// What the coordinator keeps of an outputs archive's JSON files for spot checks.
inline constexpr std::int64_t k_check_json_file_bytes = 256 * 1024;
inline constexpr std::int64_t k_check_json_total_bytes = 1024 * 1024;

// `whole`, when given, is fed every byte of the file, listing or not (an archive refused, bytes past
// its end): the upload's own SHA-256 in the same pass as the listing (the coordinator's parse thread
// reads an upload once). Errors: io when the file cannot be read (then `whole` is incomplete),
// invalid_input for an archive that cannot be listed.
Result<Listing> list_archive_file(const std::filesystem::path& archive, const ListLimits& limits = {},
                                  util::Sha256* whole = nullptr);

// {"entry_count", "file_bytes", "tree_sha256", "truncated", "entries": [{path, type, size, sha256|target}]}
nlohmann::json to_json(const Listing& listing);

} // namespace gpupool::archive
