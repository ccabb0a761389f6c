#include "core/util/tree_fd.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gpupool::util {

namespace fs = std::filesystem;

void UniqueFd::reset() {
    if (m_fd >= 0) {
        ::close(m_fd);
        m_fd = -1;
    }
}

namespace {

constexpr int k_dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
// A walk that keeps finding new entries (something still writes the tree) gives up after this
// many rounds of spilled subtrees.
constexpr int k_max_rounds = 100'000;

Error sys_error(const std::string& what, int err) {
    if (err == ELOOP || err == ENOTDIR || err == EXDEV) {
        return make_error(ErrorCode::invalid_input, what + ": a link or not a directory (links are never followed)");
    }
    return make_error(ErrorCode::io, what + ": " + std::strerror(err));
}

bool is_one_name(const std::string& name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// The names in the directory behind `fd` (read whole before anything is removed).
Result<std::vector<std::string>> names_in(int fd) {
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
        return sys_error("reading a directory", errno);
    }
    DIR* dir = ::fdopendir(copy);
    if (dir == nullptr) {
        const int err = errno;
        ::close(copy);
        return sys_error("reading a directory", err);
    }
    ::rewinddir(dir);
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") {
            names.push_back(name);
        }
    }
    const int err = errno;
    ::closedir(dir);
    if (err != 0) {
        return sys_error("reading a directory", err);
    }
    return names;
}

// One removal: `top` is the directory being emptied, where subtrees deeper than k_max_depth are
// moved (renamed) to be removed in a later round.
struct Walk {
    int top;
    unsigned next_spill = 0;
    bool spilled = false;
};

Status empty_in(int fd, int depth, Walk& w);

Status spill(int at, const std::string& name, Walk& w) {
    for (int tries = 0; tries < 1000; ++tries) {
        const std::string to = ".gpupool-deep-" + std::to_string(::getpid()) + "-" + std::to_string(w.next_spill++);
        if (::renameat2(at, name.c_str(), w.top, to.c_str(), RENAME_NOREPLACE) == 0) {
            w.spilled = true;
            return {};
        }
        if (errno == ENOENT) {
            return {};
        }
        if (errno != EEXIST) {
            return sys_error("moving a deep folder up", errno);
        }
    }
    return make_error(ErrorCode::io, "moving a deep folder up: no free name");
}

Status remove_in(int at, const std::string& name, int depth, Walk& w) {
    if (::unlinkat(at, name.c_str(), 0) == 0 || errno == ENOENT) {
        return {};
    }
    if (errno != EISDIR && errno != EPERM) {
        return sys_error("removing `" + name + "`", errno);
    }
    if (depth >= k_max_depth) {
        return spill(at, name, w);
    }
    UniqueFd dir(::openat(at, name.c_str(), k_dir_flags));
    if (!dir) {
        if (errno == ENOENT) {
            return {};
        }
        if ((errno == ELOOP || errno == ENOTDIR) && ::unlinkat(at, name.c_str(), 0) == 0) {
            return {}; // became a link or a file meanwhile: the name goes, its target stays
        }
        return sys_error("opening `" + name + "`", errno);
    }
    if (auto st = empty_in(dir.get(), depth + 1, w); !st) {
        return st;
    }
    if (::unlinkat(at, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return sys_error("removing the folder `" + name + "`", errno);
    }
    return {};
}

Status empty_in(int fd, int depth, Walk& w) {
    auto names = names_in(fd);
    if (!names) {
        return names.error();
    }
    for (const auto& n : *names) {
        if (auto st = remove_in(fd, n, depth, w); !st) {
            return st;
        }
    }
    return {};
}

Result<UniqueFd> walk_beneath(int at, const std::vector<std::string>& parts, int flags) {
    UniqueFd cur(::fcntl(at, F_DUPFD_CLOEXEC, 0));
    for (std::size_t i = 0; cur && i + 1 < parts.size(); ++i) {
        cur = UniqueFd(::openat(cur.get(), parts[i].c_str(), k_dir_flags));
    }
    if (!cur) {
        return sys_error("opening `" + parts.front() + "`", errno);
    }
    UniqueFd last(::openat(cur.get(), parts.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!last) {
        return sys_error("opening `" + parts.back() + "`", errno);
    }
    return last;
}

} // namespace

Result<UniqueFd> open_dir(const fs::path& path) {
    UniqueFd fd(::open(path.c_str(), k_dir_flags));
    if (!fd) {
        return sys_error("opening " + path.string(), errno);
    }
    return fd;
}

Result<UniqueFd> open_beneath(int at, const fs::path& rel, int flags) {
    std::vector<std::string> parts;
    for (const auto& p : rel) {
        const std::string s = p.string();
        if (s.empty() || s == ".") {
            continue;
        }
        if (s == ".." || s == "/") {
            return make_error(ErrorCode::invalid_input, "`" + rel.string() + "` leaves its folder");
        }
        parts.push_back(s);
    }
    if (parts.empty() || rel.is_absolute()) {
        return make_error(ErrorCode::invalid_input, "`" + rel.string() + "` is not a path below its folder");
    }
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, at, rel.c_str(), &how, sizeof how);
    if (fd >= 0) {
        return UniqueFd(static_cast<int>(fd));
    }
    if (errno == ENOSYS || errno == EPERM) { // an older kernel, or a seccomp filter that does not know it
        return walk_beneath(at, parts, flags);
    }
    return sys_error("opening `" + rel.string() + "`", errno);
}

