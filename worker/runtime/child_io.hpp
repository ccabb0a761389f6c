// Small POSIX helpers the runtimes share for the children they start: the log file a job's output
// is appended to, and hygiene inside a freshly forked child. Internal to worker/runtime.
//
// Failures are Errors with code io that name the file and the system's reason.
#pragma once

#include "core/util/result.hpp"
#include "core/util/tree_fd.hpp"

#include <filesystem>

namespace gpupool::worker {

// The one owned-descriptor type (core/util/tree_fd.hpp).
using util::UniqueFd;

enum class OpenLog { append, truncate_then_append };

// Opens (creating, mode 0644) `path` for writing with O_APPEND and O_CLOEXEC: every write of every
// holder lands at the end, so a job's stdout and stderr sharing it keep their order.
Result<UniqueFd> open_log(const std::filesystem::path& path, OpenLog mode = OpenLog::append);

// In a forked child before exec (async-signal-safe): makes `fd` the child's stdout and stderr (when
// fd >= 0) and marks every other descriptor above stderr close-on-exec, so descriptors the worker
// opened without O_CLOEXEC (sockets, databases) do not leak into jobs or tools.
void child_redirect_output_and_seal(int fd) noexcept;

} // namespace gpupool::worker
