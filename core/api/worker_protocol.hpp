// The rest of the workers' protocol (docs/api.md, "Workers"): registration with an enrollment
// token (POST /v1/workers/register) and its reply, and an attempt's completion
// (POST /v1/attempts/{id}/complete). One struct per message on both sides of the wire; the
// *_from_json readers validate every member once and name the field in their errors: a registration's
// inventory by inventory.hpp's rules, its terms by owner_terms.hpp's, its name as at most
// k_max_worker_name_bytes (what the CLI prints of it is escaped: cmd/remote.hpp). The assignment and
// the heartbeat have their own headers (assignment.hpp, heartbeat.hpp).
#pragma once

#include "core/api/inventory.hpp"
#include "core/api/outcome.hpp"
#include "core/api/owner_terms.hpp"
#include "core/api/run_report.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::api {

// The longest worker name (the coordinator's rule too).
inline constexpr std::size_t k_max_worker_name_bytes = 128;

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
    // What the worker ran (run_report.hpp), for the attempt's manifest; nullopt from a worker that
    // does not say (an older one).
    std::optional<RunReport> report{};
};

Result<Registration> registration_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Registration& r);
Result<RegistrationReply> registration_reply_from_json(const nlohmann::json& j);
nlohmann::json to_json(const RegistrationReply& r);
Result<Completion> completion_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Completion& c);

// Several attempts' ends in one request (POST /v1/attempts/complete, body {"completions": [...]}),
// each a Completion with its `attempt`: a worker whose jobs end together reports them at once and
// the coordinator commits them in one transaction. At most k_max_batch_completions; an attempt
// named twice is refused (`completions[i].attempt`).
inline constexpr std::size_t k_max_batch_completions = 256;
struct AttemptEnd {
    AttemptId attempt{};
    Completion completion{};
};
Result<std::vector<AttemptEnd>> attempt_ends_from_json(const nlohmann::json& j);
nlohmann::json to_json(const std::vector<AttemptEnd>& ends);

// The answer, one per attempt in the request's order: taken (no error), or why not, as the single
// route would have answered it (`status` is that HTTP status; 409 = no longer current).
struct EndAnswer {
    AttemptId attempt{};
    std::optional<Error> error{};
};
Result<std::vector<EndAnswer>> end_answers_from_json(const nlohmann::json& j);
nlohmann::json to_json(const std::vector<EndAnswer>& answers);

// Several starts in one request (POST /v1/attempts/start, body {"attempts": [id, ...]}): a worker
// that started a slot-full of jobs in one step reports them at once and the coordinator commits them
// in one transaction. At most k_max_batch_starts; an attempt named twice is refused (`attempts[i]`).
// The answer is the ends' form (EndAnswer, {"results": [...]}), one per attempt in order.
inline constexpr std::size_t k_max_batch_starts = 256;
Result<std::vector<AttemptId>> attempt_starts_from_json(const nlohmann::json& j);
nlohmann::json starts_json(const std::vector<AttemptId>& attempts);

} // namespace gpupool::api
