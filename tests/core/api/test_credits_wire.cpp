// Credits on the wire (core/api/credits.hpp): the names pinned by literal JSON in the service's
// form, round trips, hostile bytes refused with the member named, the request bodies' absent, null
// and set members; and the service's own answers read back to the same JSON.
#include "core/api/credits.hpp"
#include "tests/core/api/wire_errors.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_credits_wire {

using namespace gpupool;
using nlohmann::json;
using test::error_of;
using test::field_of;

namespace {

// `GET /v1/credits` of a team that holds credits for a running job of its own, with a member's cap.
const char* const k_credits = R"({
  "team": "fellows", "team_id": 2, "balance_micro": 900000, "held_micro": 100000, "settling_micro": 0,
  "budget_day_micro": 5000000, "budget_week_micro": null, "spent_day_micro": 0, "spent_week_micro": 0,
  "members": [{"token_id": 4, "label": "alice", "day_micro": 1000000, "week_micro": null,
               "spent_day_micro": 0, "spent_week_micro": 0, "held_micro": 100000}],
  "movements": [
    {"id": 8, "at": 1700000002000, "debit": "team:2", "credit": "escrow", "amount_micro": 100000,
     "reason": "hold", "note": "", "attempt": 5, "grant": null, "payer_team": 2,
     "payer_team_name": "fellows", "job": 3, "job_name": "eval"},
    {"id": 1, "at": 1700000000000, "debit": "issuer", "credit": "team:2", "amount_micro": 1000000,
     "reason": "grant", "note": "welcome", "attempt": null, "grant": 1, "payer_team": null,
     "payer_team_name": null, "job": null, "job_name": null}]})";

std::string credits_field(const json& j) {
    return field_of<api::CreditsReply>(api::credits_reply_from_json, j);
}

// to_json, then back: the same value.
template <class T, class Read>
void round_trip(const T& value, Read read) {
    Result<T> back = read(api::to_json(value));
    REQUIRE(back.has_value());
    CHECK(*back == value);
}

api::LedgerEntry charge_entry() {
    api::LedgerEntry e;
    e.id = 12;
    e.at = 1700000003000;
    e.debit = "escrow";
    e.credit = "team:3";
    e.amount_micro = 42;
    e.reason = "charge";
    e.attempt = AttemptId(5);
    e.payer_team = TeamId(2);
    return e;
}

} // namespace

TEST_CASE("credits wire: a team's credits, the names pinned by the service's form", "[api][credits]") {
    const json j = json::parse(k_credits);
    auto c = api::credits_reply_from_json(j);
    REQUIRE(c.has_value());
    CHECK(c->team == "fellows");
    CHECK(c->team_id == TeamId(2));
    CHECK(c->balance_micro == 900000);
    CHECK(c->budget_day_micro == std::optional<std::int64_t>(5000000));
    CHECK_FALSE(c->budget_week_micro);
    REQUIRE(c->members.size() == 1);
    CHECK(c->members[0].token_id == TokenId(4));
    CHECK(c->members[0].day_micro == std::optional<std::int64_t>(1000000));
    CHECK_FALSE(c->members[0].week_micro);
    REQUIRE(c->movements.size() == 2);
    const api::Movement& hold = c->movements[0];
    CHECK(hold.entry.reason == "hold");
    CHECK(hold.entry.attempt == std::optional<AttemptId>(AttemptId(5)));
    CHECK(hold.entry.payer_team == std::optional<TeamId>(TeamId(2)));
    CHECK_FALSE(hold.entry.grant);
    CHECK(hold.job == std::optional<JobId>(JobId(3)));
    CHECK(hold.job_name == std::optional<std::string>("eval"));
    const api::Movement& grant = c->movements[1];
    CHECK(grant.entry.grant == std::optional<std::int64_t>(1));
    CHECK(grant.entry.note == "welcome");
    CHECK_FALSE(grant.payer_team_name);
    CHECK_FALSE(grant.job);
    // Written back member for member, nulls included.
    CHECK(api::to_json(*c) == j);
}

