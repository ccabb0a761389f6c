// Teams, tokens, workers and the audit log on the wire, as admins see them (docs/api.md): creating
// and listing teams and tokens, revoking a token, the workers' list (`GET /v1/workers`), draining,
// activating and banning a worker, the audit log (`GET /v1/admin/audit`), and who a token is
// (`GET /v1/whoami`, any token).
//
// The service fills the answers from the coordinator's records and sends to_json(); the client
// reads them back with the *_from_json functions, which treat the bytes as hostile: every member's
// JSON type and range is checked and an error names the member (`tokens[1].revoked_at`), never an
// exception. The request bodies have a *_from_json for the service, whose errors (the 400s) name
// the member as the client sent it; values are checked only for their JSON type here, what they
// mean (a known role, a team that exists, a number of uses in range) is the coordinator's. Times
// are Unix milliseconds; an optional member is null on the wire when unset (never left out). Two
// members carry JSON the coordinator stored as it came and passes on: a worker's inventory and an
// audit record's detail. Value types.
#pragma once

#include "core/api/owner_terms.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::api {

// `POST /v1/admin/teams`. `name` is required.
struct TeamCreateRequest {
    std::string name{};
    std::int64_t weight = 1; // fair share
    bool operator==(const TeamCreateRequest&) const = default;
};

// A team as it is created and listed (`GET /v1/admin/teams`: {"teams": [...]}).
struct TeamView {
    TeamId id{};
    std::string name{};
    std::int64_t weight = 1;
    bool operator==(const TeamView&) const = default;
};
struct TeamList {
    std::vector<TeamView> teams{};
    bool operator==(const TeamList&) const = default;
};

// `POST /v1/admin/tokens`: role "admin", "member" or "enroll"; a team for member and enroll tokens.
// `role` is required.
struct TokenCreateRequest {
    std::string role{};
    std::string team{};
    std::string label{};
    std::int64_t uses = 1; // enroll: how many workers it registers
    bool operator==(const TokenCreateRequest&) const = default;
};
// The answer: the secret, shown this once.
struct CreatedToken {
    TokenId id{};
    std::string token{};
    std::string role{};
    std::string team{}; // as the request named it ("" for none)
    bool operator==(const CreatedToken&) const = default;
};

// A token as `GET /v1/admin/tokens` lists it ({"tokens": [...]}).
struct TokenView {
    TokenId id{};
    std::string role{};
    std::optional<std::string> team{}; // its team's name
    std::optional<WorkerId> worker{};  // a worker's own token: the worker
    std::string label{};
    std::int64_t created_at = 0;
    std::optional<std::int64_t> revoked_at{};
    std::optional<std::int64_t> uses_left{};    // enroll tokens
    std::optional<std::int64_t> last_used_at{}; // since the coordinator started
    bool operator==(const TokenView&) const = default;
};
struct TokenList {
    std::vector<TokenView> tokens{};
    bool operator==(const TokenList&) const = default;
};

// `DELETE /v1/admin/tokens/{id}`.
struct TokenRevoked {
    TokenId revoked{};
    bool operator==(const TokenRevoked&) const = default;
};

// A worker as `GET /v1/workers` lists it ({"workers": [...]}). `id` is required.
struct WorkerView {
    WorkerId id{};
    TeamId team{};           // its owner's team
    std::string team_name{}; // "" from an older coordinator
    std::string name{};
    std::string state{};    // active, draining, banned, quarantined
    std::string presence{}; // online, offline, paused, ...; "" from an older coordinator
    std::string sharing{};  // SharingState's wire name
    std::optional<std::int64_t> sharing_changes_at_ms{};
    std::optional<OwnerTerms> terms{}; // as its last heartbeat said them
    std::int64_t last_seen_at = 0;
    std::optional<std::string> model_mismatch{}; // a GPU whose memory is not its model's
    nlohmann::json inventory{};                  // as the worker reported it (api::Inventory's form)
    // Its spot checks (docs/evidence.md): agreements, disagreements, and the reliability score they
    // give, (1 + agreed) / (2 + checks); 0 from an older coordinator.
    std::int64_t checks_agreed = 0;
    std::int64_t checks_disagreed = 0;
    double reliability = 0.0;
    bool operator==(const WorkerView&) const = default;
};
struct WorkerList {
    std::vector<WorkerView> workers{};
    bool operator==(const WorkerList&) const = default;
};

// `POST /v1/admin/workers/{id}/drain` and `.../activate`.
struct WorkerStateChanged {
    WorkerId worker{};
    std::string state{};
    bool operator==(const WorkerStateChanged&) const = default;
};

