// Credits on the wire (docs/api.md, docs/credits.md): a team's balance, budgets and ledger rows
// (`GET /v1/credits`), the admins' grants, adjustments and budget changes with their answers, the
// admins' report (`GET /v1/admin/report`), one worker's earnings for its owner
// (`GET /v1/workers/{id}/earnings`), the pool's estimate of a submission (`POST /v1/estimate`) and
// the pool's history of recipes (`POST /v1/recipes/history`).
//
// The service fills the answers from the coordinator's views (CreditsView, Report, Estimate, ...)
// and sends to_json(); the client reads them back with the *_from_json functions, which treat the
// bytes as hostile: every member's JSON type and range is checked and an error names the member
// (`movements[2].amount_micro`), never an exception. The request bodies have a *_from_json for the
// service, whose errors (the 400s) name the member as the client sent it; values are checked only
// for their JSON type here, what they mean (a known team, a positive amount) is the
// coordinator's. Amounts are micro-credits, times Unix milliseconds, accounts the ledger's names
// ("team:3", "escrow", "issuer"). An optional member is null on the wire when unset (never left
// out) unless its comment says otherwise. Value types.
#pragma once

#include "core/recipe/recipe.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::api {

// One row of the ledger: `amount_micro` moves from `debit` to `credit`.
struct LedgerEntry {
    std::int64_t id = 0;
    std::int64_t at = 0;
    std::string debit{};
    std::string credit{};
    std::int64_t amount_micro = 0;
    std::string reason{}; // grant, expiry, adjustment, hold, charge, fee, release, payout, refund
    std::string note{};
    std::optional<AttemptId> attempt{};  // escrow rows: the attempt
    std::optional<std::int64_t> grant{}; // grant and expiry rows: the grant (its grant row's id)
    std::optional<TeamId> payer_team{};  // escrow rows: the team whose job it is
    bool operator==(const LedgerEntry&) const = default;
};

// A row as `GET /v1/credits` lists it, in the reader's words.
struct Movement {
    LedgerEntry entry{};
    std::optional<std::string> payer_team_name{};
    std::optional<JobId> job{};            // the job of the row's attempt
    std::optional<std::string> job_name{}; // only for the reading team's own jobs
    bool operator==(const Movement&) const = default;
};

// A member token's own caps within its team's, and what its jobs spent and hold.
struct MemberBudgetView {
    TokenId token_id{};
    std::string label{};
    std::optional<std::int64_t> day_micro{}; // unset: no cap of its own
    std::optional<std::int64_t> week_micro{};
    std::int64_t spent_day_micro = 0;
    std::int64_t spent_week_micro = 0;
    std::int64_t held_micro = 0;
    bool operator==(const MemberBudgetView&) const = default;
};

// `GET /v1/credits?team=NAME&limit=N`. `team` and `team_id` are required.
struct CreditsReply {
    std::string team{}; // its name
    TeamId team_id{};
    std::int64_t balance_micro = 0; // available: holds are already out of it
    std::int64_t held_micro = 0;
    std::int64_t settling_micro = 0; // earned by its workers, not paid out yet
    std::optional<std::int64_t> budget_day_micro{};
    std::optional<std::int64_t> budget_week_micro{};
    std::int64_t spent_day_micro = 0;
    std::int64_t spent_week_micro = 0;
    std::vector<MemberBudgetView> members{};
    std::vector<Movement> movements{}; // newest first
    bool operator==(const CreditsReply&) const = default;
};

// `POST /v1/admin/grants`: credits minted for a team, what is left of them taken back at
// `expires_at`. `team` and `amount_micro` are required.
struct GrantRequest {
    std::string team{};
    std::int64_t amount_micro = 0;
    std::string note{};
    std::optional<std::int64_t> expires_at{}; // left out of the body when unset
    bool operator==(const GrantRequest&) const = default;
};
struct GrantReply {
    std::int64_t grant = 0; // its id
    std::string team{};
    std::int64_t amount_micro = 0;
    std::optional<std::int64_t> expires_at{};
    std::int64_t balance_micro = 0; // the team's, after the grant
    bool operator==(const GrantReply&) const = default;
};

