// Output archives: what a job leaves in its output directory travels to the coordinator as one
// tar archive (libarchive, POSIX pax format) and is unpacked on the researcher's side.
//
// pack_outputs() takes the files under `dir` that match the recipe's outputs.paths — each pattern is
// relative to `dir`, may use shell globs (fnmatch), and a pattern naming a directory takes all of it;
// "." takes everything. Symbolic links are stored as links, never followed, so a job cannot smuggle
// a host file into its outputs. If the archive would exceed `max_bytes` it fails with a message that
// names the size, the cap and the largest files, and writes nothing.
// unpack_archive() refuses absolute paths and ".." components (and links pointing out), so an
// archive cannot write outside `dest`. Both are pure file-system functions, safe from any thread.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::worker {

struct PackedOutputs {
    std::vector<std::string> files; // relative paths, in archive order
    std::int64_t content_bytes = 0; // sum of the files' sizes
};

Result<PackedOutputs> pack_outputs(const std::filesystem::path& dir, const std::vector<std::string>& patterns,
                                   std::int64_t max_bytes, const std::filesystem::path& archive_path);

// Packs local files and directories (a job's [inputs]) into one archive, each under its own name
// (a directory with everything below it). Fails, writing nothing, over `max_bytes`.
Result<PackedOutputs> pack_paths(const std::vector<std::filesystem::path>& roots, std::int64_t max_bytes,
                                 const std::filesystem::path& archive_path);

// Returns the relative paths written.
Result<std::vector<std::string>> unpack_archive(const std::string& archive_bytes, const std::filesystem::path& dest);

} // namespace gpupool::worker
