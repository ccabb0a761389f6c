// The runtime registry: the one list of the runtimes a worker can run jobs with, so that
// `gpupool worker` and `gpupool run` offer, check and make the same ones.
//
// Each kind has a name (what --runtime takes), a summary for help texts, whether it isolates jobs
// (known before one is made: `gpupool worker --share` refuses a kind that does not unless told
// otherwise), and a factory. make_runtime() makes one by name:
// - "podman" / "docker" (oci_runtime.hpp): `runtime_args` are extra global flags for the CLI tool
//   (e.g. docker's -H, podman's --root), `run_args` extra flags for every container (e.g.
//   `--network none`); an Error when the tool is not installed.
// - "process" (process_runtime.hpp): isolates nothing; takes no arguments; keeps its records of
//   running jobs in `state_dir` (so that a restart can clean up after a crash).
// Failures are invalid_input Errors naming the field "runtime" (an unknown name, arguments a kind
// does not take), or the factory's own (a missing tool). Thread-safe (the list is constant).
#pragma once

#include "core/util/result.hpp"
#include "worker/runtime/container_runtime.hpp"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpupool::worker {

struct RuntimeArgs {
    std::vector<std::string> runtime_args{};
    std::vector<std::string> run_args{};
    std::filesystem::path state_dir{};
    bool warned = false; // process: the caller has told the user it isolates nothing (no log line)
};

struct RuntimeKind {
    std::string name{};
    std::string summary{};
    bool isolates = true;
    std::function<Result<std::unique_ptr<ContainerRuntime>>(const RuntimeArgs&)> make{};
};

// Every kind, in the order help texts list them: podman, docker, process.
const std::vector<RuntimeKind>& runtime_kinds();
std::vector<std::string> runtime_names();
// nullptr for an unknown name.
const RuntimeKind* find_runtime_kind(const std::string& name);

Result<std::unique_ptr<ContainerRuntime>> make_runtime(const std::string& kind,
                                                       const std::vector<std::string>& runtime_args = {},
                                                       const std::vector<std::string>& run_args = {},
                                                       const std::filesystem::path& state_dir = {});

} // namespace gpupool::worker