// `POST /v1/admin/workers/{id}/ban`, its body optional: void the worker's results since a time,
// and ban the other workers enrolled with the same token too.
struct BanRequest {
    std::optional<std::int64_t> void_since{}; // left out of the body when unset
    bool with_siblings = false;               // left out when false
    bool operator==(const BanRequest&) const = default;
};
// A worker enrolled with the same token, as it is after the ban.
struct BanSibling {
    WorkerId id{};
    std::string name{};
    std::string state{};
    std::string presence{};
    bool operator==(const BanSibling&) const = default;
};
struct BanReply {
    WorkerId worker{};
    std::string state{}; // "banned"
    std::vector<AttemptId> voided_attempts{};
    std::vector<JobId> requeued_jobs{};
    std::int64_t refunded_micro = 0;
    std::vector<BanSibling> siblings{};
    std::vector<WorkerId> banned{}; // the worker named, then its siblings when banned with it
    bool operator==(const BanReply&) const = default;
};

// One record of `GET /v1/admin/audit` ({"audit": [...]}, newest first).
struct AuditActor {
    TokenId id{};
    std::string label{};
    bool operator==(const AuditActor&) const = default;
};
struct AuditRecord {
    std::int64_t id = 0;
    std::int64_t at = 0;
    std::optional<AuditActor> actor{}; // unset: done on the database itself (`this machine`)
    std::string action{};              // team.create, token.revoke, credits.grant, ...
    std::string target{};
    nlohmann::json detail = nlohmann::json::object(); // always an object
    bool operator==(const AuditRecord&) const = default;
};
struct AuditList {
    std::vector<AuditRecord> audit{};
    bool operator==(const AuditList&) const = default;
};

// `GET /v1/whoami`: the token the request came with. `role` is required.
struct Whoami {
    std::string role{};
    TokenId token_id{};
    std::string label{};
    std::optional<std::string> team{}; // its team's name
    std::optional<WorkerId> worker{};  // a worker's own token
    bool operator==(const Whoami&) const = default;
};

nlohmann::json to_json(const TeamCreateRequest& t);
nlohmann::json to_json(const TeamView& t);
nlohmann::json to_json(const TeamList& list);
nlohmann::json to_json(const TokenCreateRequest& t);
nlohmann::json to_json(const CreatedToken& t);
nlohmann::json to_json(const TokenView& t);
nlohmann::json to_json(const TokenList& list);
nlohmann::json to_json(const TokenRevoked& t);
nlohmann::json to_json(const WorkerView& w);
nlohmann::json to_json(const WorkerList& list);
nlohmann::json to_json(const WorkerStateChanged& w);
nlohmann::json to_json(const BanRequest& b);
nlohmann::json to_json(const BanSibling& s);
nlohmann::json to_json(const BanReply& b);
nlohmann::json to_json(const AuditRecord& a);
nlohmann::json to_json(const AuditList& list);
nlohmann::json to_json(const Whoami& w);

// `field` prefixes the member names in errors.
Result<TeamCreateRequest> team_create_request_from_json(const nlohmann::json& body);
Result<TeamView> team_from_json(const nlohmann::json& j, const std::string& field = "");
Result<TeamList> team_list_from_json(const nlohmann::json& j);
Result<TokenCreateRequest> token_create_request_from_json(const nlohmann::json& body);
Result<CreatedToken> created_token_from_json(const nlohmann::json& j);
Result<TokenView> token_view_from_json(const nlohmann::json& j, const std::string& field = "");
Result<TokenList> token_list_from_json(const nlohmann::json& j);
Result<TokenRevoked> token_revoked_from_json(const nlohmann::json& j);
Result<WorkerView> worker_view_from_json(const nlohmann::json& j, const std::string& field = "");
Result<WorkerList> worker_list_from_json(const nlohmann::json& j);
Result<WorkerStateChanged> worker_state_changed_from_json(const nlohmann::json& j);
Result<BanRequest> ban_request_from_json(const nlohmann::json& body);
Result<BanSibling> ban_sibling_from_json(const nlohmann::json& j, const std::string& field = "");
Result<BanReply> ban_reply_from_json(const nlohmann::json& j);
Result<AuditRecord> audit_record_from_json(const nlohmann::json& j, const std::string& field = "");
Result<AuditList> audit_list_from_json(const nlohmann::json& j);
Result<Whoami> whoami_from_json(const nlohmann::json& j);

} // namespace gpupool::api
