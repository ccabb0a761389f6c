// GpuWatch: the agent's eye on its GPUs — what the machine has (probed once at start), whether a
// fractional job holds more GPU memory than its share, and whether each GPU is still sound. It
// decides; the agent acts (stops jobs, tells the coordinator). Exists so that these rules are tested
// with a StaticGpuProbe and a ManualClock, without a driver and without waiting.
//
// Rules:
// - The memory watchdog looks every `watch_period`, and only where the driver cannot cap a share
//   itself (MemoryEnforcement::watchdog): a process is charged to the attempt its environment names
//   (GPUPOOL_ATTEMPT_ID in /proc/<pid>/environ), see memory_watchdog.hpp for the arithmetic.
// - Health is asked every `health_period`, or at once when forced (a GPU job failed: was it the GPU?).
//   A GPU is unhealthy while the driver says so (assess_gpu_health); the verdict is reported when it
//   changes, and each GPU's going bad or recovering is logged once.
// - The owner's own use of a GPU (reclaim.hpp) is looked for every `watch_period` too, whatever the
//   enforcement: each process is attributed from `proc_root` (process_owner.hpp). One driver query
//   serves both looks, and the watchdog does not charge an attempt with a process found foreign.
// - With the worker's own MPS daemon (set_mps) the enforcement is "mps" and the watchdog still
//   watches: a client can change its own limit (it is only an environment variable).
// - The idle guard (idle_guard.hpp) looks every `idle_period` at what the driver says each GPU and
//   process is doing, and says which GPU jobs to warn and which to stop.
// - A probe that fails is logged; the watchdog then skips that look (no job is stopped on a guess),
//   and reclaim decides nothing from it.
// Not thread-safe: the agent thread owns it. Times come from the Clock.
#pragma once

#include "core/api/inventory.hpp"
#include "core/util/clock.hpp"
#include "worker/agent/process_owner.hpp"
#include "worker/agent/reclaim.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/gpu/idle_guard.hpp"
#include "worker/gpu/memory_watchdog.hpp"
#include "worker/gpu/mps_daemon.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpupool::worker {

// A running GPU job, as the memory watchdog and the idle guard see it.
struct GpuJob {
    std::int64_t attempt = 0;
    std::int64_t gpu_index = 0;
    std::int64_t limit_mib = 0;       // its GPU memory share (0: a whole GPU, not watched)
    std::int64_t idle_timeout_ms = 0; // 0: never stopped for idling
};

// What the looks found: jobs to stop (with the reason they end with) and lines for jobs' logs.
struct GpuJudgement {
    std::vector<std::pair<std::int64_t, std::string>> stop;  // attempt, reason
    std::vector<std::pair<std::int64_t, std::string>> notes; // attempt, a line for its log
};

// The running GPU jobs the watchdog and the idle guard look at (those not stopping already).
std::vector<GpuJob> watched_gpu_jobs(const AttemptTable& attempts);

class GpuWatch {
public:
    GpuWatch(GpuProbe& probe, const util::Clock& clock, std::chrono::milliseconds watch_period,
             std::chrono::milliseconds health_period, ReclaimPolicy reclaim = {},
             std::filesystem::path proc_root = "/proc", std::chrono::milliseconds idle_period = std::chrono::seconds(30))
        : m_probe(probe), m_clock(clock), m_watch_period(watch_period), m_health_period(health_period),
          m_idle_period(idle_period), m_reclaim(reclaim), m_proc_root(std::move(proc_root)) {}

    // Asks the driver what the machine has; an Error when a driver is there and answers garbage.
    // The driver's versions are asked once here too (a failure is logged: they stay unknown).
    Status discover();
    const std::vector<GpuInfo>& gpus() const { return m_gpus; }
    const DriverInfo& driver() const { return m_driver; }
    MemoryEnforcement enforcement() const { return m_enforcement; }
    // The worker's MPS daemon runs (true) or not: the enforcement is then "mps" (on a machine with GPUs).
    void set_mps(bool running);
    // `--mps`: starts the worker's own MPS control daemon for the `offered` GPUs (start_worker_mps,
    // mps_daemon.hpp) and, once it runs, set_mps(true). The caller owns the daemon and stops it.
    Result<std::unique_ptr<MpsControl>> start_mps(const std::vector<GpuInfo>& offered, bool runtime_shares_ipc,
                                                  const std::string& runtime_name,
                                                  const std::filesystem::path& work_dir);
    // The GPU's memory in MiB (0 for an index the machine does not have).
    std::int64_t memory_mib(std::int64_t index) const;

