// The engines' JSON answers, read: `TOOL inspect` (the containers a worker finds again after a
// restart), a container's `.State` (how a job that may not have run ended) and `TOOL image inspect`
// (which image a job ran, for its run report). Both podman's and docker's shapes. Pure functions of
// their text; a text that does not read is an Error (code io) saying what was expected. Used by
// OciRuntime (oci_runtime.hpp) and unit-tested on their own.
#pragma once

#include "core/util/result.hpp"
#include "worker/runtime/container_runtime.hpp"
#include "worker/runtime/oci_argv.hpp"

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

// The identity of the image `reference` names (fully qualified, recipe::qualified_image) from
// `TOOL image inspect REFERENCE`'s JSON (an array of one image). Every value is the engine's and
// hostile until checked: a digest or id that is not "sha256:" and 64 lowercase hex digits is not
// used. podman: `.Digest` is the manifest's digest, `.Id` the id as bare hex ("sha256:" is put
// before it). docker: the digest is the part after '@' of the `.RepoDigests` entry of the same
// repository as `reference` (else the first entry), `.Id` has its "sha256:" already. When neither
// is known, `unknown` says so. An answer that is not such JSON is an Error (io). Pure.
Result<ImageIdentity> parse_image_identity(OciTool tool, std::string_view json, std::string_view reference);

} // namespace gpupool::worker
