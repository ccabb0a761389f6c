// What differs between two attempts' manifests (docs/evidence.md), for `gpupool diff JOB JOB`: the
// things that decide a result (image digest, command, environment, sweep parameters, inputs, recipe,
// models and their revisions, resources, the GPU, driver and CUDA versions, how the share was held,
// the runtime, the exit) and the outputs file by file. Ids, times and which worker ran it are not
// differences: they always differ between two runs. Pure; thread-safe.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gpupool::cmd {

struct ManifestDifference {
    std::string field; // "image.digest", "env.SEED", "outputs/results.json"
    std::string a;     // as the first manifest says it ("(absent)" when it does not)
    std::string b;
    bool operator==(const ManifestDifference&) const = default;
};

// The member of a manifest at a dotted path ("outputs.tree_sha256"); null when any step is absent
// or not an object.
const nlohmann::json& manifest_member(const nlohmann::json& manifest, std::string_view path);

// In field order, the outputs last, each file once (sorted by path). Missing members read as absent;
// neither manifest is trusted to have any given shape.
std::vector<ManifestDifference> diff_manifests(const nlohmann::json& a, const nlohmann::json& b);

} // namespace gpupool::cmd
