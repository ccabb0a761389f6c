// The GPU memory watchdog's decision: which running attempts hold more GPU memory than their share.
//
// Where the MPS control daemon runs, the driver itself caps each client; elsewhere the worker
// enforces fractional shares by looking (every few seconds) at the driver's per-process memory
// accounting and stopping a job that exceeds its share. This is the pure part: attribution and
// arithmetic, no I/O. Rules:
// - A process is attributed to an attempt when its environment names it (GPUPOOL_ATTEMPT_ID), else
//   to the only attempt running on that GPU; a process on a GPU shared by several attempts that
//   names none of them is reported as unattributed (it cannot be charged to anyone).
// - An attempt is over when its processes together hold more than limit × (1 + tolerance), with the
//   tolerance in per mille (CUDA contexts make exact limits impractical).
// - Attempts with a whole GPU (or no limit) are not watched.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace gpupool::worker {

struct WatchedAttempt {
    std::int64_t attempt = 0;
    std::int64_t gpu_index = 0;
    std::int64_t limit_mib = 0; // 0 = not limited
};

struct GpuUse {
    std::int64_t pid = 0;
    std::int64_t gpu_index = 0;
    std::int64_t used_mib = 0;
    std::optional<std::int64_t> attempt; // from the process's environment, if it says
};

struct Overuse {
    std::int64_t attempt = 0;
    std::int64_t used_mib = 0;
    std::int64_t limit_mib = 0;
    bool operator==(const Overuse&) const = default;
};

struct WatchdogVerdict {
    std::vector<Overuse> over;
    std::vector<GpuUse> unattributed;
};

WatchdogVerdict check_gpu_memory(const std::vector<WatchedAttempt>& attempts, const std::vector<GpuUse>& uses,
                                 std::int64_t tolerance_per_mille = 50);

} // namespace gpupool::worker
