#include "core/util/claimed_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace gpupool::util {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view k_owned = "owned-";
constexpr std::string_view k_claiming = "claiming-";
constexpr const char* k_lock_name = ".lock";
// A claim is renamed within microseconds of its mkdtemp; one this old belongs to a process that died
// in between.
constexpr auto k_stale_claiming = std::chrono::hours(1);
// mkdtemp names are random; a rename onto an existing `owned-` name (the same six letters drawn
// again) fails and the claim is made again.
constexpr int k_claim_tries = 8;

Error dir_error(const std::string& what, const fs::path& path, int err) {
    return make_error(ErrorCode::io, what + " " + path.string() + ": " + std::strerror(err));
}

// Makes `parent` 0700 when missing; refuses one that another user could write in or swap.
Status check_parent(const fs::path& parent) {
    struct stat st {};
    if (::lstat(parent.c_str(), &st) != 0) {
        if (errno != ENOENT) {
            return dir_error("cannot inspect the spool directory", parent, errno);
        }
        if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
            return dir_error("cannot create the spool directory", parent, errno);
        }
        if (::lstat(parent.c_str(), &st) != 0) {
            return dir_error("cannot inspect the spool directory", parent, errno);
        }
    }
    const std::string refused = "refusing the spool directory " + parent.string() + ": ";
    if (S_ISLNK(st.st_mode)) {
        return make_error(ErrorCode::invalid_input, refused + "it is a symbolic link");
    }
    if (!S_ISDIR(st.st_mode)) {
        return make_error(ErrorCode::invalid_input, refused + "it is not a directory");
    }
    if (st.st_uid != ::geteuid()) {
        return make_error(ErrorCode::invalid_input, refused + "it belongs to uid " + std::to_string(st.st_uid) +
                                                        ", not to this process's uid " +
                                                        std::to_string(::geteuid()));
    }
    if ((st.st_mode & 022) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return make_error(ErrorCode::invalid_input, refused + "group or others may write in it (mode " + mode + ")");
    }
    return {};
}

// Removes the owned directories whose owner is gone (their lock is free) and stale claims.
std::size_t sweep(const fs::path& parent) {
    std::vector<fs::path> candidates;
    std::error_code ec;
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        std::error_code type_ec;
        // symlink_status: a link named like a claim is not followed, and not removed either.
        if ((name.starts_with(k_owned) || name.starts_with(k_claiming)) &&
            it->symlink_status(type_ec).type() == fs::file_type::directory) {
            candidates.push_back(it->path());
        }
    }
    std::size_t swept = 0;
    for (const auto& dir : candidates) {
        std::error_code rm_ec;
        if (dir.filename().string().starts_with(k_claiming)) {
            std::error_code time_ec;
            const auto written = fs::last_write_time(dir, time_ec);
            if (!time_ec && fs::file_time_type::clock::now() - written > k_stale_claiming) {
                fs::remove_all(dir, rm_ec);
                swept += rm_ec ? 0 : 1;
            }
            continue;
        }
        auto lock = FileLock::acquire(dir / k_lock_name);
        if (!lock) {
            continue; // its owner lives (or the lock cannot be opened: left alone)
        }
        fs::remove_all(dir, rm_ec); // the descriptor stays valid; the lock goes with it
        swept += rm_ec ? 0 : 1;
    }
    return swept;
}

} // namespace

Result<ClaimedDir> ClaimedDir::claim(const fs::path& parent, std::size_t* swept) {
    if (Status s = check_parent(parent); !s) {
        return s.error();
    }
    const std::size_t removed = sweep(parent);
    if (swept != nullptr) {
        *swept = removed;
    }
    for (int attempt = 0; attempt < k_claim_tries; ++attempt) {
        std::string pattern = (parent / (std::string(k_claiming) + "XXXXXX")).string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            return dir_error("cannot create a directory in", parent, errno);
        }
        const fs::path claiming(pattern);
        auto lock = FileLock::acquire(claiming / k_lock_name);
        if (!lock) {
            std::error_code ec;
            fs::remove_all(claiming, ec);
            return lock.error();
        }
        const std::string suffix = claiming.filename().string().substr(k_claiming.size());
        const fs::path owned = parent / (std::string(k_owned) + suffix);
        if (::rename(claiming.c_str(), owned.c_str()) == 0) {
            return ClaimedDir(owned, std::move(*lock));
        }
        const int err = errno;
        std::error_code ec;
        fs::remove_all(claiming, ec);
        if (err != EEXIST && err != ENOTEMPTY) {
            return dir_error("cannot rename " + claiming.string() + " to", owned, err);
        }
    }
    return make_error(ErrorCode::io, "cannot claim a directory under " + parent.string() + " after " +
                                         std::to_string(k_claim_tries) + " tries");
}

ClaimedDir::ClaimedDir(ClaimedDir&& other) noexcept
    : m_path(std::move(other.m_path)), m_lock(std::move(other.m_lock)) {
    other.m_path.clear();
    other.m_lock.reset();
}

ClaimedDir& ClaimedDir::operator=(ClaimedDir&& other) noexcept {
    if (this != &other) {
        release();
        m_path = std::move(other.m_path);
        m_lock = std::move(other.m_lock);
        other.m_path.clear();
        other.m_lock.reset();
    }
    return *this;
}

ClaimedDir::~ClaimedDir() {
    release();
}

void ClaimedDir::release() noexcept {
    if (!m_path.empty()) {
        std::error_code ec;
        fs::remove_all(m_path, ec); // while still locked: no sweep can race the removal
        m_path.clear();
    }
    m_lock.reset();
}

fs::path default_spool_parent() {
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);
    if (ec) {
        tmp = "/tmp";
    }
    return tmp / ("gpupool-spool-" + std::to_string(::geteuid()));
}

} // namespace gpupool::util