// `POST /v1/admin/adjustments`: a signed correction of a team's balance. `team` and
// `amount_micro` are required. The answer is the ledger row it wrote, with the team's name.
struct AdjustRequest {
    std::string team{};
    std::int64_t amount_micro = 0;
    std::string note{};
    bool operator==(const AdjustRequest&) const = default;
};
struct AdjustReply {
    LedgerEntry entry{};
    std::string team{};
    bool operator==(const AdjustReply&) const = default;
};

// One cap of a budget change: a member left out of the body keeps the cap as it is (`change`
// false), null removes it, a number sets it.
struct CapSetting {
    bool change = false;
    std::optional<std::int64_t> micro{}; // with `change`: the new cap, or none
    bool operator==(const CapSetting&) const = default;
};

// `POST /v1/admin/budgets`: a team's caps, or (with `member`: a member token's id or label) one
// member's. `team` is required.
struct BudgetRequest {
    std::string team{};
    std::string member{}; // left out of the body when empty
    CapSetting day{};     // `day_micro`
    CapSetting week{};    // `week_micro`
    bool operator==(const BudgetRequest&) const = default;
};
struct BudgetReply {
    std::string team{};
    std::optional<std::int64_t> day_micro{}; // the caps now: the member's when one was named
    std::optional<std::int64_t> week_micro{};
    std::optional<MemberBudgetView> member{}; // left out when no member was named
    bool operator==(const BudgetReply&) const = default;
};

// `GET /v1/admin/report?since=MS`: credits per team and work per worker since a time.
struct TeamCredits {
    std::string team{}; // its name
    TeamId team_id{};
    std::int64_t granted_micro = 0; // grants and adjustments, net of expiries
    std::int64_t earned_micro = 0;  // as a provider
    std::int64_t spent_micro = 0;
    std::int64_t balance_micro = 0;
    std::int64_t held_micro = 0;
    std::int64_t settling_micro = 0;
    std::int64_t refunded_micro = 0; // for voided attempts
    bool operator==(const TeamCredits&) const = default;
};
struct WorkerCredits {
    WorkerId worker{};
    std::string name{};
    TeamId team_id{};
    double gpu_hours = 0; // runtime x share, of the attempts that ran
    std::int64_t attempts = 0;
    std::int64_t failures = 0;
    std::int64_t earned_micro = 0;
    std::int64_t voided = 0;
    std::int64_t owner_preempted = 0;
    bool operator==(const WorkerCredits&) const = default;
};
struct CreditReport {
    std::int64_t since = 0;
    std::vector<TeamCredits> teams{};
    std::vector<WorkerCredits> workers{};
    std::int64_t pool_fee_micro = 0;
    std::int64_t escrow_micro = 0;
    std::int64_t settling_micro = 0;
    std::int64_t issuer_micro = 0; // minus what was ever issued
    bool operator==(const CreditReport&) const = default;
};

// `POST /v1/estimate` (a submission's body): what each job is expected to cost and what the team
// can pay now.
struct JobCost {
    std::string name{};
    std::string gpu_model{}; // the priciest model it may land on ("" for CPU)
    std::int64_t price_micro_per_hour = 0;
    std::int64_t max_micro = 0;      // price x max_runtime: the hold
    std::int64_t estimate_micro = 0; // price x the median past runtime (or max_runtime)
    std::int64_t runtime_s = 0;
    std::int64_t history_runs = 0; // 0: no history, max_runtime
    bool operator==(const JobCost&) const = default;
};
struct EstimateReply {
    std::vector<JobCost> jobs{};
    std::int64_t total_max_micro = 0;
    std::int64_t total_estimate_micro = 0;
    std::int64_t available_micro = 0;
    std::optional<std::int64_t> budget_room_micro{}; // unset: no budget applies
    bool enforced = true;
    // The workers that joined and those taking work now; an older coordinator leaves them out
    // (and so does to_json when unset).
    std::optional<std::int64_t> workers_joined{};
    std::optional<std::int64_t> workers_online{};
    bool operator==(const EstimateReply&) const = default;
};

