// Acting inside a directory tree that someone else can write, without following their links.
//
// A job's writable trees (its outputs, its team's cache, a recycled attempt folder, the MPS pipe
// folder) are the job's: any name in them may be a symbolic link to a host folder, planted by the
// job and swapped at any moment. A worker that runs as root and calls chmod(), create_directories()
// or an ifstream on such a path acts on whatever the link names. These functions act through file
// descriptors instead: every step opens one component relative to the directory already held, with
// O_NOFOLLOW, or resolves a relative path with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so a
// link anywhere on the way is an error (ELOOP / ENOTDIR / EXDEV), never a detour. Modes and owners
// change on the descriptor (fchmod, fchown), never on a name.
//
// Rules:
// - The tree's root is opened by path (open_dir): the caller vouches for every component above it
//   (the worker's own folders); its last component must not be a link.
// - open_beneath refuses absolute paths and ".." components before the kernel sees them; where the
//   kernel has no openat2 (before 5.6) it walks the components itself with O_NOFOLLOW, which gives
//   the same guarantee.
// - remove_entry and empty_dir walk the tree by descriptor, unlinking links and files as names
//   (unlinkat never follows) and descending only into real directories opened with O_NOFOLLOW. They
//   hold at most k_max_depth descriptors: a subtree deeper than that is first renamed to the top of
//   the walk (renameat within the same tree follows no link either), so a hostile job cannot run the
//   worker out of descriptors or stack with a deep tree.
// - make_dir_at creates one directory (a single name, never a path), or opens the one there; a link,
//   a file or anything else in its place is an Error, unless `replace` is set, in which case that
//   entry is removed first (the link itself, not what it names).
// Failures are Errors (ErrorCode::io) naming the path and the system's reason; a link where a
// directory was expected is ErrorCode::invalid_input. Thread-safe: no shared state.
#pragma once

#include "core/util/result.hpp"

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpupool::util {

// An owned file descriptor, closed when the object goes away.
class UniqueFd {
public:
    explicit UniqueFd(int fd = -1) : m_fd(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other) {
            reset();
            m_fd = std::exchange(other.m_fd, -1);
        }
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    int get() const { return m_fd; }
    explicit operator bool() const { return m_fd >= 0; }
    void reset();

private:
    int m_fd;
};

// The most directory descriptors one removal holds at once (see the rules above).
inline constexpr int k_max_depth = 64;

// Who owns a job's writable folders on the host.
struct Owner {
    uid_t uid = 0;
    gid_t gid = 0;
    bool operator==(const Owner&) const = default;
};

// Opens the directory `path`; its last component must be a real directory, not a link.
Result<UniqueFd> open_dir(const std::filesystem::path& path);

// Opens `rel` below the directory `at` (flags as for openat; O_NOFOLLOW and O_CLOEXEC are added),
// following no link on the way and never leaving `at`.
Result<UniqueFd> open_beneath(int at, const std::filesystem::path& rel, int flags);

// The directory `name` in `at`, created with `mode` when missing, opened with O_NOFOLLOW.
Result<UniqueFd> make_dir_at(int at, const std::string& name, mode_t mode, bool replace = false);

// Gives the object behind `fd` this mode and, when set and different, this owner.
Status set_owner_and_mode(int fd, const std::optional<Owner>& owner, mode_t mode, std::string_view shown_as);

// Removes the entry `name` of `at` (a whole tree when it is a real directory); missing is success.
Status remove_entry(int at, const std::string& name);

// Removes every entry of the directory behind `fd`; true when it is empty afterwards.
Status empty_dir(int fd);

// remove_entry for a path whose parent the caller vouches for (the worker's own folders).
Status remove_tree(const std::filesystem::path& path);

} // namespace gpupool::util
