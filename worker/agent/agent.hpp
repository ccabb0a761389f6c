// Agent: the worker process — registers with the coordinator, takes assignments, runs them through
// a ContainerRuntime, streams their logs, uploads their outputs and reports how they ended.
//
// Everything goes out from the worker (register, long-poll, heartbeat, logs, outputs, complete):
// a machine behind NAT needs no open port. Threads: one poll thread long-polls for assignments
// and hands them over; the agent thread (the caller of run()) owns all other state — runtime calls,
// the spool, heartbeats and deliveries — in a loop that never blocks on a job.
//
// The agent is a façade over its parts, each with its own contract and tests: AttemptTable
// (attempt_table.hpp: the attempts it holds, the only place their lifecycle changes), JobControl
// (job_control.hpp: starting, watching, stopping and dropping their jobs through the runtime), Spool
// (spool.hpp: attempt directories, state.json, recovery after a restart), Delivery (delivery.hpp:
// everything sent to the coordinator, and its backoff), GpuWatch (gpu_watch.hpp: probe, memory
// watchdog, health), Drain (drain.hpp: when a leaving worker stops its jobs and returns) and
// job_container.hpp (what a job sees). Time comes from a util::Clock and the coordinator is
// reached through CoordinatorLink (coordinator_link.hpp), both injectable (AgentDeps) for tests.
//
// Rules:
// - The spool is the truth. Each attempt has a directory under <work_dir>/attempts/<id>/ with the
//   assignment, the job's log file (appended by the runtime), its outputs, and state.json (what has
//   been delivered). A job's bytes are shipped by offset, so a resend is harmless (the coordinator
//   skips bytes it has) and nothing is lost while the coordinator is away.
// - When the coordinator is unreachable (or answers 5xx) the agent keeps its jobs running, keeps
//   enforcing their limits, and retries with exponential backoff and jitter; once it answers, logs,
//   outputs and completions are delivered in order (all logs, then outputs, then complete).
// - A TLS verification failure (net::is_tls_verification_failure: a wrong --ca-cert) is not an
//   outage: run() returns it at once, whether registering or running, instead of retrying.
// - A 409 means the attempt is no longer current (cancelled, lost, re-run elsewhere): its
//   container is stopped and removed and its spool dropped; late bytes are never forced through.
// - A heartbeat's `stop` list is obeyed at once: SIGTERM, then SIGKILL after stop_grace (or the job's
//   `[checkpoint] grace`, when longer: time to save its progress).
//   max_runtime is enforced locally too (SIGTERM, runtime_grace, SIGKILL).
// - After a restart the agent re-attaches to its still-running containers (runtime labels); an
//   attempt it cannot re-attach is reported as a worker fault, so the job runs again elsewhere.
// - A fractional GPU job's memory share is capped by MPS with `--mps` (the worker runs its own MPS
//   daemon, mps_daemon.hpp); a watchdog (memory_watchdog.hpp) stops a job whose processes hold more
//   than its share, with or without MPS. The inventory says which mechanism each GPU has.
// - A GPU job that holds its share without using the GPU for its idle timeout (the assignment's) is
//   warned in its log, then stopped and charged for the time it held (idle_guard.hpp).
// - The models a job's recipe names are downloaded into the worker's model cache before it starts
//   (model_prefetch.hpp; waiting_room.hpp), not billed; jobs read the cache, never write it.
// - A process the worker did not start on a shared GPU (the owner's own work: reclaim.hpp) reclaims
//   it at once: no new work there (the heartbeat's reclaimed_gpus), its jobs get reclaim_grace
//   (SIGTERM, then SIGKILL) and go back to the queue as owner_preempted; after reclaim_quiet without
//   the owner's processes it is offered again. The owner is told each change once (on_event).
// - The owner's terms (OwnerPolicy): paused, reclaimed or outside its sharing window, the worker
//   takes no new work (what arrives is handed back as owner_preempted); when a window ends, running
//   jobs get the drain grace and are then handed back the same way; an assignment outside the terms
//   (a GPU not shared, a team, registry or max_runtime not allowed) is handed back unstarted. The
//   owner controls it over <work_dir>/control.sock (status, pause, resume, reload; SIGHUP reloads).
// - drain() (SIGTERM): no new work; running jobs get drain_grace to finish, then are stopped and
//   handed back to the queue (outcome owner_preempted); run() returns once everything is delivered
//   (or after a bounded wait if the coordinator stays away, leaving the spool for the next start).
//   It ends any retry wait at once; before registration succeeded, run() returns without error.
#pragma once

#include "core/util/clock.hpp"
#include "worker/agent/backoff.hpp"
#include "worker/agent/coordinator_link.hpp"
#include "worker/agent/identity.hpp" // worker.json (read_stored_identity)
#include "worker/agent/worker_api.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/gpu/mps_daemon.hpp" // MpsCompute
#include "worker/owner/owner_config.hpp"
#include "worker/owner/pause_file.hpp" // the owner's pause (pause_sharing, resume_sharing)
#include "worker/runtime/container_runtime.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace gpupool::worker {

