// What podman or docker is told to run a job: `TOOL run --name NAME ... -- IMAGE argv...`, the
// isolation every job gets (docs/architecture.md, "Worker: runtimes"), as a pure function of its
// ContainerSpec, so that each flag is unit-tested (tests/worker/runtime/test_oci_argv.cpp) without
// an engine. OciRuntime (oci_runtime.hpp) runs what it builds. Stateless, thread-safe.
#pragma once

#include "worker/runtime/container_runtime.hpp"

#include <string>
#include <vector>

namespace gpupool::worker {

enum class OciTool { podman, docker };

const char* to_string(OciTool tool);

// The arguments after the tool and its global flags: `run --name ... -- IMAGE argv...` (foreground,
// --sig-proxy=false). Pure; it checks nothing (start() does), but the `--` keeps even an unchecked
// image out of option position.
std::vector<std::string> build_run_argv(OciTool tool, const ContainerSpec& spec,
                                        const std::vector<std::string>& extra_run_args = {});

} // namespace gpupool::worker