    // The attempts over their share, when a look is due (empty otherwise). `running` lists the
    // fractional attempts still running and not already being stopped.
    std::vector<Overuse> overuse(const std::vector<WatchedAttempt>& running);

    // The jobs to warn and to stop for idling, when a look is due (an empty step otherwise).
    IdleStep idle(const std::vector<IdleWatched>& watched);
    // Both looks (overuse and idle) over `jobs`, the GPU jobs running and not already being stopped:
    // "exceeded its GPU memory share: 9000 MiB in use, limit 6000 MiB", "idle on its GPU for 30 min".
    GpuJudgement judge(const std::vector<GpuJob>& jobs);

    // The new verdict when a check was due (or `now`) and it differs from the last one; nullopt
    // otherwise. unhealthy() is the last verdict (sent in every heartbeat).
    std::optional<std::vector<UnhealthyGpu>> check_health(bool now = false);
    const std::vector<UnhealthyGpu>& unhealthy() const { return m_unhealthy; }
    std::vector<std::int64_t> unhealthy_indexes() const;
    // Why GPU `index` is unhealthy in the last verdict; nullopt when it is sound.
    std::optional<std::string> failure(std::int64_t index) const;

    // The owner's use of the GPUs, when a look is due (an empty step otherwise). `jobs`: the GPU jobs
    // running, with their marks. reclaimed() is the GPUs reclaimed now (sent in every heartbeat).
    ReclaimStep reclaim(const std::vector<JobMark>& jobs);
    bool reclaimed(std::int64_t gpu_index) const { return m_reclaim.reclaimed(gpu_index); }
    std::vector<std::int64_t> reclaimed() const { return m_reclaim.reclaimed(); }
    const ReclaimPolicy& reclaim_policy() const { return m_reclaim.policy(); }

    // GPU memory held on each of `indices` (MiB, every process the driver lists), as of the last
    // look; empty before a look has answered or when the last one failed.
    std::vector<std::int64_t> memory_used_mib(const std::vector<std::int64_t>& indices) const;
    // The same for the GPUs of an inventory, in its order (what a heartbeat sends).
    std::vector<std::int64_t> memory_used_mib_of(const std::vector<api::GpuInventory>& gpus) const;

private:
    // The driver's process list, asked at most once per look (overuse and reclaim share it).
    const Result<std::vector<GpuProcess>>& processes(std::int64_t now);
    std::optional<std::int64_t> index_of(const std::string& uuid) const;

    GpuProbe& m_probe;
    const util::Clock& m_clock;
    std::chrono::milliseconds m_watch_period;
    std::chrono::milliseconds m_health_period;
    std::chrono::milliseconds m_idle_period;
    std::int64_t m_next_idle_ms = 0;
    IdleGuard m_idle;
    std::vector<GpuInfo> m_gpus;
    DriverInfo m_driver;
    MemoryEnforcement m_probed = MemoryEnforcement::none; // what the driver allows without MPS
    MemoryEnforcement m_enforcement = MemoryEnforcement::none;
    std::int64_t m_next_watch_ms = 0;
    std::int64_t m_next_health_ms = 0;
    std::vector<UnhealthyGpu> m_unhealthy;
    Reclaimer m_reclaim;
    std::filesystem::path m_proc_root;
    std::int64_t m_next_reclaim_ms = 0;
    std::set<std::int64_t> m_foreign; // pids found foreign at the last reclaim look
    Result<std::vector<GpuProcess>> m_processes = std::vector<GpuProcess>{};
    std::optional<std::int64_t> m_processes_ms; // when m_processes was asked
};

// The attempt a process says it belongs to (GPUPOOL_ATTEMPT_ID in its environment), if it says.
std::optional<std::int64_t> attempt_of_pid(std::int64_t pid);

} // namespace gpupool::worker
