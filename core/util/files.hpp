// Files that must not be readable by others, and temporary files nobody can predict.
//
// write_private_file() replaces a file atomically with one that is 0600 from its first byte: the
// bytes go to a fresh name made by mkstemp(3) in the same directory (created O_EXCL, mode 0600, so
// no other user can open it in between), are fsync'ed, and the name is renamed over the target. A
// reader sees the old file or the whole new one, never a partial or world-readable one.
//
// TempFile is a file with an unpredictable name (mkstemps(3): created O_EXCL, mode 0600), removed
// when the object goes away; for archives packed or downloaded on the way to somewhere else.
//
// Failures are Errors (ErrorCode::io) naming the path and the system's reason. Thread-safe: no
// shared state.
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <string_view>

namespace gpupool::util {

Status write_private_file(const std::filesystem::path& path, std::string_view bytes);
// The same with another mode from the first byte (0644: a file other users must read, such as the
// model cache's files that jobs load).
Status write_file_atomically(const std::filesystem::path& path, std::string_view bytes, unsigned mode);

// All of `bytes` to `fd` (retrying short writes and EINTR); false on an error (errno says which).
bool write_all(int fd, std::string_view bytes);
// Everything in the file behind `fd`, from offset 0 (pread: the descriptor's offset is not moved).
std::string read_all(int fd);

// Creates `path` empty with mode 0600 when it does not exist (so that a program that opens it
// later, like SQLite, does not create it with the umask's mode); an existing file is left as it is
// but made 0600.
Status create_private_file(const std::filesystem::path& path);

class TempFile {
public:
    // A new empty file `<dir>/<prefix>XXXXXX<suffix>`.
    static Result<TempFile> create(const std::filesystem::path& dir, std::string_view prefix, std::string_view suffix);

    TempFile(TempFile&& other) noexcept;
    TempFile& operator=(TempFile&& other) noexcept;
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    ~TempFile();

    const std::filesystem::path& path() const { return m_path; }

    // Renames the file to `target` (replacing what is there, a symlink itself rather than what it
    // points to); from then on it is no longer removed.
    Status rename_to(const std::filesystem::path& target);

private:
    explicit TempFile(std::filesystem::path path) : m_path(std::move(path)) {}
    std::filesystem::path m_path;
};

// An exclusive advisory lock (flock(2)) on `path` (created 0600 if missing), held while the object
// lives: one process at a time owns what it guards (a pool's database, the local pool's data dir).
class FileLock {
public:
    // The lock, or ErrorCode::conflict when another process holds it (io when it cannot be opened).
    static Result<FileLock> acquire(const std::filesystem::path& path);

    FileLock(FileLock&& other) noexcept : m_fd(other.m_fd) { other.m_fd = -1; }
    FileLock& operator=(FileLock&& other) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    ~FileLock();

private:
    explicit FileLock(int fd) : m_fd(fd) {}
    int m_fd = -1;
};

} // namespace gpupool::util