// `POST /v1/recipes/history` {"recipes": [{"recipe": NAME, "repo": URL}, ...]}: at most
// k_max_history_recipes, each a recipe::Origin that recipe::check_origin accepts.
inline constexpr std::size_t k_max_history_recipes = 500;
struct RecipeHistoryRequest {
    std::vector<recipe::Origin> recipes{}; // recipe and repo only
    bool operator==(const RecipeHistoryRequest&) const = default;
};
struct RecipeRuns {
    std::string recipe{};
    std::string repo{};
    std::int64_t runs = 0; // successful runs the medians are of
    std::int64_t median_runtime_s = 0;
    std::int64_t median_cost_micro = 0;
    bool operator==(const RecipeRuns&) const = default;
};
struct RecipeHistoryReply {
    std::vector<RecipeRuns> recipes{};
    bool operator==(const RecipeHistoryReply&) const = default;
};

// `GET /v1/workers/{id}/earnings`: what one worker earned its team. `worker` is required.
struct WorkerEarningsReply {
    WorkerId worker{};
    std::string name{};
    std::string team{}; // its name
    TeamId team_id{};
    std::int64_t day_start_ms = 0;  // 00:00 UTC today
    std::int64_t week_start_ms = 0; // Monday 00:00 UTC
    std::int64_t today_micro = 0;
    std::int64_t week_micro = 0;
    std::int64_t total_micro = 0;
    std::int64_t settling_micro = 0; // of the total, not paid out yet
    std::int64_t attempts = 0;
    bool operator==(const WorkerEarningsReply&) const = default;
};

nlohmann::json to_json(const LedgerEntry& e);
nlohmann::json to_json(const Movement& m);
nlohmann::json to_json(const MemberBudgetView& m);
nlohmann::json to_json(const CreditsReply& c);
nlohmann::json to_json(const GrantRequest& g);
nlohmann::json to_json(const GrantReply& g);
nlohmann::json to_json(const AdjustRequest& a);
nlohmann::json to_json(const AdjustReply& a);
nlohmann::json to_json(const BudgetRequest& b);
nlohmann::json to_json(const BudgetReply& b);
nlohmann::json to_json(const CreditReport& r);
nlohmann::json to_json(const EstimateReply& e);
nlohmann::json to_json(const RecipeHistoryRequest& r);
nlohmann::json to_json(const RecipeHistoryReply& r);
nlohmann::json to_json(const WorkerEarningsReply& e);

// `field` prefixes the member names in errors.
Result<LedgerEntry> ledger_entry_from_json(const nlohmann::json& j, const std::string& field = "");
Result<Movement> movement_from_json(const nlohmann::json& j, const std::string& field = "");
Result<MemberBudgetView> member_budget_from_json(const nlohmann::json& j, const std::string& field = "");
Result<CreditsReply> credits_reply_from_json(const nlohmann::json& j);
Result<GrantRequest> grant_request_from_json(const nlohmann::json& body);
Result<GrantReply> grant_reply_from_json(const nlohmann::json& j);
Result<AdjustRequest> adjust_request_from_json(const nlohmann::json& body);
Result<AdjustReply> adjust_reply_from_json(const nlohmann::json& j);
Result<BudgetRequest> budget_request_from_json(const nlohmann::json& body);
Result<BudgetReply> budget_reply_from_json(const nlohmann::json& j);
Result<CreditReport> credit_report_from_json(const nlohmann::json& j);
Result<EstimateReply> estimate_reply_from_json(const nlohmann::json& j);
// Errors name the array (`recipes`) or the element (`recipes[3]`) as the service always has.
Result<RecipeHistoryRequest> recipe_history_request_from_json(const nlohmann::json& body);
Result<RecipeHistoryReply> recipe_history_reply_from_json(const nlohmann::json& j);
Result<WorkerEarningsReply> worker_earnings_from_json(const nlohmann::json& j);

} // namespace gpupool::api
