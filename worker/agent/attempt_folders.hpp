// AttemptFolders: the spool's attempt folders, recycled. A job on the worker used to create its
// folder, work/, outputs/, its log and its JSON files, and remove them all once delivered. On a
// file system that makes each new inode dearer the more were freed lately (ext4 without a journal
// checks every candidate against the inodes freed in the last seconds), that was most of the
// worker's CPU at 32 slots of short jobs (#12). A delivered attempt's folder is emptied and kept
// instead, and the next attempt takes it: its files are truncated and written in place.
//
// Layout: attempts live in <attempts>/<id>/; spare folders in <spare>/<name>/, each holding exactly
// an empty work/ and outputs/ (mode 0700 while spare) and empty regular files log, assignment.json
// and state.json. <spare> is a sibling of <attempts>, so Spool::load() never sees a spare folder.
//
// Rules:
// - give_back(dir, reusable) keeps the folder only when `reusable` (the caller removed the job's
//   container or processes: nothing writes there any more), fewer than `keep` are spare, and
//   emptying it succeeded completely: work/ and outputs/ are real directories (not symlinks) whose
//   every entry is removed by descriptor, following no link (util/tree_fd.hpp); log, assignment.json and
//   state.json are regular files with one link (a hard link to a file elsewhere is unlinked, never
//   truncated), truncated to 0; anything else in the folder is removed. The rename into <spare> is
//   the last step, so a crash leaves the folder in <attempts> (where load() drops it, since its
//   JSON files are empty) or a clean spare. Otherwise the folder is removed, by descriptor too.
// - take(id) renames a spare folder to <attempts>/<id>, or creates the folder when none is spare
//   (or the rename fails; a spare that cannot be renamed is removed). A folder already there for
//   that id is used as it is, as before recycling. A recycled folder's JSON files are empty.
// - Spare folders left by an earlier run are found at construction and taken like any other.
// - Nothing from one attempt is visible to the next: its files' contents are gone (truncated or
//   removed) before the folder is spare. With the process runtime (no isolation) a process that
//   escaped its session could still write into a recycled work/; that runtime already lets a job
//   read and write every other attempt's folder, so recycling exposes nothing new.
// Failures are logged, never returned: the worst case is a folder created rather than recycled.
// Not thread-safe: the agent thread owns it (through Spool).
#pragma once

#include "core/util/ids.hpp"

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::worker {

class AttemptFolders {
public:
    AttemptFolders(std::filesystem::path attempts, std::filesystem::path spare, std::size_t keep = 64);

    std::filesystem::path take(AttemptId id);
    void give_back(const std::filesystem::path& dir, bool reusable);

    std::size_t spare_count() const { return m_spare.size(); }

private:
    bool empty_out(const std::filesystem::path& dir) const;

    std::filesystem::path m_attempts;
    std::filesystem::path m_spare_dir;
    std::size_t m_keep;
    bool m_spare_dir_made = false;
    std::vector<std::filesystem::path> m_spare;
};

// Replaces the content of the regular file at `path` in place (created 0600 when missing; a symlink
// is refused), so no inode is created or freed when the file exists. A write of at most a page
// (4096 bytes) over a file no longer than a page is one pwrite(2) at offset 0: a process killed
// meanwhile leaves the old content or the new one, never a mix. The file keeps its length when the
// new content is shorter, padded with spaces (JSON allows trailing whitespace), so no ftruncate
// between the two states either. Larger content is written through a temporary file renamed over
// the old one. Not fsynced (the spool outlives the process, not a power cut: spool.hpp).
bool write_in_place(const std::filesystem::path& path, const std::string& content, std::string& error);

} // namespace gpupool::worker
