// Whose is a GPU process: one of the worker's jobs', the machine's owner's (anyone else's), or the
// driver's own? Reclaim (reclaim.hpp) acts only on processes the worker is sure are not its jobs';
// this unit reads what /proc says of a pid, under a root that tests replace with a fake tree.
//
// Rules, in order:
// - A pid whose <proc>/<pid>/cgroup or <proc>/<pid>/stat cannot be read or parsed (it has exited, it
//   lives in another pid namespace, /proc is hidden from the worker) is `unknown`.
// - It is a `job`'s when its cgroup path names one of the jobs' container ids (cgroup v2 or any v1
//   hierarchy: podman `.../libpod-<id>.scope[/container]` or `/libpod_parent/libpod-<id>`, docker
//   `.../docker-<id>.scope` or `/docker/<id>`), when its session is one of the jobs' sessions (the
//   process runtime setsid()s each job), or when its environment names one of the jobs' attempts
//   (GPUPOOL_ATTEMPT_ID: a process-runtime child that left the session; read only where allowed).
//   A container's processes cannot leave its cgroup, so a job cannot pass for the owner.
// - The CUDA MPS server (comm `nvidia-cuda-mps-server`) is the driver's: `system`.
// - Anything else is `foreign`: someone on the machine (its owner) is using the GPU.
// Reads files only; thread-safe.
#pragma once

#include "worker/agent/attempt_table.hpp"
#include "worker/agent/reclaim.hpp"
#include "worker/runtime/container_runtime.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

// One running GPU job, and what marks its processes (ContainerRuntime::process_marks).
struct JobMark {
    std::int64_t attempt = 0;
    std::int64_t gpu_index = 0;
    std::string container_id; // the engine's full id (64 hex digits); empty when not known
    std::int64_t session = 0; // 0 when none
};

// The running GPU jobs among `attempts`, with what their runtime says marks their processes.
std::vector<JobMark> gpu_job_marks(const AttemptTable& attempts, ContainerRuntime& runtime);

ProcessOwner owner_of_process(const std::filesystem::path& proc_root, std::int64_t pid,
                              const std::vector<JobMark>& jobs);

// The 64-hex-digit container ids named in the text of a /proc/<pid>/cgroup file. Pure.
std::vector<std::string> cgroup_container_ids(std::string_view cgroup_text);

} // namespace gpupool::worker
