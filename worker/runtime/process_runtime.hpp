// ProcessRuntime: runs a job as a bare child process, for the embedded local mode (`gpupool run`)
// and for tests on machines without podman or docker. It ISOLATES NOTHING: the job runs as the
// worker's user with the worker's view of the file system, no limits, every GPU the driver shows
// (CUDA_VISIBLE_DEVICES is only a hint) — the first one constructed logs a loud warning saying so
// (unless its caller says it has told the user already).
//
// Rules:
// - Each job is its own session and process group (setsid), so signal() and remove() reach the
//   job's children too. Its cwd is spec.workdir, its environment exactly spec.env (plus a default
//   PATH when spec.env has none), stdin is /dev/null, and stdout and stderr share one file
//   descriptor opened O_APPEND on spec.log_path, so their order is kept. No other descriptor, no
//   blocked signal and no ignored one reaches the job. Started with posix_spawn, which copies none
//   of the worker's memory mappings (a fork did, and cost the worker as much CPU as a short job).
// - argv[0] without a slash is looked up in the job's PATH.
// - image, mounts, limits, user and read_only_root are ignored: the agent puts the real host paths
//   in the environment (GPUPOOL_OUTPUT_DIR, ...) for this runtime.
// - poll() reaps with waitpid(WNOHANG); a job killed by signal N exits 128+N. oom_killed is never set.
//   on_exit(): a detached thread per job blocks in waitid(WNOWAIT) and wakes the agent when it exits.
//   When the main process has been reaped, whatever it left running in its group is SIGKILLed (as in a
//   container whose init exits); signal() on an ended job does nothing.
// - list() finds nothing and reattach() fails: a process does not survive the worker in a way this
//   runtime could find again, so the agent reports such attempts as lost.
// - The destructor SIGKILLs and reaps every process group it still owns: no orphans, no zombies.
// - With a `state_dir`, each running job leaves a record there (session_records.hpp: its session id
//   and the leader's start time, a line in one append-only file). A worker killed with SIGKILL runs
//   no destructor; the next ProcessRuntime on the same directory SIGKILLs whatever is left of those
//   sessions (checking the start time, so a reused pid is never hit) before anything else runs.
// Ownership: the runtime owns the children it started until remove(). Not thread-safe (the agent
// uses it from one thread). Failures are Errors: io for a log file or an exec that fails,
// not_found for an unknown name, conflict for a name already in use.
#pragma once

#include "worker/runtime/container_runtime.hpp"
#include "worker/runtime/exit_signal.hpp"
#include "worker/runtime/session_records.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

namespace gpupool::worker {

class ProcessRuntime final : public ContainerRuntime {
public:
    // `warn`: log the loud warning below (once per process); false where the caller has told the
    // user in its own words (`gpupool run`).
    explicit ProcessRuntime(std::filesystem::path state_dir = {}, bool warn = true);
    ~ProcessRuntime() override;
    ProcessRuntime(const ProcessRuntime&) = delete;
    ProcessRuntime& operator=(const ProcessRuntime&) = delete;

    std::string name() const override { return "process"; }
    // Isolates nothing, re-attaches to nothing, limits no memory, hides no GPU.
    RuntimeCapabilities capabilities() const override { return {false, false, false, false, true}; }
    Status start(const ContainerSpec& spec) override;
    Result<std::optional<ExitStatus>> poll(const std::string& name) override;
    Status signal(const std::string& name, int signo) override;
    // A thread per running job waits for its exit (waitid with WNOWAIT: poll() still reaps it).
    void on_exit(std::function<void()> wake) override { m_exits->set(std::move(wake)); }
    Status remove(const std::string& name) override;
    Result<std::vector<FoundContainer>> list(const std::string& worker_label) override;
    Status reattach(const std::string& name, const std::filesystem::path& log_path) override;
    // The job's session (its leader's pid), while it runs.
    Result<ProcessMarks> process_marks(const std::string& name) override;

private:
    struct Job {
        pid_t pid = -1;                 // also the process group id (the child called setsid)
        std::optional<ExitStatus> exit; // set once reaped
    };
    void forget(const std::string& name); // drops the job's record in the state dir
    void watch_exit(pid_t pid);           // see on_exit()
    void reap_leftovers();

    std::filesystem::path m_state_dir;
    SessionRecords m_records;
    std::map<std::string, Job> m_jobs;
    std::shared_ptr<ExitSignal> m_exits = std::make_shared<ExitSignal>();
};

// From the text of /proc/<pid>/stat: the session id (field 6) and the start time (field 22, in
// clock ticks since boot); nullopt when the text is not in that shape. Pure.
struct ProcStat {
    pid_t session = 0;
    unsigned long long start_time = 0;
};
std::optional<ProcStat> parse_proc_stat(const std::string& text);

// The shell convention for a waitpid() status: the exit code, or 128+N when killed by signal N.
int exit_code_from_wait_status(int status);

} // namespace gpupool::worker
