// What a worker's owner allows (OwnerTerms) and whether the worker takes work now (SharingState),
// as the worker tells the coordinator in every heartbeat (and at registration). The owner writes
// them in worker.toml (docs/worker.md); the worker enforces them itself as well, so a coordinator
// that ignores them (an older one) still cannot run a job here that the owner did not allow.
//
// owner_terms_from_json validates the terms once where they arrive: bounded lists (at most
// k_max_owner_list entries of at most k_max_owner_entry_bytes each, without control characters),
// errors name the field (`terms.teams[2]`). Empty lists mean "no restriction" on the wire; the
// owner's file refuses an empty list (it would read as "none"). outside_terms() is the one rule
// both sides apply. Pure functions, thread-safe.
#pragma once

#include "core/recipe/image_ref.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::api {

// Whether a worker takes new work, and if not, why. Running jobs go on in every state (a window's
// end hands them back after the drain grace: docs/worker.md).
enum class SharingState : std::uint8_t {
    sharing,        // takes work
    paused,         // its owner paused it (`gpupool worker pause`), maybe until a time
    outside_window, // outside the owner's sharing hours (worker.toml [[share.window]])
    reclaimed,      // the owner is using the GPU(s) itself
};

const char* to_string(SharingState state);
std::optional<SharingState> sharing_state_from_string(std::string_view name);

inline constexpr std::size_t k_max_owner_list = 64;
inline constexpr std::size_t k_max_owner_entry_bytes = 256;

struct OwnerTerms {
    std::int64_t max_runtime_s = 0;        // the longest job (its max_runtime) the owner accepts; 0 = any
    std::vector<std::string> teams{};      // names of the teams whose jobs it takes; empty = every team
    std::vector<std::string> registries{}; // image prefixes it takes ("ghcr.io/", "docker.io/library/"); empty = any
    // For people to read (`admin workers`, `worker status`), not rules the coordinator applies: the
    // worker says itself when it is outside its hours (SharingState) and how many jobs it takes
    // (Inventory::slots). Absent from older workers.
    std::vector<std::string> hours{}; // the sharing windows in the worker's local time ("mon-fri 19:00-08:00
                                      // CET"); empty = at any time
    std::int64_t max_jobs = 0;        // most jobs at once; 0 = no cap
    bool operator==(const OwnerTerms&) const = default;
};

// The terms in words, one item each, always the same five: "hours: mon-fri 19:00-08:00 CET" (or "any
// time"), "teams: a, b" ("every team"), "registries: ghcr.io/" ("any"), "max jobs: 2" ("no cap"),
// "max runtime: 1h" ("any"): for `worker status` and `admin workers`.
std::vector<std::string> describe_terms(const OwnerTerms& terms);

Result<OwnerTerms> owner_terms_from_json(const nlohmann::json& j, const std::string& field = "terms");
nlohmann::json to_json(const OwnerTerms& terms);

// The image with its registry spelled out (core/recipe/image_ref.hpp).
using recipe::qualified_image;

// Why a job (its team's name, image and max_runtime in seconds, 0 = none) is outside the terms,
// in words for the owner and the researcher; nullopt when the terms allow it. A registry prefix
// matches the qualified image (qualified_image) from its start.
std::optional<std::string> outside_terms(const OwnerTerms& terms, std::string_view team, std::string_view image,
                                         std::int64_t max_runtime_s);

} // namespace gpupool::api
