// Teams, tokens, workers, the audit log, whoami (core/api/admin.hpp) and the pool's overview
// (core/api/pool.hpp) on the wire: the names pinned by literal JSON in the service's form, round
// trips, hostile bytes refused with the member named, the request bodies' defaults; and the
// service's own answers read back to the same JSON.
#include "core/api/admin.hpp"
#include "core/api/pool.hpp"
#include "tests/core/api/wire_errors.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_admin_wire {

using namespace gpupool;
using nlohmann::json;
using test::error_of;
using test::field_of;

namespace {

const char* const k_tokens = R"({"tokens": [
  {"id": 1, "role": "admin", "team": null, "worker": null, "label": "first admin", "created_at": 1700000000000,
   "revoked_at": null, "uses_left": null, "last_used_at": 1700000009000},
  {"id": 5, "role": "enroll", "team": "owners", "worker": null, "label": "enrollment",
   "created_at": 1700000001000, "revoked_at": 1700000002000, "uses_left": 2, "last_used_at": null},
  {"id": 6, "role": "worker", "team": "owners", "worker": 3, "label": "box", "created_at": 1700000001500,
   "revoked_at": null, "uses_left": null, "last_used_at": null}]})";

const char* const k_workers = R"({"workers": [
  {"id": 3, "team": 4, "team_name": "owners", "name": "box", "state": "active", "presence": "online",
   "sharing": "paused", "sharing_changes_at_ms": 1700000100000,
   "terms": {"max_runtime_s": 3600, "teams": ["fellows"], "registries": [], "hours": [], "max_jobs": 2},
   "last_seen_at": 1700000005000, "model_mismatch": null,
   "checks_agreed": 12, "checks_disagreed": 1, "reliability": 0.8666666666666667,
   "inventory": {"cpu_milli": 16000, "memory_mib": 65536, "gpus": [{"index": 0, "model": "L4"}]}}]})";

const char* const k_overview = R"({
  "at": 1700000010000, "detail": "summary",
  "workers": [{"id": 3, "name": "box", "team": "", "presence": "online", "last_seen_at": 1700000009000,
               "gpus": [{"index": 0, "model": "L4", "memory_mib": 24576, "allocated_milli": 250, "jobs": 1,
                         "healthy": true, "memory_enforcement": "mps"}]}],
  "running": [{"id": 7, "name": "a", "team": "fellows", "submitter": "alice", "state": "running",
               "since": 1700000008000, "why": "", "exit_code": null, "worker": 3, "worker_name": "box",
               "gpu_index": 0, "gpu_milli": 250}],
  "queued": [{"id": 8, "name": "b", "team": "fellows", "submitter": "alice", "state": "queued",
              "since": 1700000008500, "why": "waiting for a GPU", "exit_code": null}],
  "recent": [{"id": 6, "name": "c", "team": "fellows", "submitter": "alice", "state": "failed",
              "since": 1700000007000, "why": "exit 2", "exit_code": 2}],
  "credits": [{"team": "fellows", "balance_micro": 1000, "held_micro": 250}],
  "totals": {"workers": 1, "workers_online": 1, "gpus_online": 1, "gpu_milli_online": 1000,
             "gpu_milli_allocated": 250, "gpus_shared": 0, "jobs_queued": 1, "jobs_running": 1}})";

template <class T, class Read>
void round_trip(const T& value, Read read) {
    Result<T> back = read(api::to_json(value));
    REQUIRE(back.has_value());
    CHECK(*back == value);
}

} // namespace