TEST_CASE("credits wire: every answer and request survives a round trip", "[api][credits]") {
    api::CreditsReply c{"fellows", TeamId(2), 5, 6, 7, 8, std::nullopt, 9, 10};
    c.members.push_back({TokenId(4), "alice", std::nullopt, 11, 12, 13, 14});
    c.movements.push_back({charge_entry(), "fellows", JobId(3), std::nullopt});
    round_trip(c, api::credits_reply_from_json);
    round_trip(api::GrantRequest{"fellows", 100, "a note", 1700000000000}, api::grant_request_from_json);
    round_trip(api::GrantRequest{"fellows", 100, "", std::nullopt}, api::grant_request_from_json);
    round_trip(api::GrantReply{3, "fellows", 100, std::nullopt, 1100}, api::grant_reply_from_json);
    round_trip(api::AdjustRequest{"fellows", -250, "refund by hand"}, api::adjust_request_from_json);
    round_trip(api::AdjustReply{charge_entry(), "fellows"}, api::adjust_reply_from_json);
    round_trip(api::BudgetRequest{"fellows", "alice", {true, 50}, {true, std::nullopt}}, api::budget_request_from_json);
    round_trip(api::BudgetRequest{"fellows", "", {}, {true, 70}}, api::budget_request_from_json);
    round_trip(api::BudgetReply{"fellows", 1, std::nullopt, std::nullopt}, api::budget_reply_from_json);
    round_trip(api::BudgetReply{"fellows", 1, 2, api::MemberBudgetView{TokenId(4), "alice", 1, 2, 3, 4, 5}},
               api::budget_reply_from_json);
    api::CreditReport rep{1700000000000, {}, {}, 1, 2, 3, -4};
    rep.teams.push_back({"fellows", TeamId(2), 1, 2, 3, 4, 5, 6, 7});
    rep.workers.push_back({WorkerId(3), "box", TeamId(4), 1.25, 7, 1, 900, 2, 3});
    round_trip(rep, api::credit_report_from_json);
    api::EstimateReply est{{{"eval", "L4", 500000, 1000, 400, 60, 3}}, 1000, 400, 5000, std::nullopt, true, 2, 1};
    round_trip(est, api::estimate_reply_from_json);
    est.workers_joined.reset();
    est.workers_online.reset();
    est.budget_room_micro = -3;
    round_trip(est, api::estimate_reply_from_json);
    round_trip(api::RecipeHistoryRequest{{{"eval", "https://example.org/recipes.git", ""}}},
               api::recipe_history_request_from_json);
    round_trip(api::RecipeHistoryReply{{{"eval", "https://example.org/recipes.git", 4, 30, 1200}}},
               api::recipe_history_reply_from_json);
    round_trip(api::WorkerEarningsReply{WorkerId(3), "box", "owners", TeamId(4), 10, 5, 1, 2, 3, 4, 5},
               api::worker_earnings_from_json);
}

TEST_CASE("credits wire: hostile answers are refused with the member named", "[api][credits]") {
    const json good = json::parse(k_credits);
    json j = good;
    j["movements"][1]["amount_micro"] = 1.5;
    CHECK(credits_field(j) == "movements[1].amount_micro");
    j = good;
    j["movements"][0]["attempt"] = "5";
    CHECK(credits_field(j) == "movements[0].attempt");
    j = good;
    j["movements"][0].erase("debit");
    CHECK(credits_field(j) == "movements[0].debit");
    j = good;
    j["members"][0]["token_id"] = 0;
    CHECK(credits_field(j) == "members[0].token_id");
    j = good;
    j["team_id"] = "2";
    CHECK(credits_field(j) == "team_id");
    j = good;
    j["balance_micro"] = json::parse("18446744073709551615"); // above any int64
    const Error big = error_of<api::CreditsReply>(api::credits_reply_from_json, j);
    CHECK(big.field == "balance_micro");
    CHECK(big.message.find("larger number") != std::string::npos);
    j = good;
    j["movements"] = json::object();
    CHECK(credits_field(j) == "movements");
    CHECK(credits_field(json::array()) == "body");

    json report = api::to_json(api::CreditReport{0, {}, {{WorkerId(3), "box", TeamId(4), 0.5, 1, 0, 0, 0, 0}}});
    report["workers"][0]["gpu_hours"] = "half";
    CHECK(field_of<api::CreditReport>(api::credit_report_from_json, report) == "workers[0].gpu_hours");
    json est = api::to_json(api::EstimateReply{{{"eval", "L4", 1, 2, 3, 4, 5}}});
    est["jobs"][0]["max_micro"] = true;
    CHECK(field_of<api::EstimateReply>(api::estimate_reply_from_json, est) == "jobs[0].max_micro");
    est = api::to_json(api::EstimateReply{});
    est["workers_online"] = -1;
    CHECK(field_of<api::EstimateReply>(api::estimate_reply_from_json, est) == "workers_online");
    json budget = api::to_json(api::BudgetReply{"fellows", 1, 2, api::MemberBudgetView{TokenId(4), "a"}});
    budget["member"]["held_micro"] = "1";
    CHECK(field_of<api::BudgetReply>(api::budget_reply_from_json, budget) == "member.held_micro");
    CHECK(field_of<api::WorkerEarningsReply>(api::worker_earnings_from_json, json{{"name", "box"}}) == "worker");
    CHECK(field_of<api::RecipeHistoryReply>(api::recipe_history_reply_from_json,
                                            json{{"recipes", {{{"recipe", "eval"}, {"repo", 3}}}}}) ==
          "recipes[0].repo");
}

