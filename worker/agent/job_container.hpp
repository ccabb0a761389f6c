// How an assignment becomes a container: the ContainerSpec the runtime starts (names, labels,
// mounts, the job's environment, its GPU and its share) and the attempt's directories on the host
// (work/ with the job's inputs, outputs/, the caches). Separate from the agent so that the
// environment a job sees is unit-tested for every kind of runtime.
//
// Rules:
// - One behaviour everywhere: every runtime starts the job in its work folder (its inputs), with the
//   same variables (GPUPOOL_*, HF_HOME, HOME=/tmp, PATH), so a recipe that runs under `gpupool run`
//   runs on the pool. A runtime that isolates the job (RuntimeCapabilities::isolates) gets the mounts
//   and container paths (/work read-only and the working directory, /outputs, /cache); one that does
//   not (a bare process) gets the host paths in the same variables (its cwd is <attempt>/work, so
//   ../outputs is the outputs folder there too) and a default PATH when the job sets none.
// - A job with a GPU sees it as device 0 where the runtime passes only that GPU, else by its index;
//   GPUPOOL_GPU_MEMORY_MB / GPUPOOL_GPU_FRACTION always say its share (a framework cap reads them).
// - The worker's model cache is mounted read-only at /cache (GPUPOOL_MODEL_CACHE): the worker fills
//   it, no job can write it. When every model the job names is there, HF_HOME=/cache and
//   HF_HUB_OFFLINE=1; otherwise HF_HOME is in the team's own cache, where the job's own downloads go.
// - Who the job is: a container of a root worker runs as k_job_uid (nobody), which owns the job's
//   writable folders; a container of a worker that is not root (rootless podman, docker through its
//   group) runs as the worker's own uid and gid (podman: --userns=keep-id), so those folders can be
//   the worker's, 0700, and never open to everyone. The process runtime's job is the worker's user.
// - Each team writes only its own cache (<cache_dir>/teams/<team>, at /team-cache, GPUPOOL_CACHE_DIR):
//   one team cannot plant files that another team's jobs then load.
// - With the worker's MPS daemon (mps_pipe), a fractional job is an MPS client: the pipe directory
//   mounted at /run/gpupool-mps, the host's IPC namespace, a pinned device memory limit and an active
//   thread percentage from its share (mps_client_env). A whole-GPU job bypasses MPS.
// - The run report (run_report_for) says what the job was given: the GPU of the worker's inventory at
//   its index with the driver's versions; the enforcement of its GPU memory share ("mps" for an MPS
//   client, "watchdog" for another fractional job where the watchdog looks, else "none"; empty
//   without a GPU); the models it names, with the commits only when it reads them from the cache.
// - Inputs come as the job's archive through the coordinator (cached per digest under
//   <work_dir>/inputs, 0600), or, without one, from this machine's disk (shared file systems); an
//   input that is not there is an invalid_input Error (the job's own problem).
#pragma once

#include "core/util/result.hpp"
#include "core/util/tree_fd.hpp"
#include "worker/agent/attempt.hpp"
#include "worker/agent/coordinator_link.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/gpu/mps_daemon.hpp" // MpsCompute
#include "worker/runtime/container_runtime.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <unistd.h>
#include <vector>

namespace gpupool::worker {

struct ContainerContext {
    std::string worker_label{};          // names and labels this worker's containers
    std::filesystem::path cache_dir{};   // the teams' writable caches are under <cache_dir>/teams
    RuntimeCapabilities runtime{};
    std::vector<GpuInfo> gpus{};
    std::filesystem::path model_cache{}; // the worker's model cache (HF_HOME layout); empty: none
    bool models_ready = false;           // every model the job names is complete in it
    std::optional<std::filesystem::path> mps_pipe{}; // the worker's MPS daemon's pipe directory (--mps)
    MpsCompute mps_compute = k_default_mps_compute;  // its clients' compute (--mps-compute)
    uid_t worker_uid = ::geteuid(); // a container of a worker that is not root runs as the worker's user
    gid_t worker_gid = ::getegid();
};

ContainerSpec container_spec_for(const Attempt& t, const ContainerContext& ctx);

// How a job's end reads: the reason it was stopped for, an out-of-memory kill (exit 137 under a
// memory limit the runtime enforces), else its exit status. Pure.
std::string exit_reason(const Attempt& t, const ExitStatus& st, bool runtime_limits_memory);

// What the worker knows besides the attempt when its job starts, for its run report.
struct RunFacts {
    std::string runtime{};                                   // ContainerRuntime::name()
    std::vector<GpuInfo> gpus{};                             // the worker's inventory
    DriverInfo driver{};                                     // probed once at start
    MemoryEnforcement enforcement = MemoryEnforcement::none; // where the watchdog looks (GpuWatch)
    // The worker runs its MPS daemon (ContainerContext::mps_pipe): its fractional jobs are clients.
    bool mps = false;
    // Each of the job's `[cache] models` -> the commit of the cache's snapshot, when the job reads
    // the cache (its HF_HOME, every model complete there); empty otherwise.
    std::map<std::string, std::string> model_commits{};
    std::string worker_version{};
};

// The run report of attempt `t` started as `spec`, without what only the start and the end tell (the
// image as the engine resolved it, the times: JobControl fills them). Text is made fit for the wire
// (report_text). Pure.
api::RunReport run_report_for(const Attempt& t, const ContainerSpec& spec, const RunFacts& facts);

// `s` as a run report's text: printable ASCII (any other byte becomes '?'), at most
// api::k_max_report_text_bytes. Pure.
std::string report_text(std::string_view s);

std::filesystem::path team_cache_dir(const std::filesystem::path& cache_dir, TeamId team);

// A fractional GPU job's memory share in MiB, from its spec (0: a whole GPU or none: not watched).
std::int64_t gpu_limit_mib(const ContainerSpec& c);

// The uid and gid a container job of a root worker runs as (nobody), and that owns its folders.
inline constexpr uid_t k_job_uid = 65534;

// Who owns a job's writable folders (outputs/, its team's cache) on the host: for a container of a
// root worker, the job's own user (k_job_uid); otherwise nullopt, since the job runs as the worker's
// user (the process runtime; rootless podman and docker with the worker's uid, see
// container_spec_for), which owns them already.
std::optional<util::Owner> job_owner(bool isolates, uid_t worker_uid);

// Creates the attempt's directories and puts the job's inputs in work/. Nothing here follows a link
// or opens a folder to everyone: outputs/ and the team cache (and its huggingface/) are 0700, owned
// by job_owner(isolates, geteuid()); a link or file the job left where huggingface/ belongs is
// removed (the name, not what it names); work/ is the worker's, 0755.
Status prepare_attempt_dirs(const Attempt& t, const std::filesystem::path& work_dir,
                            const std::filesystem::path& cache_dir, bool isolates, CoordinatorLink& link);

} // namespace gpupool::worker
