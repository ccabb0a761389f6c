#include "core/coordinator/dist.hpp"

#include "core/util/sha256.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpupool::coordinator {

namespace {

bool version_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '+' || c == '~' || c == '_';
}

bool arch_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// O_NONBLOCK: a FIFO planted under a served name must not block the opener (it is refused below).
constexpr int k_open_flags = O_RDONLY | O_NONBLOCK;

bool same_file(const DistFiles::File& f, const struct stat& st) {
    return f.dev == st.st_dev && f.ino == st.st_ino && f.size == static_cast<std::uint64_t>(st.st_size) &&
           f.mtime.tv_sec == st.st_mtim.tv_sec && f.mtime.tv_nsec == st.st_mtim.tv_nsec;
}

// One entry of DIR, opened without following a link, hashed; nullopt-like Error when it is skipped.
Result<DistFiles::File> read_entry(int dir_fd, const std::string& name) {
    auto fd = util::open_beneath(dir_fd, name, k_open_flags);
    if (!fd) {
        return make_error(ErrorCode::invalid_input,
                          "`" + name + "` is not served: it cannot be opened without following a link (" +
                              fd.error().message + ")");
    }
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return make_error(ErrorCode::invalid_input, "`" + name + "` is not served: not a regular file");
    }
    auto sha = util::sha256_fd_hex(fd->get());
    if (!sha) {
        return make_error(ErrorCode::io, "`" + name + "` is not served: " + sha.error().message);
    }
    DistFiles::File f;
    f.name = name;
    f.size = static_cast<std::uint64_t>(st.st_size);
    f.sha256 = *sha;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.mtime = st.st_mtim;
    return f;
}

} // namespace

bool DistFiles::is_dist_name(std::string_view name) {
    if (name == k_dist_ca_name) {
        return true;
    }
    constexpr std::string_view prefix = "gpupool-";
    constexpr std::string_view linux_part = "-linux-";
    if (!name.starts_with(prefix) || name.size() > 128) {
        return false;
    }
    const auto at = name.rfind(linux_part);
    if (at == std::string_view::npos || at <= prefix.size()) {
        return false;
    }
    const std::string_view version = name.substr(prefix.size(), at - prefix.size());
    const std::string_view arch = name.substr(at + linux_part.size());
    return !arch.empty() && std::isdigit(static_cast<unsigned char>(version.front())) != 0 &&
           std::all_of(version.begin(), version.end(), version_char) &&
           std::all_of(arch.begin(), arch.end(), arch_char);
}

Result<std::shared_ptr<const DistFiles>> DistFiles::open(const std::filesystem::path& dir,
                                                         std::vector<std::string>& warnings) {
    auto dir_fd = util::open_dir(dir);
    if (!dir_fd) {
        Error e = dir_fd.error();
        e.message = "--dist " + dir.string() + ": " + e.message;
        e.field = "--dist";
        return e;
    }
    std::shared_ptr<DistFiles> d(new DistFiles());
    d->m_dir = dir;
    // Listed through a descriptor of our own (closedir closes it), not by the path again.
    const int list_fd = ::fcntl(dir_fd->get(), F_DUPFD_CLOEXEC, 0);
    DIR* listing = list_fd >= 0 ? ::fdopendir(list_fd) : nullptr;
    if (listing == nullptr) {
        if (list_fd >= 0) {
            ::close(list_fd);
        }
        return make_error(ErrorCode::io, "--dist " + dir.string() + ": cannot list it: " + std::strerror(errno),
                          "--dist");
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(listing)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") {
            names.push_back(name);
        }
    }
    ::closedir(listing);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
        if (!is_dist_name(name)) {
            if (name != "SHA256SUMS") {
                warnings.push_back("--dist: `" + name + "` is not served (not gpupool-VERSION-linux-ARCH or ca.pem)");
            }
            continue;
        }
        auto f = read_entry(dir_fd->get(), name);
        if (!f) {
            warnings.push_back("--dist: " + f.error().message);
            continue;
        }
        d->m_sums += f->sha256 + "  " + f->name + "\n";
        d->m_files.push_back(std::move(*f));
    }
    d->m_dir_fd = std::move(*dir_fd);
    return std::shared_ptr<const DistFiles>(std::move(d));
}

const DistFiles::File* DistFiles::find(std::string_view name) const {
    for (const auto& f : m_files) {
        if (f.name == name) {
            return &f;
        }
    }
    return nullptr;
}

Result<util::UniqueFd> DistFiles::open_file(std::string_view name) const {
    const File* f = is_dist_name(name) ? find(name) : nullptr;
    if (f == nullptr) {
        return make_error(ErrorCode::not_found, "no such file");
    }
    auto fd = util::open_beneath(m_dir_fd.get(), f->name, k_open_flags);
    struct stat st {};
    if (!fd || ::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode) || !same_file(*f, st)) {
        return make_error(ErrorCode::unavailable, "`" + f->name +
                                                      "` changed since the coordinator started (its SHA-256 was "
                                                      "published then): restart the coordinator to serve it");
    }
    // Back to blocking reads for the server's file body (a regular file never blocks anyway).
    const int fl = ::fcntl(fd->get(), F_GETFL);
    if (fl >= 0) {
        ::fcntl(fd->get(), F_SETFL, fl & ~O_NONBLOCK);
    }
    return std::move(*fd);
}

} // namespace gpupool::coordinator