TEST_CASE("admin wire: tokens and workers, the names pinned by the service's form", "[api][admin]") {
    const json tokens = json::parse(k_tokens);
    auto t = api::token_list_from_json(tokens);
    REQUIRE(t.has_value());
    REQUIRE(t->tokens.size() == 3);
    CHECK(t->tokens[0].id == TokenId(1));
    CHECK_FALSE(t->tokens[0].team);
    CHECK(t->tokens[0].last_used_at == std::optional<std::int64_t>(1700000009000));
    CHECK(t->tokens[1].team == std::optional<std::string>("owners"));
    CHECK(t->tokens[1].revoked_at == std::optional<std::int64_t>(1700000002000));
    CHECK(t->tokens[1].uses_left == std::optional<std::int64_t>(2));
    CHECK(t->tokens[2].worker == std::optional<WorkerId>(WorkerId(3)));
    CHECK(api::to_json(*t) == tokens);

    const json workers = json::parse(k_workers);
    auto w = api::worker_list_from_json(workers);
    REQUIRE(w.has_value());
    REQUIRE(w->workers.size() == 1);
    const api::WorkerView& box = w->workers[0];
    CHECK(box.team == TeamId(4));
    CHECK(box.team_name == "owners");
    CHECK(box.sharing == "paused");
    CHECK(box.sharing_changes_at_ms == std::optional<std::int64_t>(1700000100000));
    REQUIRE(box.terms.has_value());
    CHECK(box.terms->max_runtime_s == 3600);
    CHECK(box.terms->teams == std::vector<std::string>{"fellows"});
    CHECK_FALSE(box.model_mismatch);
    CHECK(box.inventory["gpus"][0]["model"] == "L4"); // passed on as it came
    CHECK(box.checks_agreed == 12);
    CHECK(box.checks_disagreed == 1);
    CHECK(box.reliability == Approx(13.0 / 15.0));
    CHECK(api::to_json(*w) == workers);
}

TEST_CASE("admin wire: every answer and request survives a round trip", "[api][admin]") {
    round_trip(api::TeamCreateRequest{"fellows", 3}, api::team_create_request_from_json);
    round_trip(api::TeamList{{{TeamId(2), "fellows", 3}, {TeamId(3), "others", 1}}}, api::team_list_from_json);
    round_trip(api::TokenCreateRequest{"enroll", "owners", "lab", 5}, api::token_create_request_from_json);
    round_trip(api::CreatedToken{TokenId(7), "gp_secret", "member", ""}, api::created_token_from_json);
    round_trip(api::TokenRevoked{TokenId(7)}, api::token_revoked_from_json);
    api::WorkerView w;
    w.id = WorkerId(3);
    w.team = TeamId(4);
    w.name = "box";
    w.model_mismatch = "GPU 0: 16 GiB is not an L4's 24 GiB";
    w.inventory = json{{"gpus", json::array()}};
    round_trip(api::WorkerList{{w}}, api::worker_list_from_json);
    round_trip(api::WorkerStateChanged{WorkerId(3), "draining"}, api::worker_state_changed_from_json);
    round_trip(api::BanRequest{1700000000000, true}, api::ban_request_from_json);
    round_trip(api::BanRequest{}, api::ban_request_from_json);
    round_trip(api::BanReply{WorkerId(3),
                             "banned",
                             {AttemptId(5)},
                             {JobId(2)},
                             900,
                             {{WorkerId(4), "b", "banned", "offline"}},
                             {WorkerId(3), WorkerId(4)}},
               api::ban_reply_from_json);
    api::AuditRecord a{9,
                       1700000000000,
                       api::AuditActor{TokenId(1), "root"},
                       "credits.grant",
                       "team `fellows`",
                       json{{"amount_micro", 5}}};
    round_trip(api::AuditList{{a, {10, 1700000001000, std::nullopt, "pool.restore", "pool", json::object()}}},
               api::audit_list_from_json);
    round_trip(api::Whoami{"member", TokenId(4), "alice", "fellows", std::nullopt}, api::whoami_from_json);
    round_trip(api::Whoami{"worker", TokenId(6), "box", "owners", WorkerId(3)}, api::whoami_from_json);
}

