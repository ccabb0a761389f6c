// A directory of this process's own under a parent that several processes share (the HTTP server's
// spool for request bodies under the system's temporary directory), and the sweep of what processes
// that are gone left there.
//
// Why: a process killed while it writes a temporary file (kill -9, the OOM killer, a power cut)
// leaves the file behind, and nothing else knows it is garbage. Each claim is a directory
// `<parent>/owned-XXXXXX` holding a lock file that its owner keeps locked (flock(2)) while it lives;
// the kernel releases the lock when the owner dies, however it dies. claim() first removes every
// `owned-*` directory whose lock it can take: its owner is gone. A directory whose lock is held is
// never touched, so processes sharing a parent (an active and a standby coordinator on one host, the
// test suite's servers) never remove each other's files.
//
// The parent is made 0700 when missing; one that is a symbolic link, not a directory, owned by
// another user, or writable by group or others is refused (another local user could otherwise plant
// links in it or read what is spooled). A claim is made under a `claiming-XXXXXX` name and renamed
// once locked, so a concurrent sweep cannot take it for a dead one; `claiming-*` left by a process
// killed in between are swept when older than an hour.
//
// Failures are Errors naming the path (ErrorCode::io; invalid_input for a refused parent). The
// destructor removes the claimed directory and everything in it. Not thread-safe; one owner.
#pragma once

#include "core/util/files.hpp"
#include "core/util/result.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>

namespace gpupool::util {

class ClaimedDir {
public:
    // A new directory of our own under `parent`, after sweeping the dead owners' directories there.
    // `swept`, when given, is set to how many were removed.
    static Result<ClaimedDir> claim(const std::filesystem::path& parent, std::size_t* swept = nullptr);

    ClaimedDir(ClaimedDir&& other) noexcept;
    ClaimedDir& operator=(ClaimedDir&& other) noexcept;
    ClaimedDir(const ClaimedDir&) = delete;
    ClaimedDir& operator=(const ClaimedDir&) = delete;
    ~ClaimedDir();

    const std::filesystem::path& path() const { return m_path; }

private:
    ClaimedDir(std::filesystem::path path, FileLock lock) : m_path(std::move(path)), m_lock(std::move(lock)) {}
    void release() noexcept;

    std::filesystem::path m_path;
    std::optional<FileLock> m_lock;
};

// The parent the HTTP server spools under by default: `<system temporary directory>/gpupool-spool-<uid>`.
std::filesystem::path default_spool_parent();

} // namespace gpupool::util
