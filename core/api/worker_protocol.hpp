// The rest of the workers' protocol (docs/api.md, "Workers"): registration with an enrollment
// token (POST /v1/workers/register) and its reply, and an attempt's completion
// (POST /v1/attempts/{id}/complete). One struct per message on both sides of the wire; the
// *_from_json readers validate every member once and name the field in their errors. The
// assignment and the heartbeat have their own headers (assignment.hpp, heartbeat.hpp).
#pragma once

#include "core/api/inventory.hpp"
#include "core/api/outcome.hpp"
#include "core/api/owner_terms.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::api {

struct Registration {
    std::string name{}; // the worker's name, as its owner gave it (required)
    Inventory inventory{};
    std::optional<OwnerTerms> terms{}; // what its owner allows (the heartbeats say it again)
};

struct RegistrationReply {
    WorkerId worker_id{};
    std::string token{};                 // the worker's own token, shown once
    std::vector<std::string> warnings{}; // e.g. GPU models missing from the rate catalog
};

// How an attempt ended, as the worker reports it.
struct Completion {
    std::optional<std::int64_t> exit_code{}; // required when the outcome is `exited` (the coordinator checks)
    std::string reason{};
    Outcome outcome = Outcome::exited;
};

Result<Registration> registration_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Registration& r);
Result<RegistrationReply> registration_reply_from_json(const nlohmann::json& j);
nlohmann::json to_json(const RegistrationReply& r);
Result<Completion> completion_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Completion& c);

} // namespace gpupool::api
