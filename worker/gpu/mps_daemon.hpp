// The worker's own NVIDIA MPS control daemon (`gpupool worker --mps`), and what a job needs to be
// one of its clients.
//
// With MPS, fractional jobs on one GPU share one server context and the driver caps each client's
// device memory (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) and, when the owner chooses `isolate`, its share
// of the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE): the strongest enforcement of a memory share there is
// (without it, only the watchdog, which stops a job after the fact). MpsControl exists so the agent's
// logic is tested without a GPU: the real one drives `nvidia-cuda-mps-control`, tests drive a
// stand-in of it.
//
// Rules (what the real control program does, per NVIDIA's MPS documentation):
// - `nvidia-cuda-mps-control -d` starts the control daemon in the background (with the worker's
//   environment less its GPUPOOL_* variables: the servers it starts run as the jobs' user). It takes its pipe
//   directory (CUDA_MPS_PIPE_DIRECTORY), its log directory (CUDA_MPS_LOG_DIRECTORY; the servers it
//   starts inherit it) and the GPUs it serves (CUDA_VISIBLE_DEVICES, given as UUIDs so that no index
//   remapping can confuse them) from its environment, and writes its pid to
//   `<pipe dir>/nvidia-cuda-mps-control.pid`.
// - Commands go on the same program's stdin with the same environment: `get_server_list` succeeds
//   only while a daemon answers on that pipe directory, `quit` stops it.
// - A client reaches the daemon through the same pipe directory; a daemon serves one user id at a
//   time (a client of another user waits until the other user's clients are done), so the jobs of
//   one worker should all run as one user. The servers run as their clients' user.
// - Where the pipes live (mps_dirs): a root worker's container jobs run as another user (65534), who
//   must pass through every directory above the pipes, and a root worker's work dir is 0700. So a
//   root worker's pipes are in /run/gpupool-mps-<key> (/run is 0755; <key> is made from the work
//   dir, so a restarted worker finds the daemon it left; the directory 0755, owned by the worker, the
//   pipes as the daemon makes them), outside the spool that nobody else may enter. A worker that is
//   not root runs its jobs as itself, so its pipes stay in <work_dir>/mps/pipe. The log directory is
//   always <work_dir>/mps/log, 0700. start() refuses a pipe or log directory that is a link or
//   another user's, and a root worker warns when a directory above the pipes is closed to others.
//   stop() removes the pipe directory once the daemon is gone.
// - The worker owns the daemon it started: start() adopts a daemon already answering on these
//   directories (left by a worker that was killed), stop() quits it. Every call of the program is
//   bounded by the timeout given to make_mps_control(); stop() then waits (bounded) until the daemon
//   no longer answers, and as a last resort SIGKILLs the pid the daemon wrote (after checking that
//   pid is still an MPS program), so a wedged daemon cannot hang the worker's exit.
// - Destroying a started MpsControl stops the daemon (as stop() does) unless stop() was called.
// Failures are Errors (code io: the program is missing, failed, or did not answer in time, with what
// it said). Thread-safe: calls are serialized on one mutex (a running() from the heartbeat waits
// for a stop() from the signal handler's thread, both bounded).
#pragma once

#include "core/util/result.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <unistd.h>
#include <vector>

