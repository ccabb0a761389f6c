// JSON form of JobSpecs: what `--json` prints and what the HTTP API carries.
//
// to_json is total. job_from_json validates as strictly as the TOML parser does for the fields a
// JobSpec holds, and names the offending field (`resources.gpu_milli`) on error; it never throws.
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace gpupool::recipe {

nlohmann::ordered_json to_json(const JobSpec& job);
nlohmann::ordered_json to_json(const std::vector<JobSpec>& jobs);
// The same as plain JSON, for request and reply bodies (no dump-and-parse to change kinds).
nlohmann::json to_wire_json(const JobSpec& job);
nlohmann::json to_wire_json(const std::vector<JobSpec>& jobs);

Result<JobSpec> job_from_json(const nlohmann::json& j);

} // namespace gpupool::recipe