TEST_CASE("admin wire: hostile answers are refused with the member named", "[api][admin]") {
    json tokens = json::parse(k_tokens);
    tokens["tokens"][1]["revoked_at"] = "yesterday";
    CHECK(field_of<api::TokenList>(api::token_list_from_json, tokens) == "tokens[1].revoked_at");
    tokens = json::parse(k_tokens);
    tokens["tokens"][2].erase("role");
    CHECK(field_of<api::TokenList>(api::token_list_from_json, tokens) == "tokens[2].role");
    json workers = json::parse(k_workers);
    workers["workers"][0]["terms"]["teams"] = {"fellows", 7};
    CHECK(field_of<api::WorkerList>(api::worker_list_from_json, workers) == "workers[0].terms.teams[1]");
    workers = json::parse(k_workers);
    workers["workers"][0]["id"] = -3;
    CHECK(field_of<api::WorkerList>(api::worker_list_from_json, workers) == "workers[0].id");
    json ban = api::to_json(api::BanReply{WorkerId(3), "banned"});
    ban["voided_attempts"] = {5, 1.5};
    CHECK(field_of<api::BanReply>(api::ban_reply_from_json, ban) == "voided_attempts[1]");
    ban = api::to_json(api::BanReply{WorkerId(3), "banned"});
    ban["siblings"] = {{{"id", 4}, {"name", 4}}};
    CHECK(field_of<api::BanReply>(api::ban_reply_from_json, ban) == "siblings[0].name");
    json audit = json{{"audit", {{{"id", 1}, {"action", "team.create"}, {"actor", {{"id", "1"}}}}}}};
    CHECK(field_of<api::AuditList>(api::audit_list_from_json, audit) == "audit[0].actor.id");
    audit = json{{"audit", {{{"id", 1}, {"action", "team.create"}, {"detail", "{}"}}}}};
    CHECK(field_of<api::AuditList>(api::audit_list_from_json, audit) == "audit[0].detail");
    CHECK(field_of<api::Whoami>(api::whoami_from_json, json{{"role", "member"}, {"team", 2}}) == "team");
    CHECK(field_of<api::Whoami>(api::whoami_from_json, json{{"label", "x"}}) == "role");
    CHECK(field_of<api::TeamList>(api::team_list_from_json,
                                  json{{"teams", {{{"id", 2}, {"name", "f"}, {"weight", 0.5}}}}}) == "teams[0].weight");
}

TEST_CASE("admin wire: request bodies take their defaults and name what is wrong", "[api][admin]") {
    auto team = api::team_create_request_from_json(json{{"name", "fellows"}});
    REQUIRE(team.has_value());
    CHECK(team->weight == 1);
    CHECK(field_of<api::TeamCreateRequest>(api::team_create_request_from_json, json{{"weight", 2}}) == "name");
    auto token = api::token_create_request_from_json(json{{"role", "member"}});
    REQUIRE(token.has_value());
    CHECK(*token == api::TokenCreateRequest{"member", "", "", 1});
    CHECK(field_of<api::TokenCreateRequest>(api::token_create_request_from_json,
                                            json{{"role", "member"}, {"label", std::string(5000, 'l')}}) == "label");
    CHECK(field_of<api::TokenCreateRequest>(api::token_create_request_from_json,
                                            json{{"role", "enroll"}, {"uses", "3"}}) == "uses");
    auto ban = api::ban_request_from_json(json::object());
    REQUIRE(ban.has_value());
    CHECK(*ban == api::BanRequest{});
    CHECK(field_of<api::BanRequest>(api::ban_request_from_json, json{{"with_siblings", 1}}) == "with_siblings");
    CHECK(field_of<api::BanRequest>(api::ban_request_from_json, json{{"void_since", "3d"}}) == "void_since");
}

TEST_CASE("pool wire: the overview, pinned by the service's form", "[api][pool]") {
    const json j = json::parse(k_overview);
    auto o = api::pool_overview_from_json(j);
    REQUIRE(o.has_value());
    CHECK(o->detail == "summary");
    REQUIRE(o->workers.size() == 1);
    REQUIRE(o->workers[0].gpus.size() == 1);
    CHECK(o->workers[0].gpus[0].allocated_milli == 250);
    CHECK(o->workers[0].gpus[0].memory_enforcement == "mps");
    REQUIRE(o->running.size() == 1);
    CHECK(o->running[0].worker == std::optional<WorkerId>(WorkerId(3)));
    CHECK(o->running[0].gpu_milli == 250);
    REQUIRE(o->queued.size() == 1);
    CHECK_FALSE(o->queued[0].worker);
    CHECK(o->recent[0].exit_code == std::optional<std::int64_t>(2));
    CHECK(o->credits[0].held_micro == 250);
    CHECK(o->totals.gpu_milli_online == 1000);
    CHECK(o->totals.jobs_queued == 1);
    // Written back member for member: where a job runs only for the running one.
    CHECK(api::to_json(*o) == j);
    CHECK_FALSE(api::to_json(o->queued[0]).contains("worker"));
}

