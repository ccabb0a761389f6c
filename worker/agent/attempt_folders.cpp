#include "worker/agent/attempt_folders.hpp"

#include "core/util/files.hpp"
#include "core/util/tree_fd.hpp"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

constexpr std::array<const char*, 3> k_files{"log", "assignment.json", "state.json"};
constexpr std::array<const char*, 2> k_dirs{"work", "outputs"};
constexpr std::size_t k_page = 4096;

bool is_one_of(const std::string& name, const auto& names) {
    for (const char* n : names) {
        if (name == n) {
            return true;
        }
    }
    return false;
}

// Opens `path` without following a symlink; -1 with errno set otherwise.
int open_nofollow(const fs::path& path, int flags) { return ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0600); }

// Truncates a file of the folder to 0 when it is a regular file with one link; otherwise unlinks it
// (a symlink or a hard link must not take someone else's file with it). False when neither worked.
bool truncate_own_file(const fs::path& path) {
    const int fd = open_nofollow(path, O_WRONLY | O_NONBLOCK);
    if (fd >= 0) {
        struct stat st{};
        const bool own = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
        const bool done = own && ::ftruncate(fd, 0) == 0;
        ::close(fd);
        if (done) {
            return true;
        }
    }
    std::error_code ec;
    fs::remove(path, ec);
    return !ec;
}

// Removes every entry of `dir` (a real directory, opened without following a link) and closes it
// to others (0700), by descriptor; false when anything was left or was not as expected.
bool empty_directory(const fs::path& dir) {
    auto fd = util::open_dir(dir);
    return fd && util::empty_dir(fd->get()) && util::set_owner_and_mode(fd->get(), std::nullopt, 0700, dir.string());
}

// Removes a folder of the worker's, whatever a job left in it, following no link.
void remove_folder(const fs::path& dir) {
    if (auto st = util::remove_tree(dir); !st) {
        spdlog::warn("attempt folders: cannot remove {}: {}", dir.string(), st.error().message);
    }
}

} // namespace

AttemptFolders::AttemptFolders(fs::path attempts, fs::path spare, std::size_t keep)
    : m_attempts(std::move(attempts)), m_spare_dir(std::move(spare)), m_keep(keep) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(m_spare_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        if (m_spare.size() < m_keep && fs::is_directory(it->symlink_status(ec))) {
            m_spare.push_back(it->path());
        } else {
            remove_folder(it->path());
        }
    }
}

fs::path AttemptFolders::take(AttemptId id) {
    const fs::path dir = m_attempts / std::to_string(id.value());
    std::error_code ec;
    if (!m_spare.empty() && !fs::exists(fs::symlink_status(dir, ec))) {
        const fs::path spare = std::move(m_spare.back());
        m_spare.pop_back();
        fs::rename(spare, dir, ec);
        if (!ec) {
            return dir;
        }
        spdlog::debug("attempt folders: cannot reuse {} as {}: {}", spare.string(), dir.string(), ec.message());
        remove_folder(spare);
    }
    fs::create_directories(dir, ec);
    if (ec) {
        spdlog::error("attempt {}: cannot create {}: {}", id.value(), dir.string(), ec.message());
    }
    return dir;
}

bool AttemptFolders::empty_out(const fs::path& dir) const {
    std::error_code ec;
    std::vector<fs::path> entries;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        entries.push_back(it->path());
    }
    if (ec) {
        return false;
    }
    for (const auto& e : entries) {
        const std::string name = e.filename().string();
        if (is_one_of(name, k_dirs)) {
            if (!empty_directory(e)) {
                return false;
            }
        } else if (is_one_of(name, k_files)) {
            if (!truncate_own_file(e)) {
                return false;
            }
        } else if (!util::remove_tree(e)) {
            return false;
        }
    }
    for (const char* d : k_dirs) {
        if (!fs::is_directory(fs::symlink_status(dir / d, ec))) {
            return false;
        }
    }
    return true;
}

void AttemptFolders::give_back(const fs::path& dir, bool reusable) {
    std::error_code ec;
    if (reusable && m_spare.size() < m_keep && empty_out(dir)) {
        if (!m_spare_dir_made) { // once per run, not once per job
            fs::create_directories(m_spare_dir, ec);
            m_spare_dir_made = !ec;
        }
        const fs::path spare = m_spare_dir / dir.filename();
        fs::rename(dir, spare, ec);
        if (!ec) {
            m_spare.push_back(spare);
            return;
        }
        spdlog::debug("attempt folders: cannot keep {}: {}", dir.string(), ec.message());
    }
    remove_folder(dir);
}

bool write_in_place(const fs::path& path, const std::string& content, std::string& error) {
    const int fd = open_nofollow(path, O_RDWR | O_CREAT);
    if (fd < 0) {
        error = "cannot open " + path.string() + ": " + std::strerror(errno);
        return false;
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        error = path.string() + " is not a regular file";
        return false;
    }
    const auto old_size = static_cast<std::size_t>(st.st_size);
    if (content.size() <= k_page && old_size <= k_page) {
        std::string page = content;
        if (page.size() < old_size) {
            page.append(old_size - page.size(), ' ');
        }
        const ssize_t n = ::pwrite(fd, page.data(), page.size(), 0);
        const int err = errno;
        ::close(fd);
        if (n != static_cast<ssize_t>(page.size())) {
            error = "cannot write " + path.string() + ": " + (n < 0 ? std::strerror(err) : "short write");
            return false;
        }
        return true;
    }
    ::close(fd);
    auto tmp = util::TempFile::create(path.parent_path(), "." + path.filename().string() + ".", ".tmp");
    if (!tmp) {
        error = tmp.error().message;
        return false;
    }
    const int out = open_nofollow(tmp->path(), O_WRONLY | O_TRUNC);
    const bool written = out >= 0 && util::write_all(out, content);
    if (out >= 0) {
        ::close(out);
    }
    if (!written) {
        error = "cannot write " + tmp->path().string();
        return false;
    }
    if (auto st2 = tmp->rename_to(path); !st2) {
        error = st2.error().message;
        return false;
    }
    return true;
}

} // namespace gpupool::worker
