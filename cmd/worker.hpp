// `gpupool worker`: share this machine with a pool (`--share`), or show what it would offer; and
// its subcommands `status`, `pause`, `resume`. register_worker(Cli&) (cli.hpp) declares the options;
// the run_* functions do the work and return the exit code (k_exit_ok, k_exit_failed, k_exit_usage),
// so tests call them without argv. run_worker with --share blocks until the worker is drained by a
// signal (SIGINT/SIGTERM: drain; again: stop jobs now; a third time: leave at once).
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
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
    std::int64_t status_limit = 50;
    std::string pause_why{}; // worker pause --why
};

int run_worker(const GlobalOptions& global, WorkerCmdOptions o);
// `gpupool worker status`: the owner's view with the identity the machine already has.
int run_worker_status(const GlobalOptions& global, const WorkerCmdOptions& o);
// `gpupool worker pause` (pause true) / `resume`.
int run_worker_pause(const GlobalOptions& global, const WorkerCmdOptions& o, bool pause);

} // namespace gpupool::cmd