Result<UniqueFd> make_dir_at(int at, const std::string& name, mode_t mode, bool replace) {
    if (!is_one_name(name)) {
        return make_error(ErrorCode::invalid_input, "`" + name + "` is not one folder name");
    }
    for (int round = 0; round < 2; ++round) {
        if (::mkdirat(at, name.c_str(), mode) != 0 && errno != EEXIST) {
            return sys_error("creating `" + name + "`", errno);
        }
        UniqueFd dir(::openat(at, name.c_str(), k_dir_flags));
        if (dir) {
            return dir;
        }
        if (!(errno == ELOOP || errno == ENOTDIR) || !replace) {
            return sys_error("opening `" + name + "`", errno);
        }
        if (auto st = remove_entry(at, name); !st) {
            return st.error();
        }
    }
    return make_error(ErrorCode::io, "`" + name + "` keeps being replaced while it is created");
}

Status set_owner_and_mode(int fd, const std::optional<Owner>& owner, mode_t mode, std::string_view shown_as) {
    struct stat st{};
    if (::fstat(fd, &st) != 0) {
        return sys_error("reading " + std::string(shown_as), errno);
    }
    if (owner && (st.st_uid != owner->uid || st.st_gid != owner->gid) && ::fchown(fd, owner->uid, owner->gid) != 0) {
        return sys_error("giving " + std::string(shown_as) + " to " + std::to_string(owner->uid), errno);
    }
    if ((st.st_mode & 07777) != mode && ::fchmod(fd, mode) != 0) {
        return sys_error("setting the mode of " + std::string(shown_as), errno);
    }
    return {};
}

Status empty_dir(int fd) {
    Walk w{fd};
    for (int round = 0; round < k_max_rounds; ++round) {
        w.spilled = false;
        if (auto st = empty_in(fd, 0, w); !st) {
            return st;
        }
        if (!w.spilled) {
            auto left = names_in(fd);
            if (!left) {
                return left.error();
            }
            if (left->empty()) {
                return {};
            }
        }
    }
    return make_error(ErrorCode::io, "a folder keeps filling while it is emptied");
}

Status remove_entry(int at, const std::string& name) {
    if (!is_one_name(name)) {
        return make_error(ErrorCode::invalid_input, "`" + name + "` is not one entry name");
    }
    if (::unlinkat(at, name.c_str(), 0) == 0 || errno == ENOENT) {
        return {};
    }
    if (errno != EISDIR && errno != EPERM) {
        return sys_error("removing `" + name + "`", errno);
    }
    UniqueFd dir(::openat(at, name.c_str(), k_dir_flags));
    if (!dir) {
        if (errno == ENOENT || ((errno == ELOOP || errno == ENOTDIR) && ::unlinkat(at, name.c_str(), 0) == 0)) {
            return {};
        }
        return sys_error("opening `" + name + "`", errno);
    }
    if (auto st = empty_dir(dir.get()); !st) {
        return st;
    }
    if (::unlinkat(at, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return sys_error("removing the folder `" + name + "`", errno);
    }
    return {};
}

Status remove_tree(const fs::path& path) {
    const fs::path clean = path.lexically_normal();
    const fs::path parent = clean.has_parent_path() ? clean.parent_path() : fs::path(".");
    UniqueFd at(::open(parent.c_str(), k_dir_flags));
    if (!at) {
        if (errno == ENOENT) {
            return {};
        }
        return sys_error("opening " + parent.string(), errno);
    }
    if (auto st = remove_entry(at.get(), clean.filename().string()); !st) {
        return make_error(st.error().code, path.string() + ": " + st.error().message);
    }
    return {};
}

} // namespace gpupool::util
