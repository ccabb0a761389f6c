// What `gpupool worker install` and `gpupool coordinator install` share about the files they own:
// read what is there, decide per file (wrote / unchanged / replaced / a refusal) and write it under
// a root prefix with its mode. The rules are the installers' (installer.hpp): a file that differs
// from what install would write is replaced only with `force`; an equal one is left untouched.
// Pure file-system helpers; not thread-safe (one installer at a time).
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace gpupool::worker {

// `p` (as the machine sees it) under the root prefix: where the file is actually read and written.
std::filesystem::path under_root(const std::filesystem::path& root, const std::filesystem::path& p);

inline constexpr std::filesystem::perms k_mode_0600 =
    std::filesystem::perms::owner_read | std::filesystem::perms::owner_write;
inline constexpr std::filesystem::perms k_mode_0644 =
    k_mode_0600 | std::filesystem::perms::group_read | std::filesystem::perms::others_read;
inline constexpr std::filesystem::perms k_mode_0640 = k_mode_0600 | std::filesystem::perms::group_read;

// One file install wants on disk.
struct PlannedFile {
    std::filesystem::path path; // as the machine sees it
    std::string text;
    std::filesystem::perms mode = k_mode_0600;
    std::string what = "wrote"; // or "unchanged", "replaced"
    std::string note{};
};

// The file's bytes, nothing when it does not exist; an Error when it is not a regular file or
// cannot be read.
Result<std::optional<std::string>> read_existing(const std::filesystem::path& on_disk);

// Decides `file.what` for a file install owns whole; a conflict (different bytes, no `force`) is
// returned as its reason (naming the file), for the caller to refuse with all of them at once.
Result<std::optional<std::string>> plan_owned(const std::filesystem::path& root, bool force, PlannedFile& file);

// Writes the file atomically (0600 from its first byte), then gives it its mode; its directories are
// created as needed.
Status write_planned(const std::filesystem::path& root, const PlannedFile& file);

} // namespace gpupool::worker
