// Reclaim: the machine's owner takes a shared GPU back by using it. The decision, and nothing else:
// fed what the GPUs run now (each process already attributed: process_owner.hpp), the jobs running
// on them and the time, it says which GPUs are reclaimed and which jobs to ask to stop or to stop
// now. Exists so that these rules are tested without a driver and without waiting; GpuWatch feeds
// it, the agent acts (heartbeat, SIGTERM, SIGKILL, hand back).
//
// Rules:
// - A GPU is reclaimed at the first look that sees a `foreign` process on it (one the worker did not
//   start). While reclaimed it takes no new work (the heartbeat's reclaimed_gpus: the coordinator
//   places nothing there).
// - Each job running on a reclaimed GPU is asked to stop once (SIGTERM, so it can checkpoint) and
//   gets `grace_ms`; still running past it, it is stopped (SIGKILL). Either way it goes back to the
//   queue as owner_preempted (never charged). A job found on the GPU later (re-attached after a
//   restart, started in a race) is treated the same. Once asked, a job is stopped even if the GPU is
//   offered again within its grace.
// - The GPU is offered again at the first look that sees none of the owner's processes on it after
//   `quiet_ms` without any: every look that still sees one starts the quiet period again.
// - Only `foreign` processes count. The worker's own jobs' processes (`job`), the driver's own
//   (`system`: the MPS server) and processes that could not be attributed (`unknown`: gone, another
//   pid namespace, /proc unreadable) never reclaim a GPU, nor restart a quiet period.
// - A look that failed (nvidia-smi did not answer: `seen` is nullopt) decides nothing about the
//   GPUs (no reclaim, no release); grace periods still run out.
// - Processes on GPU indices the worker does not have, and jobs without a GPU (index < 0), are
//   ignored.
// Not thread-safe (the agent thread owns it through GpuWatch). No clock inside: time is an argument.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

// Whose a GPU process is (process_owner.hpp decides).
enum class ProcessOwner : std::uint8_t { job, foreign, system, unknown };
const char* to_string(ProcessOwner o);

struct SeenProcess {
    std::int64_t gpu_index = 0;
    std::int64_t pid = 0;
    ProcessOwner owner = ProcessOwner::unknown;
};

struct JobOnGpu {
    std::int64_t attempt = 0;
    std::int64_t gpu_index = 0;
};

struct ReclaimPolicy {
    std::int64_t grace_ms = 30'000;  // SIGTERM -> SIGKILL for the jobs on a reclaimed GPU
    std::int64_t quiet_ms = 600'000; // free of the owner's processes this long: offered again
};

// A GPU reclaimed (`reclaimed` true: by `pid`, with `jobs` of the pool's running there) or offered again.
struct ReclaimChange {
    std::int64_t gpu_index = 0;
    bool reclaimed = false;
    std::int64_t pid = 0;
    std::int64_t jobs = 0;
    bool operator==(const ReclaimChange&) const = default;
};

struct ReclaimStep {
    std::vector<ReclaimChange> changes; // in GPU order
    std::vector<std::int64_t> term;     // attempts to ask to stop now: their grace starts
    std::vector<std::int64_t> kill;     // attempts whose grace is over: stop them now
};

class Reclaimer {
public:
    explicit Reclaimer(ReclaimPolicy policy = {}) : m_policy(policy) {}

    // One look at `now_ms`. `gpus`: the indices the worker has. `seen`: the GPU processes now, or
    // nullopt when the look failed. `running`: the jobs running now.
    ReclaimStep look(const std::vector<std::int64_t>& gpus, const std::optional<std::vector<SeenProcess>>& seen,
                     const std::vector<JobOnGpu>& running, std::int64_t now_ms);

    bool reclaimed(std::int64_t gpu_index) const { return m_gpus.count(gpu_index) != 0; }
    std::vector<std::int64_t> reclaimed() const; // ascending
    const ReclaimPolicy& policy() const { return m_policy; }

private:
    struct Reclaimed {
        std::int64_t last_seen_ms = 0; // the owner's process was last seen then
    };
    struct Stopping {
        std::int64_t kill_at_ms = 0;
        bool killed = false;
    };

    ReclaimPolicy m_policy;
    std::map<std::int64_t, Reclaimed> m_gpus;    // by GPU index
    std::map<std::int64_t, Stopping> m_stopping; // by attempt
};

// What the owner is told of a change, one line: "GPU 0 reclaimed: a process you started (pid 1234)
// uses it; 1 job there gets 30s to stop" / "GPU 0 is shared again: none of your processes used it for 10m".
std::string describe(const ReclaimChange& change, const ReclaimPolicy& policy);

} // namespace gpupool::worker
