// What the coordinator hands a worker to run (the long poll's `assignments`, docs/api.md): one
// attempt of one job on one GPU share. One struct on both sides of the wire: the coordinator builds
// it from its state, to_json writes it, and the worker reads it with assignment_from_json, which
// validates every member once and names the field in its errors (`assignments[2].spec.image`). The
// worker also keeps it in its spool (assignment.json), read back the same way.
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace gpupool::api {

// The longest team name an assignment may carry (the worker prints it in the owner's log).
inline constexpr std::size_t k_max_team_name_bytes = 256;

struct Assignment {
    AttemptId attempt{};
    JobId job{};
    std::int64_t attempt_number = 1; // 1 for the first attempt of the job
    recipe::JobSpec spec{};
    std::int64_t gpu_index = -1; // -1: no GPU
    std::int64_t gpu_milli = 0;  // the share of that GPU, 0..1000 (0: sized by GPU memory)
    TeamId team{};               // whose job (0 from a coordinator that does not say): its own writable cache
    std::string team_name{};     // for the owner's log (empty when not said)
    // Seconds the job may hold its GPU share without using the GPU before the worker stops it (the
    // recipe's `idle_timeout`, else the pool's default); 0 = never.
    std::int64_t idle_timeout_s = 0;
};

// Validates and reads one assignment; `field` names it in errors. Absent members take the defaults
// above (attempt, job and spec are required); unknown members are ignored.
Result<Assignment> assignment_from_json(const nlohmann::json& j, const std::string& field = "assignment");
nlohmann::json to_json(const Assignment& a);

} // namespace gpupool::api
