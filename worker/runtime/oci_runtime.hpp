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
// the image goes there fully qualified (recipe::qualified_image, what the owner's registries were
// checked against: `busybox` runs as docker.io/library/busybox:latest, never a short-name search);
// start() also refuses a spec that fails check_container_spec (an invalid image reference among
// others) before it runs anything.
//
// Logs and exits, for a job started here: one foreground `TOOL run --name NAME ...` child per job,
// its stdout and stderr on one descriptor opened O_APPEND on spec.log_path, so the engine copies the
// container's output straight into the log file and the child's exit is the container's: when it
// has ended, the log is complete. Its exit status is the job's, except where it may be the engine's
// own (125: the engine failed, 126: the command could not be invoked, 127: not found) — then one
// `inspect` tells: a container that ran and exited with that code is the job's exit; one that never
// ran (or is not there: a missing image) is the engine's failure, and poll() answers not_found with
// the engine's last error line (it is also in the log). A command missing in the image is the job's
// 127 (--init started, then could not exec it). After 137, one `inspect` reads OOMKilled. A
// child that ends without an exit status of its own (killed, or reaped by someone else) leaves the
// container's fate open: the runtime then follows it as after a restart (below).
// The child runs in its own process group with --sig-proxy=false (a Ctrl-C or a systemd stop meant
// for the worker never reaches a job: signals go through signal() only) and dies with the worker
// (PR_SET_PDEATHSIG), which leaves the container running, to be found again.
// After a worker restart, reattach() truncates the log and starts a follower `TOOL logs -f NAME` and a
// `TOOL wait NAME` child: `logs` replays from the start, so the agent, which ships by offset, sees the
// same lines again. poll() then runs one `inspect` once the waiter has ended and reports the exit once
// the follower has drained (exited) or OciConfig::drain_bound has passed. (Across stdout and stderr
// the order is the engine's, in both ways: it reads two pipes.)
// on_exit(): a thread per child watches its pidfd and wakes the agent when the child exits; only the
// agent's thread touches the Boost.Process children (poll() reaps them).
// remove(): a job whose exit poll() has reported is removed off the agent's thread: a remover thread
// collects names for OciConfig::remove_linger and removes them with one `rm -f` call (pending ones
// are removed before the destructor returns). Any other container (running, not started here) is
// removed at once: the run child is waited for (the first `rm -f` may come before the container
// exists; it is repeated until the child ends) so no job keeps running.
//
// Ownership: the runtime owns its children (run, follower, waiter: killed with SIGKILL and reaped on
// remove() and in the destructor, which leaves the containers running); containers belong to the
// engine and outlive the runtime until remove(). Not thread-safe (the agent's one thread) except
// ensure_image() (`image inspect`, then `pull` within pull_bound: any thread, as its contract says); its own
// threads only wait on pidfds and remove finished containers. Failures are Errors with code io
// carrying the tool's stderr; a missing tool is an io Error that says so; an unknown name is
// not_found; a name already started by this runtime is conflict. A failed start may leave a created
// container behind: remove() cleans up.
// `run` is started in the log file's directory: podman's conmon inherits that cwd and drops an empty
// `oom` marker there when the job is OOM-killed (it would otherwise litter the worker's cwd).
#pragma once

#include "worker/runtime/container_runtime.hpp"
#include "worker/runtime/oci_argv.hpp"
#include "worker/runtime/oci_json.hpp"
#include "worker/runtime/exit_signal.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

struct OciConfig {
    OciTool tool = OciTool::podman;
    std::string program;                         // the executable; empty = "podman" / "docker" on PATH
    std::vector<std::string> global_args;        // before the subcommand, e.g. {"-H", "unix:///run/docker.sock"}
    std::vector<std::string> run_args;           // extra `run` flags before the image, e.g. {"--network", "none"}
    std::chrono::milliseconds drain_bound{5000}; // after an exit, how long poll() waits for the follower
    std::chrono::seconds command_bound{120};     // the longest a CLI call (run, inspect, rm...) may take
    std::chrono::seconds pull_bound{1800};       // the longest ensure_image() may pull one image
    std::chrono::milliseconds remove_linger{1000}; // finished containers wait this long to be removed together
};

class OciRuntime final : public ContainerRuntime {
public:
    explicit OciRuntime(OciConfig config);
    ~OciRuntime() override;
    OciRuntime(const OciRuntime&) = delete;
    OciRuntime& operator=(const OciRuntime&) = delete;

    std::string name() const override { return to_string(m_config.tool); }
    RuntimeCapabilities capabilities() const override { return {}; } // isolates, re-attaches, limits, one GPU
    Status check() override;
    Status ensure_image(const std::string& image) override;
    Status start(const ContainerSpec& spec) override;
    Result<std::optional<ExitStatus>> poll(const std::string& name) override;
    Status signal(const std::string& name, int signo) override;
    // A thread per child (run, or a re-attached waiter and follower) waits on its pidfd.
    void on_exit(std::function<void()> wake) override { m_exits->set(std::move(wake)); }
    Status remove(const std::string& name) override;
    Result<std::vector<FoundContainer>> list(const std::string& worker_label) override;
    Status reattach(const std::string& name, const std::filesystem::path& log_path) override;
    // The container's full id, asked once with `inspect` (then kept). Like signal(), it waits up to 3 s
    // for a container its run child is still creating.
    Result<ProcessMarks> process_marks(const std::string& name) override;
    // `image inspect` of the image as `run` names it (recipe::qualified_image), read by
    // parse_image_identity (oci_json.hpp): nothing the engine says is used unchecked.
    Result<ImageIdentity> image_identity(const std::string& image) override;

    // The missing-tool Error when the program is not found; empty when it is.
    std::optional<Error> missing_tool() const { return m_missing; }

private:
    struct Tracked;
    class Remover;
    struct ToolOutput {
        int exit_code = -1;
        std::string out;
        std::string err;
    };

    // Thread-safe (its own child and files). `bound`: command_bound when 0.
    Result<ToolOutput> run_tool(const std::vector<std::string>& args, const std::filesystem::path& cwd = {},
                                std::chrono::seconds bound = std::chrono::seconds(0)) const;
    Status follow(const std::string& name, Tracked& t, bool truncate); // logs -f, then wait_for_exit
    Status wait_for_exit(const std::string& name, Tracked& t);          // a `TOOL wait NAME` child
    Result<ContainerState> inspect_state(const std::string& name) const;
    Result<std::optional<ExitStatus>> poll_run(const std::string& name, Tracked& t);
    Result<std::optional<ExitStatus>> poll_follower(const std::string& name, Tracked& t);
    Status remove_now(const std::string& name, std::unique_ptr<Tracked> t);
    void watch_exit(int pid);
    Error tool_error(const std::string& what, const ToolOutput& out) const;
    std::vector<std::string> rm_args(const std::vector<std::string>& names) const; // rm -f [-t 0] names

    OciConfig m_config;
    std::string m_program; // resolved executable
    std::optional<Error> m_missing;
    std::map<std::string, std::unique_ptr<Tracked>> m_tracked;
    std::shared_ptr<ExitSignal> m_exits = std::make_shared<ExitSignal>();
    std::unique_ptr<Remover> m_remover; // last: it uses run_tool until it has gone
};

} // namespace gpupool::worker
