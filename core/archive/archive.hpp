// Output and input archives: what a job leaves in its output directory travels to the coordinator as
// one tar archive (libarchive, POSIX pax format) and is unpacked on the researcher's side; a job's
// [inputs] travel the same way to the worker. Either side may be hostile to the other, so unpacking
// treats every archive as hostile. Both sides use it: the worker's agent (outputs, inputs) and the
// client (`gpupool fetch`, `gpupool run`, the inputs `submit` ships), so it lives in core/.
//
// pack_outputs() takes the files under `dir` that match the recipe's outputs.paths — each pattern is
// relative to `dir`, may use shell globs (fnmatch), and a pattern naming a directory takes all of it;
// "." takes everything. If the archive would exceed `max_bytes` it fails with a message that names
// the size, the cap and the largest files, and writes nothing.
//
// Archives may hold links, but only links that point inside, downwards:
// - A symbolic link is stored, never followed, and kept only when its target is relative, non-empty
//   and has no ".." component; any chain of such links can only point further down the tree. Other
//   links (absolute, upward) are left out by the packer and skipped by the unpacker, and both report
//   them as "path: why" in `skipped`, so a researcher learns at pack time what will not arrive.
// - Hard links, devices, fifos and sockets are never unpacked (skipped and reported); the packer
//   stores only regular files and symbolic links.
//
// unpack_archive() rules:
// - It never follows a link: it opens `dest` once and walks each entry's path one component at a time
//   (openat with O_NOFOLLOW), creating missing directories (0755). A component that is a symbolic
//   link or not a directory — whether the archive wrote it earlier or it was in `dest` before — makes
//   the entry hostile and the unpack fail.
// - Entry names are relative, non-empty, without ".." components, each component at most NAME_MAX
//   bytes and the whole name at most 4096; any other name fails the whole unpack (invalid_input).
// - A regular file replaces whatever non-directory had its name (the old entry is unlinked, the file
//   created with O_EXCL) and gets mode 0755 when the archive gives it any execute bit, else 0644:
//   never setuid, setgid or sticky, and ownership is never changed.
// - At most `limits.max_entries` entries and `limits.max_bytes` bytes written (by default the
//   archive's own size: no compression is enabled, so only sparse entries could write more); a
//   larger archive fails.
// - On failure, what was written before the failing entry stays in `dest`; nothing is written
//   outside it.
// All functions are pure file-system functions, safe from any thread (for distinct `dest`s).
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::archive {

struct PackedOutputs {
    std::vector<std::string> files;   // relative paths, in archive order
    std::int64_t content_bytes = 0;   // sum of the files' sizes
    std::vector<std::string> skipped; // "path: why" for links left out (they point outside or upward)
};

Result<PackedOutputs> pack_outputs(const std::filesystem::path& dir, const std::vector<std::string>& patterns,
                                   std::int64_t max_bytes, const std::filesystem::path& archive_path);

// The same for outputs small enough to keep in memory: when the archive would be at most about
// `small_bytes` (estimated before packing, as the cap is), it is packed into memory; otherwise
// nullopt, and nothing is written (pack_outputs to a file then). Fails as pack_outputs does.
struct SmallOutputs {
    PackedOutputs packed;
    std::string archive; // the archive's bytes
};
Result<std::optional<SmallOutputs>> pack_small_outputs(const std::filesystem::path& dir,
                                                       const std::vector<std::string>& patterns, std::int64_t max_bytes,
                                                       std::int64_t small_bytes);

// Packs local files and directories (a job's [inputs]) into one archive, each under its own name
// (a directory with everything below it). Fails, writing nothing, over `max_bytes`.
Result<PackedOutputs> pack_paths(const std::vector<std::filesystem::path>& roots, std::int64_t max_bytes,
                                 const std::filesystem::path& archive_path);

struct UnpackLimits {
    std::int64_t max_bytes = -1; // bytes written in all; negative: the archive's own size
    std::int64_t max_entries = 100'000;
};

struct UnpackReport {
    std::vector<std::string> written; // relative paths of the files and links written, in archive order
    std::vector<std::string> skipped; // "path: why" for entries not unpacked (links out, hard links, devices)
};

Result<UnpackReport> unpack_archive(std::string_view archive_bytes, const std::filesystem::path& dest,
                                    const UnpackLimits& limits = {});
Result<UnpackReport> unpack_archive_file(const std::filesystem::path& archive, const std::filesystem::path& dest,
                                         const UnpackLimits& limits = {});

// The components of an archive entry's name ("." and empty ones dropped), or why unpacking refuses
// the name (invalid_input): empty, absolute, longer than 4096 bytes, a ".." component, a component
// longer than NAME_MAX. The one rule for what an entry may be called (listing.hpp reads it too).
Result<std::vector<std::string>> entry_name_parts(const char* raw);

// Whether a symbolic link with this target is one archives may hold: relative, non-empty, no "..".
bool link_target_stays_inside(std::string_view target);

} // namespace gpupool::archive
