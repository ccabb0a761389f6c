// ContainerRuntime: the one boundary between the worker and whatever actually runs a job — podman,
// docker, or bare child processes — so that the agent's logic (leases, logs, outputs, retries) is
// tested against a fake and the runtimes are tested against the real tools.
//
// Contract:
// - start() launches the job detached and returns at once. From then on everything the job writes
//   to stdout and stderr is appended, in the order written, to ContainerSpec::log_path by the
//   runtime (a redirected file descriptor: the job's process, or podman's/docker's `run` child). The
//   file is the spool: the agent ships it to the coordinator by byte offset, so it must only grow.
// - A container is found again by its name and labels after the worker restarts (list()); reattach()
//   resumes appending its output to the log file. A runtime that cannot re-attach (process) returns
//   an error and the agent reports the attempt as lost.
// - poll() never blocks: nullopt while the job runs, its ExitStatus once it has ended. A runtime
//   that can see an exit as it happens says so through on_exit(); poll() stays the one answer.
// - Exit codes follow the shell convention: a job killed by signal N exits 128+N (137 for SIGKILL,
//   which is also what an out-of-memory kill looks like); `oom_killed` is set when the runtime can
//   tell, but callers must not rely on it alone.
// - remove() deletes the container (or reaps the process group) and is idempotent.
// Implementations are used from the agent's one thread; they need not be thread-safe.
// Failures are Errors (code io for a missing tool or a failed command, with its stderr).
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

struct Mount {
    std::filesystem::path host;
    std::string container; // absolute path inside the container (ignored by the process runtime)
    bool read_only = false;
};

struct ContainerSpec {
    std::string name;                      // unique per attempt, e.g. "gpupool-a42"
    std::string image;                     // ignored by the process runtime
    std::vector<std::string> argv;         // the command, already split (JobSpec::argv())
    std::map<std::string, std::string> env; // the full job environment
    std::vector<Mount> mounts;             // /work (ro), /outputs, /cache
    std::map<std::string, std::string> labels; // gpupool.job, gpupool.attempt, gpupool.worker
    std::filesystem::path log_path;        // stdout+stderr are appended here
    // Where the job starts, as the job sees it: the process runtime's cwd (a host path), a
    // container's --workdir (a path inside it). Empty: the runtime's own default.
    std::filesystem::path workdir;
    std::optional<std::int64_t> gpu_index; // the one GPU the job may see; nullopt = none
    std::int64_t cpu_milli = 0;            // 0 = no limit
    std::int64_t memory_mib = 0;           // 0 = no limit
    std::int64_t pids_limit = 4096;
    std::string user = "65534:65534";      // non-root inside the container
    // `user` is the same uid on the host (the worker's own, when it is not root): podman adds
    // --userns=keep-id, which rootless podman needs for that; docker's daemon maps uids as they are.
    bool keep_user_id = false;
    bool read_only_root = true;            // --read-only with a writable tmpfs at /tmp
    bool host_ipc = false;                 // the host's IPC namespace (an MPS client needs it)
};

struct ExitStatus {
    int exit_code = 0;       // 128+N when killed by signal N
    bool oom_killed = false; // only when the runtime reports it
};

// What a runtime can do, asked instead of its name: the agent builds a job's environment, reads
// its exits and recovers after a restart by these, and `gpupool worker --share` refuses a runtime
// that does not isolate jobs unless told otherwise.
struct RuntimeCapabilities {
    // The job runs in its own file system view (only its mounts, at /work, /outputs and /cache), as an
    // unprivileged user, within its limits. false: a bare process that sees the host as the worker does.
    bool isolates = true;
    // A running job is found again after a worker restart (list(), reattach()). false: such attempts
    // are reported lost.
    bool reattaches = true;
    // The job's memory limit is enforced by the runtime, so exit 137 under a limit reads as an
    // out-of-memory kill.
    bool limits_memory = true;
    // Only the job's GPU is passed into it, as device 0 (podman's CDI device, docker's --gpus).
    // false: the job sees every GPU of the host and CUDA_VISIBLE_DEVICES names its own by index.
    bool gpu_as_device_zero = true;
    // ContainerSpec::host_ipc is honoured (what MPS clients need to reach the worker's MPS daemon).
    bool shares_host_ipc = true;
    bool operator==(const RuntimeCapabilities&) const = default;
};

struct FoundContainer {
    std::string name;
    std::map<std::string, std::string> labels;
    bool running = false;
};

