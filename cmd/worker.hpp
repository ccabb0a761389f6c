// `gpupool worker`: share this machine with a pool (`--share`), or show what it would offer; and
// its subcommands `status`, `pause`, `resume`, `reload` (cmd/worker_owner.cpp: they ask the running
// worker over its control socket, and fall back to the work dir's files when none runs). Settings
// come from the flags, then worker.toml (--config, or ~/.config/gpupool/worker.toml when it exists),
// then the defaults. register_worker(Cli&) (cli.hpp) declares the options;
// the run_* functions do the work and return the exit code (k_exit_ok, k_exit_failed, k_exit_usage),
// so tests call them without argv. run_worker with --share blocks until the worker is drained by a
// signal (SIGINT/SIGTERM: drain; again: stop jobs now; a third time: leave at once).
#pragma once

#include "cmd/cli.hpp"

#include "worker/owner/owner_config.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpupool::cmd {

struct WorkerCmdOptions {
    bool share = false;
    std::string coordinator{};
    std::string runtime = "podman";
    bool unsafe_process_runtime = false;
    std::string work_dir{};
    std::string cache_dir{};
    std::string name{};
    int slots = 0;
    std::vector<std::string> runtime_args{};
    std::vector<std::string> container_args{};
    std::string drain_grace = "5m";
    std::string reclaim_grace = "30s"; // the owner uses a GPU: how long its jobs get to stop
    std::string reclaim_quiet = "10m"; // free of the owner's processes this long: shared again
    std::int64_t heartbeat_ms = 5000;
    std::int64_t poll_wait_ms = 10'000;
    std::int64_t stop_grace_ms = 1500;
    std::int64_t cpu_milli = 0;
    std::int64_t memory_mib = 0;
    std::string pause_why{}; // worker pause --why
    std::string pause_for{}; // worker pause --for 2h
    bool pause_now = false;  // worker pause --now
    std::string config{};    // worker.toml (--config)
    bool mps = false;                 // --mps: the worker's own MPS daemon for fractional jobs
    std::string mps_compute{};        // --mps-compute throughput|isolate ("": worker.toml's, else throughput)
    std::string model_cache_max{};    // --model-cache-max 200GiB ("" : no cap)
    std::string hf_token_file{};      // --hf-token-file: a Hugging Face token for gated models
    std::string hf_endpoint{};        // --hf-endpoint: a hub mirror
    std::set<std::string> given{}; // the flags given on the command line ("--slots"): they win over worker.toml
};

// worker.toml as --config names it (must exist) or at its default path (when it exists); nullopt
// when there is none.
Result<std::optional<worker::OwnerConfig>> load_worker_toml(const WorkerCmdOptions& o);
// The work dir: --work-dir, else worker.toml's [pool] work_dir, else ~/.local/share/gpupool/worker.
std::filesystem::path worker_work_dir(const WorkerCmdOptions& o, const std::optional<worker::OwnerConfig>& cfg);

int run_worker(const GlobalOptions& global, WorkerCmdOptions o);
// `gpupool worker status`: the owner's view with the identity the machine already has.
int run_worker_status(const GlobalOptions& global, const WorkerCmdOptions& o);
// `gpupool worker pause` (pause true) / `resume`.
int run_worker_pause(const GlobalOptions& global, const WorkerCmdOptions& o, bool pause);
// `gpupool worker reload`: the running worker re-reads worker.toml.
int run_worker_reload(const GlobalOptions& global, const WorkerCmdOptions& o);

} // namespace gpupool::cmd
