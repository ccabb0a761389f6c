// The process's limit on open files, which bounds the connections a server can hold: one descriptor
// each. A coordinator serving 10,000 workers keeps 10,000 long polls open at once, far past the 1024
// a login shell's soft limit usually allows; past its limit accept() fails and clients wait in the
// listen backlog until they time out. So the coordinator raises its soft limit to the hard one at
// start (what an unprivileged process may do) and sizes HttpServer's max_connections within it.
// Plain functions on the process's own limit; any thread (at start, before serving).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpupool::net {

struct OpenFilesLimit {
    std::uint64_t before = 0; // the soft limit found
    std::uint64_t now = 0;    // the soft limit in force afterwards
    std::uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to the hard limit. Never lowers it; on failure (or an unlimited
// hard limit, which setrlimit refuses for files) it stays where it was, and `now` says so.
OpenFilesLimit raise_open_files_limit();

// Descriptors kept for what is not a connection: the database and its journal, spooled uploads,
// a backup's copy, logs, the metrics listener's connections.
inline constexpr std::size_t k_reserved_files = 256;

// The connections a server may hold under `open_files` descriptors, `reserve` of them kept back
// (at least 1).
std::size_t connections_within(std::uint64_t open_files, std::size_t reserve = k_reserved_files);

} // namespace gpupool::net