TEST_CASE("credits wire: request bodies name the member the client got wrong", "[api][credits]") {
    CHECK(field_of<api::GrantRequest>(api::grant_request_from_json, json{{"team", "fellows"}}) == "amount_micro");
    CHECK(field_of<api::GrantRequest>(api::grant_request_from_json,
                                      json::parse(R"({"team": "fellows", "amount_micro": 1.9})")) == "amount_micro");
    CHECK(field_of<api::GrantRequest>(api::grant_request_from_json,
                                      json{{"team", "f"}, {"amount_micro", 1}, {"expires_at", "2026-01-01"}}) ==
          "expires_at");
    CHECK(field_of<api::GrantRequest>(api::grant_request_from_json,
                                      json{{"team", "f"}, {"amount_micro", 1}, {"note", std::string(5000, 'n')}}) ==
          "note");
    CHECK(field_of<api::AdjustRequest>(api::adjust_request_from_json, json{{"team", 3}, {"amount_micro", 1}}) ==
          "team");
    CHECK(field_of<api::BudgetRequest>(api::budget_request_from_json, json{{"team", "f"}, {"week_micro", "10"}}) ==
          "week_micro");
    CHECK(field_of<api::BudgetRequest>(api::budget_request_from_json, json{{"member", "alice"}}) == "team");
    // A cap left out is kept, null removes it, a number sets it.
    auto b = api::budget_request_from_json(json::parse(R"({"team": "f", "day_micro": null, "week_micro": 7})"));
    REQUIRE(b.has_value());
    CHECK(b->day == api::CapSetting{true, std::nullopt});
    CHECK(b->week == api::CapSetting{true, 7});
    b = api::budget_request_from_json(json{{"team", "f"}});
    REQUIRE(b.has_value());
    CHECK_FALSE(b->day.change);
    CHECK_FALSE(b->week.change);
}

TEST_CASE("credits wire: the recipe history request keeps the service's words", "[api][credits]") {
    const auto history_error = [](const json& body) {
        return error_of<api::RecipeHistoryRequest>(api::recipe_history_request_from_json, body);
    };
    CHECK(history_error(json::object()).field == "recipes");
    CHECK(history_error(json{{"recipes", "eval"}}).message ==
          "expected an array of at most 500 {recipe, repo} objects");
    json many = json{{"recipes", json::array()}};
    for (int i = 0; i < 501; ++i) {
        many["recipes"].push_back({{"recipe", "eval"}, {"repo", "r"}});
    }
    CHECK(history_error(many).field == "recipes");
    const Error shape = history_error(json{{"recipes", {{{"recipe", "eval"}, {"repo", "r"}}, {{"recipe", "eval"}}}}});
    CHECK(shape.field == "recipes[1]");
    CHECK(shape.message == "expected {\"recipe\": NAME, \"repo\": URL}");
    CHECK(history_error(json{{"recipes", {{{"recipe", "Not A Name"}, {"repo", "r"}}}}}).field == "recipes[0]");
    auto ok = api::recipe_history_request_from_json(json{{"recipes", {{{"recipe", "eval"}, {"repo", "r"}}}}});
    REQUIRE(ok.has_value());
    CHECK(ok->recipes == std::vector<recipe::Origin>{{"eval", "r", ""}});
}

TEST_CASE("credits wire: the service's answers read back to the same JSON", "[api][credits][service]") {
    test::svc::Pool p;
    auto admin = p.server.client(p.server.admin_token);
    const auto same = [](const json& answer, auto read) {
        auto v = read(answer);
        REQUIRE(v.has_value());
        CHECK(api::to_json(*v) == answer);
    };
    same(test::svc::call(admin, "POST", "/v1/admin/grants",
                         api::to_json(api::GrantRequest{"fellows", 5'000'000, "more", 4'000'000'000'000}), 201),
         api::grant_reply_from_json);
    same(test::svc::call(admin, "POST", "/v1/admin/adjustments",
                         api::to_json(api::AdjustRequest{"fellows", -1'000, "by hand"}), 201),
         api::adjust_reply_from_json);
    p.submit({test::svc::spec("a")});
    same(test::svc::call(admin, "POST", "/v1/admin/budgets",
                         api::to_json(api::BudgetRequest{"fellows", "", {true, 900'000'000'000}, {}})),
         api::budget_reply_from_json);
    auto member = p.server.client(p.member);
    same(test::svc::call(member, "GET", "/v1/credits?limit=50"), api::credits_reply_from_json);
    same(test::svc::call(admin, "GET", "/v1/credits?team=fellows&limit=0"), api::credits_reply_from_json);
    same(test::svc::call(admin, "GET", "/v1/admin/report"), api::credit_report_from_json);
    same(test::svc::call(
             member, "POST", "/v1/estimate",
             {{"source", "t.toml"}, {"jobs", json::parse(recipe::to_json(std::vector{test::svc::spec("b")}).dump())}}),
         api::estimate_reply_from_json);
    same(test::svc::call(member, "POST", "/v1/recipes/history",
                         api::to_json(api::RecipeHistoryRequest{{{"eval", "https://example.org/r.git", ""}}})),
         api::recipe_history_reply_from_json);
    same(test::svc::call(admin, "GET", "/v1/workers/" + std::to_string(p.worker_id) + "/earnings"),
         api::worker_earnings_from_json);
}

} // namespace test_credits_wire
} // namespace
