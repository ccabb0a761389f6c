// OciRuntime: runs jobs in podman or docker containers by driving the engine's CLI — one
// implementation for both, parameterised by the tool and its global flags (docker's -H, podman's
// --root ...). Only argv vectors are executed, never shell strings.
//
// Isolation (build_run_argv, a pure function): --init (catatonit / docker-init reap zombies and pass
// signals on), --cap-drop=ALL, --security-opt no-new-privileges, --user spec.user, --pids-limit,
// --memory with an equal --memory-swap (no swap), --cpus, --ulimit nofile/nproc 4096:4096 (passed per
// run rather than trusted to a containers.conf: docker has none), --read-only with a tmpfs at /tmp,
// only spec.mounts bind-mounted, and only spec.gpu_index visible (podman: CDI device
// nvidia.com/gpu=N; docker: --gpus device=N; CUDA_VISIBLE_DEVICES comes from the agent's env).
// The network is the engine's default on purpose — jobs download models and data; OciConfig::run_args
// can add e.g. `--network none` (the tests do: their dockerd has no bridge). Mount sources must be
// readable (writable, for outputs) by spec.user; the agent prepares them. The engine's options end
// with `--` before the image, so neither the image nor the job's argv can ever be read as a flag;
// start() also refuses a spec that fails check_container_spec (an invalid image reference among
// others) before it runs anything.
//
// Logs: after `run -d`, a follower `TOOL logs -f NAME` writes the container's stdout and stderr to one
// file descriptor opened O_APPEND on spec.log_path. reattach() truncates the file and starts a new
// follower: `logs` replays from the start, so the agent, which ships by offset, sees identical bytes
// again. Exits: a `TOOL wait NAME` child per container; poll() only checks it with waitpid(WNOHANG),
// and once it has ended runs one `inspect` for the exit code and OOMKilled, then reports the exit only
// when the log follower has drained (exited) or OciConfig::drain_bound has passed — so the log file is
// complete when the agent sees the exit. poll() itself never waits.
//
// Ownership: the runtime owns its follower and waiter children (killed and reaped on remove() and in
// the destructor); containers belong to the engine and outlive the runtime until remove(). Not
// thread-safe (the agent's one thread). Failures are Errors with code io carrying the tool's stderr;
// a missing tool is an io Error that says so; an unknown name is not_found; a name already started by
// this runtime is conflict. A failed start may leave a created container behind: remove() cleans up.
// `run` is started in the log file's directory: podman's conmon inherits that cwd and drops an empty
// `oom` marker there when the job is OOM-killed (it would otherwise litter the worker's cwd).
#pragma once

#include "worker/runtime/container_runtime.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

enum class OciTool { podman, docker };

const char* to_string(OciTool tool);

struct OciConfig {
    OciTool tool = OciTool::podman;
    std::string program;                         // the executable; empty = "podman" / "docker" on PATH
    std::vector<std::string> global_args;        // before the subcommand, e.g. {"-H", "unix:///run/docker.sock"}
    std::vector<std::string> run_args;           // extra `run` flags before the image, e.g. {"--network", "none"}
    std::chrono::milliseconds drain_bound{5000}; // after an exit, how long poll() waits for the follower
    std::chrono::seconds command_bound{120};     // the longest a CLI call (run, inspect, rm...) may take
};

// The arguments after the tool and its global flags: `run -d --name ... -- IMAGE argv...`. Pure; it
// checks nothing (start() does), but the `--` keeps even an unchecked image out of option position.
std::vector<std::string> build_run_argv(OciTool tool, const ContainerSpec& spec,
                                        const std::vector<std::string>& extra_run_args = {});

// Parses `TOOL inspect` JSON (an array of containers, podman's or docker's shape). Pure.
Result<std::vector<FoundContainer>> parse_inspect_json(std::string_view json);

class OciRuntime final : public ContainerRuntime {
public:
    explicit OciRuntime(OciConfig config);
    ~OciRuntime() override;
    OciRuntime(const OciRuntime&) = delete;
    OciRuntime& operator=(const OciRuntime&) = delete;

    std::string name() const override { return to_string(m_config.tool); }
    RuntimeCapabilities capabilities() const override { return {}; } // isolates, re-attaches, limits, one GPU
    Status check() override;
    Status start(const ContainerSpec& spec) override;
    Result<std::optional<ExitStatus>> poll(const std::string& name) override;
    Status signal(const std::string& name, int signo) override;
    Status remove(const std::string& name) override;
    Result<std::vector<FoundContainer>> list(const std::string& worker_label) override;
    Status reattach(const std::string& name, const std::filesystem::path& log_path) override;
    // The container's full id: from `run`'s answer, else asked once with `inspect` (then kept).
    Result<ProcessMarks> process_marks(const std::string& name) override;

    // The missing-tool Error when the program is not found; empty when it is.
    std::optional<Error> missing_tool() const { return m_missing; }

private:
    struct Tracked;
    struct ToolOutput {
        int exit_code = -1;
        std::string out;
        std::string err;
    };

    Result<ToolOutput> run_tool(const std::vector<std::string>& args, const std::filesystem::path& cwd = {}) const;
    Status follow(const std::string& name, const std::filesystem::path& log_path, bool truncate);
    Result<ExitStatus> inspect_exit(const std::string& name, bool& running) const;
    Error tool_error(const std::string& what, const ToolOutput& out) const;

    OciConfig m_config;
    std::string m_program; // resolved executable
    std::optional<Error> m_missing;
    std::map<std::string, std::unique_ptr<Tracked>> m_tracked;
};

} // namespace gpupool::worker