// What marks a running job's processes on the host, so that the worker tells them from its owner's
// own GPU use (worker/agent/process_owner.hpp): the engine's full container id, which names the
// container's cgroup, or the session every process of the job shares. Empty / 0 where not known.
struct ProcessMarks {
    std::string container_id; // 64 hex digits
    std::int64_t session = 0;
};

// Which image a job ran, as the engine resolved its reference when asked (the run report's image,
// core/api/run_report.hpp). Both digests are "sha256:" and 64 lowercase hex digits, checked
// (api::is_sha256_digest) before they get here; what the engine did not say, or said wrongly, is
// empty. `unknown` says why neither is known (a runtime that runs no image, an image built here
// with neither), and is empty when one is.
struct ImageIdentity {
    std::string digest{};  // the manifest's digest (a locally built image may have none)
    std::string id{};      // the image's id: the digest of its configuration
    std::string unknown{}; // why neither is known
    bool operator==(const ImageIdentity&) const = default;
};

class ContainerRuntime {
public:
    virtual ~ContainerRuntime() = default;

    virtual std::string name() const = 0; // "podman", "docker", "process", "fake": for people to read
    virtual RuntimeCapabilities capabilities() const = 0;
    // Whether jobs can run at all (the engine is installed and answers: a docker daemon is up);
    // the error says what to fix. Asked before a worker registers.
    virtual Status check() { return {}; }
    // Makes `image` present here before a job that names it starts (pulling it when missing), so the
    // pull is neither billed nor timed as the job's. Unlike the other calls it may be made from any
    // thread (the agent pulls on a thread of its own) and may take long. Failure: code not_found when
    // the image cannot be had, the job's own error (image_pull.hpp: not found, denied, a bad manifest
    // or reference), with the engine's message; anything else (io: an engine or a registry that does
    // not answer) is not the job's. Default (no images: the process runtime): nothing to do.
    virtual Status ensure_image(const std::string& image) {
        (void)image;
        return {};
    }
    virtual Status start(const ContainerSpec& spec) = 0;
    virtual Result<std::optional<ExitStatus>> poll(const std::string& name) = 0;
    // Sends a signal (SIGTERM to ask, SIGKILL to force) to the job's main process (the process
    // runtime: to its whole process group).
    virtual Status signal(const std::string& name, int signo) = 0;
    // Calls `wake` (from any thread) when a job this runtime started may have ended, so the agent
    // polls at once rather than at its next tick. A runtime that cannot tell ignores it (default)
    // and is polled on the tick. `wake` must not call back into the runtime; nullptr unsets it.
    virtual void on_exit(std::function<void()> wake) { (void)wake; }
    virtual Status remove(const std::string& name) = 0;
    // Containers this runtime knows that carry the label gpupool.worker=worker_label.
    virtual Result<std::vector<FoundContainer>> list(const std::string& worker_label) = 0;
    virtual Status reattach(const std::string& name, const std::filesystem::path& log_path) = 0;
    // The marks of a job this runtime started or re-attached (ProcessMarks). Cheap after the first
    // call per job (podman/docker: its id from `run`, else one `inspect`). Default: nothing known.
    virtual Result<ProcessMarks> process_marks(const std::string& name) {
        (void)name;
        return ProcessMarks{};
    }
    // The identity of `image` (a reference as ContainerSpec::image takes it) as the engine resolves
    // it now: the agent asks once per attempt, right after its job started. An Error when the engine
    // cannot be asked (io, its words). Default (no images: the process runtime): neither is known,
    // and `unknown` says why.
    virtual Result<ImageIdentity> image_identity(const std::string& image) {
        (void)image;
        return ImageIdentity{{}, {}, "the " + name() + " runtime runs no image"};
    }
};

// The checks every runtime makes in start() before it runs anything — defence in depth, since the
// agent builds specs from JobSpecs that recipe::job_from_json has already checked. Everywhere: a
// name [A-Za-z0-9][A-Za-z0-9_.-]*, a non-empty argv, environment names that are identifiers, and no
// NUL byte in any argv element or environment value (it would cut the C string short). For a
// container (`container` true) also: a valid image reference (recipe/image_ref.hpp, so it can never
// be read as an engine option), label keys without `=`, a non-empty user, and mount paths without
// `:` or `,` (they would split `-v host:container[:ro]` into other fields or options), and a working
// directory that is empty or an absolute path.
// Failure: an invalid_input Error that names the offending part.
Status check_container_spec(const ContainerSpec& spec, bool container);

// Which runtimes exist and how one is made: runtime_registry.hpp.

} // namespace gpupool::worker