namespace gpupool::worker {

// The control program, looked up on PATH.
inline constexpr const char* k_mps_control_program = "nvidia-cuda-mps-control";
// Where a container job finds the pipe directory (bind-mounted there).
inline constexpr const char* k_mps_pipe_in_container = "/run/gpupool-mps";

struct MpsDirs {
    std::filesystem::path pipe; // 0755: clients of other users (containers) must reach its sockets
    std::filesystem::path log;  // 0700: the daemon's and servers' logs are the worker's
};

// Where a worker running as `euid` with `work_dir` keeps its daemon's pipes and logs (rules above):
// root: <run_root>/gpupool-mps-<16 hex digits of the work dir's FNV-1a hash> and <work_dir>/mps/log;
// anyone else: <work_dir>/mps/pipe and <work_dir>/mps/log. Pure but for making the work dir absolute;
// start() creates them.
MpsDirs mps_dirs(const std::filesystem::path& work_dir, uid_t euid = ::geteuid(),
                 const std::filesystem::path& run_root = "/run");

// How much of the GPU's compute an MPS client may use (the owner's choice: `--mps-compute`, worker.toml
// `[pool] mps_compute`). Memory is capped either way.
// - throughput (the default): no CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; a client may use every SM that its
//   neighbours leave idle. On an H200 (2026-12-04, docs/worker.md) three 0.2-GPU jobs each did about
//   16,270 matmuls in 30 s as MPS clients capped at 20 %, and about 25,700 without MPS.
// - isolate: each client's threads capped at its share (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = the share
//   in percent, rounded up): a job's speed does not depend on its neighbours, and the GPU's idle
//   share stays idle.
enum class MpsCompute : std::uint8_t { throughput, isolate };
inline constexpr MpsCompute k_default_mps_compute = MpsCompute::throughput;
const char* to_string(MpsCompute c);
// "throughput" or "isolate"; an Error (invalid_input) saying so otherwise.
Result<MpsCompute> parse_mps_compute(std::string_view text);

// Whether this machine can run MPS: the control program is on PATH and nvidia-smi lists at least one
// GPU (asked with a bounded wait).
bool mps_available();

class MpsControl {
public:
    virtual ~MpsControl() = default;
    // Creates the directories (pipe 0755, log 0700) and starts a daemon serving `gpu_uuids` on them,
    // or adopts the one that already answers there; returns when it answers.
    virtual Status start(const MpsDirs& dirs, const std::vector<std::string>& gpu_uuids) = 0;
    // Whether the daemon answers `get_server_list` now (false before start(), or when it hangs).
    virtual bool running() = 0;
    // `quit`, then waits until it no longer answers; SIGKILLs it when it will not go. Idempotent: ok
    // when nothing was started. An Error only when the daemon still answers after all that.
    virtual Status stop() = 0;
};

// The real control, driving `nvidia-cuda-mps-control`: every call of it is bounded by `timeout`, and
// stop() waits at most `stop_wait` for the daemon to go after `quit` before it kills it.
std::unique_ptr<MpsControl> make_mps_control(std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                             std::chrono::milliseconds stop_wait = std::chrono::seconds(5));

// `gpupool worker --mps`: a daemon of the worker's own (make_mps_control) for the GPUs it shares, by
// UUID, in mps_dirs(work_dir). Refused, with the reason, when it shares no GPU or when its runtime
// (`runtime_name`) cannot give jobs the host's IPC namespace, which MPS clients need.
Result<std::unique_ptr<MpsControl>> start_worker_mps(const std::vector<std::string>& gpu_uuids, bool runtime_shares_ipc,
                                                     const std::string& runtime_name,
                                                     const std::filesystem::path& work_dir);

// The environment an MPS client needs, for a job holding `gpu_milli` of one GPU (1000 = all of it)
// and `limit_mib` of its memory:
// - CUDA_MPS_PIPE_DIRECTORY: `pipe_dir_seen`, the pipe directory as the job sees it
//   (k_mps_pipe_in_container in a container, the host path for a bare process);
// - CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: "<device_seen_as>=<limit_mib>M", the job's GPU by the index
//   the job sees it at (0 in a container that sees only its GPU); absent when limit_mib <= 0;
// - CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, only under MpsCompute::isolate: the share in percent, rounded
//   up, within 1..100 (under throughput it is absent: the server's own, 100 %).
// No CUDA_MPS_LOG_DIRECTORY: only the daemon and the servers it starts read it. Pure.
std::map<std::string, std::string> mps_client_env(std::int64_t gpu_milli, std::int64_t limit_mib, int device_seen_as,
                                                  const std::string& pipe_dir_seen,
                                                  MpsCompute compute = k_default_mps_compute);

} // namespace gpupool::worker
