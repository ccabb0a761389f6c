// The engines' JSON answers, read: `TOOL inspect` (the containers a worker finds again after a
// restart) and a container's `.State` (how a job that may not have run ended). Both podman's and
// docker's shapes. Pure functions of their text; a text that does not read is an Error (code io)
// saying what was expected. Used by OciRuntime (oci_runtime.hpp) and unit-tested on their own.
#pragma once

#include "core/util/result.hpp"
#include "worker/runtime/container_runtime.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

// Parses `TOOL inspect` JSON (an array of containers, podman's or docker's shape). Pure.
Result<std::vector<FoundContainer>> parse_inspect_json(std::string_view json);

// A container's state as `TOOL container inspect --format '{{json .State}}'` answers it (podman's
// and docker's shapes). `ran`: it was started (not "created" / "configured"), so its ExitCode is
// the job's. Pure.
struct ContainerState {
    std::string status;
    bool running = false;
    bool ran = false;
    int exit_code = 0;
    bool oom_killed = false;
};
Result<ContainerState> parse_state_json(std::string_view json);

} // namespace gpupool::worker
