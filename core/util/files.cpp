#include "core/util/files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace gpupool::util {

namespace fs = std::filesystem;

namespace {

Error io_error(const std::string& what, const fs::path& path, int err) {
    return make_error(ErrorCode::io, what + " " + path.string() + ": " + std::strerror(err));
}

// mkstemps(3) on `<dir>/<prefix>XXXXXX<suffix>`: the descriptor and the name it made.
int make_unique_file(const fs::path& dir, std::string_view prefix, std::string_view suffix, fs::path& made) {
    std::string name = (dir / (std::string(prefix) + "XXXXXX" + std::string(suffix))).string();
    std::vector<char> buf(name.begin(), name.end());
    buf.push_back('\0');
    const int fd = ::mkstemps(buf.data(), static_cast<int>(suffix.size()));
    if (fd >= 0) {
        made = fs::path(buf.data());
    }
    return fd;
}

} // namespace

bool write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

std::string read_all(int fd) {
    std::string out;
    char buf[8192];
    off_t offset = 0;
    while (true) {
        const ssize_t n = ::pread(fd, buf, sizeof buf, offset);
        if (n <= 0) {
            break;
        }
        out.append(buf, static_cast<std::size_t>(n));
        offset += n;
    }
    return out;
}

Status write_private_file(const fs::path& path, std::string_view bytes) {
    return write_file_atomically(path, bytes, 0600);
}

Status write_file_atomically(const fs::path& path, std::string_view bytes, unsigned mode) {
    const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    fs::path tmp;
    const int fd = make_unique_file(dir, "." + path.filename().string() + ".", ".tmp", tmp);
    if (fd < 0) {
        return io_error("cannot create a temporary file beside", path, errno);
    }
    // mkstemp makes it 0600; fchmod gives it its mode before any byte is in it.
    bool ok = ::fchmod(fd, static_cast<mode_t>(mode)) == 0 && write_all(fd, bytes) && ::fsync(fd) == 0;
    const int err = errno;
    ok = (::close(fd) == 0) && ok;
    if (!ok) {
        ::unlink(tmp.c_str());
        return io_error("cannot write", tmp, err);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int rename_err = errno;
        ::unlink(tmp.c_str());
        return io_error("cannot replace", path, rename_err);
    }
    return {};
}

Status create_private_file(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return io_error("cannot create", path, errno);
    }
    const bool ok = ::fchmod(fd, 0600) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok) {
        return io_error("cannot make private (0600)", path, err);
    }
    return {};
}

Result<TempFile> TempFile::create(const fs::path& dir, std::string_view prefix, std::string_view suffix) {
    fs::path made;
    const int fd = make_unique_file(dir, prefix, suffix, made);
    if (fd < 0) {
        return io_error("cannot create a temporary file in", dir, errno);
    }
    ::close(fd);
    return TempFile(std::move(made));
}

TempFile::TempFile(TempFile&& other) noexcept : m_path(std::move(other.m_path)) { other.m_path.clear(); }

TempFile& TempFile::operator=(TempFile&& other) noexcept {
    if (this != &other) {
        if (!m_path.empty()) {
            ::unlink(m_path.c_str());
        }
        m_path = std::move(other.m_path);
        other.m_path.clear();
    }
    return *this;
}

Status TempFile::rename_to(const fs::path& target) {
    if (::rename(m_path.c_str(), target.c_str()) != 0) {
        return io_error("cannot rename " + m_path.string() + " to", target, errno);
    }
    m_path.clear();
    return {};
}

TempFile::~TempFile() {
    if (!m_path.empty()) {
        ::unlink(m_path.c_str());
    }
}

Result<FileLock> FileLock::acquire(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return make_error(ErrorCode::io, "cannot open the lock file " + path.string() + ": " + std::strerror(errno));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        ::close(fd);
        if (err == EWOULDBLOCK) {
            return make_error(ErrorCode::conflict, "another process holds the lock " + path.string());
        }
        return make_error(ErrorCode::io, "cannot lock " + path.string() + ": " + std::strerror(err));
    }
    return FileLock(fd);
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
    if (this != &other) {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
        m_fd = other.m_fd;
        other.m_fd = -1;
    }
    return *this;
}

FileLock::~FileLock() {
    if (m_fd >= 0) {
        ::close(m_fd); // releases the lock
    }
}

} // namespace gpupool::util
