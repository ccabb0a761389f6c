#include "core/net/open_files.hpp"

#include <sys/resource.h>

namespace gpupool::net {

OpenFilesLimit raise_open_files_limit() {
    OpenFilesLimit out;
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
        return out;
    }
    out.before = lim.rlim_cur;
    out.hard = lim.rlim_max;
    // An unlimited hard limit cannot be the soft one for files (the kernel caps it at fs.nr_open).
    if (lim.rlim_cur < lim.rlim_max && lim.rlim_max != RLIM_INFINITY) {
        rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            lim = raised;
        }
    }
    out.now = lim.rlim_cur;
    return out;
}

std::size_t connections_within(std::uint64_t open_files, std::size_t reserve) {
    if (open_files <= reserve) {
        return 1;
    }
    return static_cast<std::size_t>(open_files - reserve);
}

} // namespace gpupool::net