struct AgentOptions {
    std::string coordinator_url;
    std::string token;   // an enrollment token (first start) or the worker's own token
    std::string ca_cert;
    std::string identity_key; // which pool worker.json belongs to (default: coordinator_url)
    std::string name;    // defaults to the host name
    std::filesystem::path work_dir;
    // <cache_dir>/models: the model-weight cache the worker fills (read-only to jobs, at /cache);
    // <cache_dir>/teams/<team>: each team's own writable cache (at /team-cache).
    std::filesystem::path cache_dir;
    std::int64_t model_cache_max_bytes = 0; // least recently used models go past this (0: no cap)
    std::string hub_endpoint; // where models come from (default: $HF_ENDPOINT, else https://huggingface.co)
    std::string hub_token;    // for gated models (the owner's worker.toml `hf_token_file`)
    bool mps = false;         // run fractional GPU jobs as clients of the worker's own MPS daemon
    // How much of the GPU's compute those clients may use (mps_daemon.hpp): the ContainerContext's to
    // carry to mps_client_env.
    MpsCompute mps_compute = k_default_mps_compute;
    int slots = 0;       // stop asking for work while this many attempts run; 0 = no cap
    std::int64_t cpu_milli = 0;  // advertised; 0 = all cores
    std::int64_t memory_mib = 0; // advertised; 0 = all memory
    std::chrono::milliseconds heartbeat{5'000};      // at most; lease_ms / 3 when that is shorter
    std::chrono::milliseconds poll_wait{20'000};
    std::chrono::milliseconds stop_grace{1'500};     // SIGTERM -> SIGKILL for stop orders
    std::chrono::milliseconds runtime_grace{10'000}; // SIGTERM -> SIGKILL past max_runtime
    std::chrono::milliseconds drain_grace{300'000};  // running jobs may finish within this on drain
    std::chrono::milliseconds log_flush{500};        // ship pending log bytes at least this often
    std::chrono::milliseconds backoff_initial{500};
    std::chrono::milliseconds backoff_max{30'000};
    std::chrono::milliseconds tick{100};
    std::chrono::milliseconds gpu_watch{2'000}; // GPU memory watchdog period (where MPS does not cap)
    std::chrono::milliseconds gpu_health{15'000}; // how often the driver is asked whether each GPU is sound
    std::chrono::milliseconds idle_watch{30'000}; // how often the idle guard looks at what GPU jobs do
    std::chrono::milliseconds reclaim_grace{30'000};  // the owner uses a GPU: its jobs' SIGTERM -> SIGKILL
    std::chrono::milliseconds reclaim_quiet{600'000}; // free of the owner's processes this long: shared again
    std::filesystem::path proc_root = "/proc";        // where GPU processes are attributed (tests: a fake tree)
    // Longest an assignment waits for jobs still stopping on its GPU (under the coordinator's lease).
    std::chrono::milliseconds gpu_wait_max{20'000};
    // A job whose container the engine cannot report on for this long (errors other than "no such
    // container", which ends it at once) is killed and reported as a worker fault.
    std::chrono::milliseconds engine_unanswered_max{60'000};
    std::chrono::milliseconds give_up_after_drain{60'000}; // undeliverable results stay spooled
    // The owner's terms (worker/owner/owner_policy.hpp): `share` as in force at start (the flags over
    // worker.toml), `share_flags` the flags alone (a reload keeps them over the file), `config_file`
    // the worker.toml a reload re-reads (empty: none). Unset parts of `share` leave slots, cpu_milli,
    // memory_mib and drain_grace above in force.
    ShareSettings share{};
    ShareSettings share_flags{};
    std::filesystem::path config_file{};
    bool control_socket = true; // answer the owner on <work_dir>/control.sock (worker/owner/control_socket.hpp)
    // What the machine's owner is told, one line each, whatever the log level: what it offers once
    // registered, and each job's start and end (team, job, share, outcome). Text from the pool is
    // passed as it came; the receiver escapes it. Called on the agent's thread.
    std::function<void(const std::string&)> on_event;
};

// The stored identity (worker.json): identity.hpp.

// What the agent talks to besides its runtime and GPUs. Tests pass a ManualClock and fake links;
// the defaults are a SteadyClock (the system clock for wall time) and HTTP(S) links to AgentOptions::coordinator_url. The clock, when
// given, must outlive the agent.
struct AgentDeps {
    const util::Clock* clock = nullptr;
    LinkFactory links{};
    const util::Clock* wall_clock = nullptr; // Unix ms, for the sharing windows and timed pauses
};

class Agent {
public:
    Agent(AgentOptions options, ContainerRuntime& runtime, GpuProbe& gpus, AgentDeps deps = {});
    ~Agent();
    Agent(const Agent&) = delete;
    Agent& operator=(const Agent&) = delete;

    // Registers (or reuses the identity in <work_dir>/worker.json), re-attaches to what a previous
    // run left, then works until drain() completes or stop() is called. Returns an Error only when
    // the worker cannot start (bad token, unusable work dir, broken runtime).
    Status run();
    // Graceful: no new work; finish or hand back running jobs; deliver; return from run().
    void drain();
    // A drain that does not wait: running jobs are stopped now (SIGTERM, stop_grace, SIGKILL) and
    // handed back to the queue; run() returns once that is delivered (or after a few seconds
    // without the coordinator: the results stay spooled).
    void drain_now();
    // Re-reads worker.toml (AgentOptions::config_file) on the agent's thread, as `gpupool worker
    // reload` does; the owner is told the outcome. Safe from any thread (SIGHUP's).
    void reload();
    // Immediate: return from run() as soon as possible, leaving jobs running and the spool intact
    // (the next start re-attaches).
    void stop();

    std::int64_t worker_id() const { return m_worker_id.load(); }

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    std::atomic<std::int64_t> m_worker_id{0};
};

} // namespace gpupool::worker
