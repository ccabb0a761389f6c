#include "worker/runtime/child_io.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace gpupool::worker {

Result<UniqueFd> open_log(const std::filesystem::path& path, OpenLog mode) {
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
    if (mode == OpenLog::truncate_then_append) {
        flags |= O_TRUNC;
    }
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) {
        return make_error(ErrorCode::io, "cannot open log file " + path.string() + ": " + std::strerror(errno));
    }
    return UniqueFd(fd);
}

void child_redirect_output_and_seal(int fd) noexcept {
    if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
    }
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        long max_fd = ::sysconf(_SC_OPEN_MAX);
        for (int i = 3; i < (max_fd > 0 ? max_fd : 1024); ++i) {
            int flags = ::fcntl(i, F_GETFD);
            if (flags >= 0 && (flags & FD_CLOEXEC) == 0) {
                ::fcntl(i, F_SETFD, flags | FD_CLOEXEC);
            }
        }
    }
}

} // namespace gpupool::worker
