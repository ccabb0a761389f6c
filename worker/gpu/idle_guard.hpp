// The idle guard's decisions: which GPU jobs hold a share of a GPU while using none of it, and for
// how long — the pool's version of a cloud instance left running. Pure: no driver, no clock (times
// come in as arguments), so the rules are tested with made-up samples.
//
// Rules:
// - A look at the GPUs gives each watched attempt a verdict. An attempt is busy when one of its
//   processes used the GPU's compute (SM) or memory bandwidth in the sample; it is idle when none
//   did, including when it has no process on the GPU at all.
// - A process is the attempt's when its environment names it (GPUPOOL_ATTEMPT_ID), else when the
//   attempt is the only one watched on that GPU. A busy process that names no watched attempt on a
//   GPU shared by several (an MPS server, a process that cleared its environment) makes every
//   attempt on that GPU busy: the guard never stops a job on a guess.
// - Without per-process figures (the driver cannot say), a GPU whose utilisation and memory
//   utilisation are both 0 makes its attempts idle; any use of it makes them all busy.
// - A look that failed counts as busy for everyone (the idle time starts again).
// - IdleGuard keeps when each attempt was first seen idle in its current idle stretch. An attempt is
//   warned once when its stretch reaches timeout − warn_before (warn_before = min(warn_before_max,
//   timeout / 2)) and stopped when it reaches its timeout. Attempts no longer watched are forgotten.
// Not thread-safe: the agent thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

// One process's use of a GPU in the driver's last sample, in percent.
struct ProcessActivity {
    std::int64_t pid = 0;
    std::int64_t gpu_index = 0;
    std::int64_t sm_pct = 0;  // compute
    std::int64_t mem_pct = 0; // memory bandwidth
    bool operator==(const ProcessActivity&) const = default;
};

// One GPU's use in the driver's last sample, in percent.
struct GpuUtilisation {
    std::string uuid;
    std::int64_t util_pct = 0;
    std::int64_t mem_util_pct = 0;
    bool operator==(const GpuUtilisation&) const = default;
};

// What the driver says the GPUs are doing. `processes` is nullopt where it cannot say per process.
struct GpuActivity {
    std::vector<GpuUtilisation> gpus;
    std::optional<std::vector<ProcessActivity>> processes;
};

struct IdleWatched {
    std::int64_t attempt = 0;
    std::int64_t gpu_index = 0;
    std::int64_t timeout_ms = 0; // > 0 (attempts with no idle limit are not watched)
};

// A process's activity with the attempt it names (from its environment), if it names one.
struct AttributedActivity {
    ProcessActivity activity;
    std::optional<std::int64_t> attempt;
};

// Whether each watched attempt is busy, by the rules above. `gpu_busy` is each GPU index's whole-GPU
// verdict (used where `processes` is nullopt). Returns attempt → busy.
std::map<std::int64_t, bool> busy_attempts(const std::vector<IdleWatched>& watched,
                                           const std::optional<std::vector<AttributedActivity>>& processes,
                                           const std::map<std::int64_t, bool>& gpu_busy);

struct IdleWarning {
    std::int64_t attempt = 0;
    std::int64_t idle_ms = 0; // idle so far
    std::int64_t left_ms = 0; // until it is stopped
    bool operator==(const IdleWarning&) const = default;
};

struct IdleStop {
    std::int64_t attempt = 0;
    std::int64_t idle_ms = 0;
    bool operator==(const IdleStop&) const = default;
};

struct IdleStep {
    std::vector<IdleWarning> warn;
    std::vector<IdleStop> stop;
};

class IdleGuard {
public:
    explicit IdleGuard(std::int64_t warn_before_max_ms = 5 * 60'000) : m_warn_before_max_ms(warn_before_max_ms) {}

    // One look at `now_ms`: `busy` maps each watched attempt to its verdict (nullopt: the look failed).
    IdleStep look(std::int64_t now_ms, const std::vector<IdleWatched>& watched,
                  const std::optional<std::map<std::int64_t, bool>>& busy);

private:
    struct Stretch {
        std::int64_t since_ms = 0;
        bool warned = false;
    };
    std::int64_t m_warn_before_max_ms;
    std::map<std::int64_t, Stretch> m_idle; // attempt → its current idle stretch
};

// "idle on its GPU for 30 min" (whole minutes; seconds under a minute), the reason a stopped job ends with.
std::string idle_reason(std::int64_t idle_ms);

} // namespace gpupool::worker
