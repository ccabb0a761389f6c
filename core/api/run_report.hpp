// What a worker says it actually ran for one attempt (issue 43, "a manifest for every attempt"): the
// image as its engine resolved it, the GPU and driver it ran on, how the GPU share was held, the
// revision of each cached model it mounted, and its own clock's start and end. The worker sends it
// with the attempt's completion (api::Completion::report); the coordinator keeps it beside the
// attempt and joins it with what it knows itself (the job, the outputs it received) into the
// attempt's manifest (docs/evidence.md).
//
// A worker that cannot say something leaves it empty and, for the image, says why
// (`image_digest_unknown`): nothing is made up. Every string is bounded and checked where it arrives,
// like the inventory's (a worker is not trusted): digests are `sha256:` and 64 lowercase hex digits,
// other text is printable and at most k_max_report_text_bytes.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::api {

inline constexpr std::size_t k_max_report_text_bytes = 256;
inline constexpr std::size_t k_max_report_models = 64;

// One model of the job's `[cache] models` as it was mounted.
struct MountedModel {
    std::string model{};    // "org/name", as the recipe names it
    std::string revision{}; // the commit whose snapshot the job saw; empty: not known
    bool operator==(const MountedModel&) const = default;
};

struct RunReport {
    std::string runtime{};      // the engine: "podman", "docker", "process"
    std::string image_digest{}; // "sha256:..." of the image's manifest, as the engine resolved the tag
    std::string image_id{};     // "sha256:..." of the image's configuration (the engine's image id)
    std::string image_digest_unknown{}; // why neither is known (the process runtime runs no image)
    std::string gpu_model{};    // empty for a CPU-only attempt
    std::string gpu_uuid{};
    std::string driver_version{}; // empty: not known
    std::string cuda_version{};   // the driver's CUDA version; empty: not known
    std::string enforcement{};    // how the GPU share was held: "mps", "watchdog", "none"; empty: no GPU
    std::vector<MountedModel> models{};
    std::int64_t started_at_ms = 0; // the worker's wall clock, Unix ms (0: not known)
    std::int64_t ended_at_ms = 0;
    std::string worker_version{};   // gpupool's version on the worker
    bool operator==(const RunReport&) const = default;
};

// Validates and reads a report; `field` prefixes the field names in errors (`report.image_digest`).
Result<RunReport> run_report_from_json(const nlohmann::json& j, const std::string& field = "report");
nlohmann::json to_json(const RunReport& report);

// Whether `digest` is "sha256:" and 64 lowercase hex digits.
bool is_sha256_digest(std::string_view digest);

} // namespace gpupool::api