TEST_CASE("pool wire: hostile overviews are refused with the member named", "[api][pool]") {
    const json good = json::parse(k_overview);
    const auto field = [](const json& j) { return field_of<api::PoolOverviewReply>(api::pool_overview_from_json, j); };
    json j = good;
    j["workers"][0]["gpus"][0]["allocated_milli"] = -1;
    CHECK(field(j) == "workers[0].gpus[0].allocated_milli");
    j = good;
    j["workers"][0]["gpus"][0]["healthy"] = "yes";
    CHECK(field(j) == "workers[0].gpus[0].healthy");
    j = good;
    j["running"][0]["worker"] = "box";
    CHECK(field(j) == "running[0].worker");
    j = good;
    j["queued"][0].erase("id");
    CHECK(field(j) == "queued[0].id");
    j = good;
    j["totals"]["jobs_running"] = 1e3;
    CHECK(field(j) == "totals.jobs_running");
    j = good;
    j["credits"] = "none";
    CHECK(field(j) == "credits");
    api::PoolOverviewReply round;
    round.totals.workers = 2;
    round.recent.push_back({JobId(4), "x", "t", "s", "succeeded", 5, "", 0});
    round_trip(round, api::pool_overview_from_json);
}

TEST_CASE("admin wire: the service's answers read back to the same JSON", "[api][admin][pool][service]") {
    test::svc::Pool p;
    auto admin = p.server.client(p.server.admin_token);
    const auto same = [](const json& answer, auto read) {
        auto v = read(answer);
        REQUIRE(v.has_value());
        CHECK(api::to_json(*v) == answer);
    };
    same(test::svc::call(admin, "POST", "/v1/admin/teams", api::to_json(api::TeamCreateRequest{"lab", 2}), 201),
         [](const json& j) { return api::team_from_json(j); });
    same(test::svc::call(admin, "GET", "/v1/admin/teams"), api::team_list_from_json);
    const json created = test::svc::call(admin, "POST", "/v1/admin/tokens",
                                         api::to_json(api::TokenCreateRequest{"member", "lab", "bob", 1}), 201);
    same(created, api::created_token_from_json);
    same(test::svc::call(admin, "GET", "/v1/admin/tokens"), api::token_list_from_json);
    same(test::svc::call(admin, "DELETE", "/v1/admin/tokens/" + std::to_string(created["id"].get<std::int64_t>())),
         api::token_revoked_from_json);
    auto w = p.server.client(p.worker);
    test::svc::call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    p.submit({test::svc::spec("a"), test::svc::spec("b")});
    test::svc::call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object());
    same(test::svc::call(admin, "GET", "/v1/workers"), api::worker_list_from_json);
    same(test::svc::call(admin, "GET", "/v1/pool"), api::pool_overview_from_json);
    auto member = p.server.client(p.member);
    same(test::svc::call(member, "GET", "/v1/pool"), api::pool_overview_from_json);
    same(test::svc::call(admin, "GET", "/v1/whoami"), api::whoami_from_json);
    same(test::svc::call(w, "GET", "/v1/whoami"), api::whoami_from_json);
    const std::string box = "/v1/admin/workers/" + std::to_string(p.worker_id);
    same(test::svc::call(admin, "POST", box + "/drain", json::object()), api::worker_state_changed_from_json);
    same(test::svc::call(admin, "POST", box + "/ban", api::to_json(api::BanRequest{0, false})),
         api::ban_reply_from_json);
    same(test::svc::call(admin, "GET", "/v1/admin/audit"), api::audit_list_from_json);
}

} // namespace test_admin_wire
} // namespace
