#include "core/api/outcome.hpp"

#include <array>
#include <utility>

namespace gpupool::api {

namespace {

constexpr std::array<std::pair<Outcome, std::string_view>, 4> k_names{{
    {Outcome::exited, "exited"},
    {Outcome::worker_fault, "worker_fault"},
    {Outcome::owner_preempted, "owner_preempted"},
    {Outcome::image_unavailable, "image_unavailable"},
}};

} // namespace

const char* to_string(Outcome outcome) {
    for (const auto& [o, name] : k_names) {
        if (o == outcome) {
            return name.data();
        }
    }
    return "?";
}

std::optional<Outcome> outcome_from_string(std::string_view name) {
    for (const auto& [o, n] : k_names) {
        if (n == name) {
            return o;
        }
    }
    return std::nullopt;
}

} // namespace gpupool::api
