// run_bounded: runs a short-lived tool of the driver's (nvidia-smi, nvidia-cuda-mps-control) and
// waits for it at most a given time, because a wedged GPU or daemon can leave such a tool hanging
// and the worker must go on heartbeating.
//
// Rules:
// - The tool inherits the worker's environment, less the variables named with one of
//   `drop_prefixes`, with `env` laid over it; its stdin reads `input`,
//   its stdout and stderr go to memory files (never pipes): a tool that leaves a daemon behind
//   holding them (`nvidia-cuda-mps-control -d`) cannot block the read.
// - Every descriptor of the worker's above stderr is closed in the tool (sockets, databases).
// - The tool runs in its own process group. Past `timeout` the whole group is SIGKILLed and the
//   tool reaped, waiting at most 2 s more for that (a tool stuck inside the driver dies only when it
//   leaves it, and is then left behind rather than waited for); the answer says timed_out and holds
//   what the tool had written.
// - A tool that cannot be started at all is an Error (code io, naming the program and the reason);
//   a tool that ran and failed is not: its exit code is in the answer, for the caller to judge.
// Stateless; thread-safe (each call has its own child and files).
#pragma once

#include "core/util/result.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpupool::worker {

struct BoundedRunOptions {
    std::map<std::string, std::string> env; // laid over the worker's own environment
    std::vector<std::string> drop_prefixes; // e.g. "GPUPOOL_": the worker's tokens stay with the worker
    std::string input;                      // the tool's whole stdin
    std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

struct BoundedRun {
    bool timed_out = false;
    int exit_code = -1; // the tool's exit status; -1 when it timed out
    std::string out;
    std::string err;
};

Result<BoundedRun> run_bounded(const std::filesystem::path& program, const std::vector<std::string>& args,
                               const BoundedRunOptions& options);

} // namespace gpupool::worker
