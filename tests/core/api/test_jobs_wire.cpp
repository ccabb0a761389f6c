// The researchers' views of their jobs on the wire (core/api/jobs.hpp): the names pinned by
// literal JSON in the service's form, round trips, absent members taking their defaults, hostile
// bytes refused with the member named; and the service's own answers read back to the same JSON.
#include "core/api/jobs.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_jobs_wire {

using namespace gpupool;
using nlohmann::json;

namespace {

// A job as `GET /v1/jobs/{id}` shows it (one voided attempt that ran, one that is running, after the
// job was retried once).
const char* const k_job_view = R"({
  "id": 12, "sweep_id": 4, "team": 2, "submitted_by": "alice", "name": "eval-n3", "state": "running",
  "attempts": 2, "retries": 1, "created_at": 1700000000000, "updated_at": 1700000005000, "finished_at": null,
  "exit_code": null, "reason": "", "waiting_reason": "",
  "spec": {"name": "eval-n3", "image": "busybox", "command": ["echo", "3"]},
  "cost_micro": 1500, "held_micro": 250000,
  "attempt_history": [
    {"id": 7, "worker": 3, "gpu_index": 0, "gpu_milli": 500, "state": "failed", "assigned_at": 1700000001000,
     "started_at": 1700000001500, "ended_at": 1700000002500, "exit_code": 1, "reason": "exit 1",
     "price_micro_per_hour": 500000, "cost_micro": 1500, "voided_at": 1700000003000, "retry": 0,
     "unconfirmed": false},
    {"id": 9, "worker": 3, "gpu_index": -1, "gpu_milli": 0, "state": "running", "assigned_at": 1700000004000,
     "started_at": 1700000004500, "ended_at": null, "exit_code": null, "reason": "",
     "price_micro_per_hour": 500000, "cost_micro": 0, "voided_at": null, "retry": 1,
     "unconfirmed": true}]})";

const char* const k_job_list = R"({"more": true, "jobs": [
  {"id": 12, "sweep_id": 4, "team": 2, "team_name": "fellows", "submitted_by": "alice", "name": "eval-n3",
   "sweep_index": 3, "state": "queued", "attempts": 0, "exit_code": null, "reason": "waiting for a GPU",
   "cost_micro": 0},
  {"id": 13, "sweep_id": 4, "team": 2, "team_name": "fellows", "submitted_by": "alice", "name": "eval-n4",
   "sweep_index": 4, "state": "failed", "attempts": 1, "exit_code": 2, "reason": "exit 2", "cost_micro": 7}]})";

template <class T, class Read>
std::string field_of(Read read, const json& j) {
    Result<T> r = read(j);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::invalid_input);
    return r.error().field;
}

std::string view_field(const json& j) { return field_of<api::JobView>(api::job_view_from_json, j); }

// The view with its spec in full, as the service writes it (recipe::to_wire_json).
json job_view_json() {
    json j = json::parse(k_job_view);
    j["spec"] = recipe::to_wire_json(recipe::job_from_json(j["spec"]).value());
    return j;
}

} // namespace

TEST_CASE("job view: the wire names, pinned by the service's form", "[api][jobs]") {
    const json j = job_view_json();
    auto v = api::job_view_from_json(j);
    REQUIRE(v.has_value());
    CHECK(v->id == JobId(12));
    CHECK(v->sweep_id == SweepId(4));
    CHECK(v->team == TeamId(2));
    CHECK(v->submitted_by == "alice");
    CHECK(v->state == "running");
    CHECK(v->attempts == 2);
    CHECK(v->created_at == 1700000000000);
    CHECK_FALSE(v->finished_at);
    CHECK_FALSE(v->exit_code);
    CHECK(v->spec.command == std::vector<std::string>{"echo", "3"});
    CHECK(v->cost_micro == std::optional<std::int64_t>(1500));
    CHECK(v->held_micro == 250000);
    REQUIRE(v->attempt_history.size() == 2);
    const api::AttemptView& a = v->attempt_history[0];
    CHECK(a.id == AttemptId(7));
    CHECK(a.worker == WorkerId(3));
    CHECK(a.ended_at == std::optional<std::int64_t>(1700000002500));
    CHECK(a.exit_code == std::optional<std::int64_t>(1));
    CHECK(a.voided_at == std::optional<std::int64_t>(1700000003000));
    CHECK(v->attempt_history[1].gpu_index == -1);
    CHECK_FALSE(v->attempt_history[1].ended_at);
    CHECK(v->retries == 1);
    CHECK(a.retry == 0);
    CHECK(v->attempt_history[1].retry == 1);
    CHECK_FALSE(a.unconfirmed);
    CHECK(v->attempt_history[1].unconfirmed); // its worker has not reported since the pool was restored
    // Written back, the same JSON to the byte (what `status --json` prints).
    CHECK(api::to_json(*v) == j);
    CHECK(api::to_json(*v).dump() == j.dump());
}

TEST_CASE("job view: absent members take their defaults, unknown ones are ignored", "[api][jobs]") {
    auto v = api::job_view_from_json({{"id", 5}, {"state", "queued"}, {"from_the_future", 1}});
    REQUIRE(v.has_value());
    CHECK(v->id == JobId(5));
    CHECK(v->name.empty());
    CHECK_FALSE(v->cost_micro);
    CHECK(v->held_micro == 0);
    CHECK(v->attempt_history.empty());
    CHECK(v->spec == recipe::JobSpec{});
    CHECK_FALSE(api::to_json(*v).contains("cost_micro"));
}

TEST_CASE("job view: hostile bytes are refused with the member named", "[api][jobs]") {
    const json good = json::parse(k_job_view);
    CHECK(view_field(json::array()) == "body");
    CHECK(view_field(json("job")) == "body");
    json j = good;
    j.erase("id");
    CHECK(view_field(j) == "id");
    j = good;
    j.erase("state");
    CHECK(view_field(j) == "state");
    j = good;
    j["id"] = "12";
    CHECK(view_field(j) == "id");
    j = good;
    j["created_at"] = 1.5;
    CHECK(view_field(j) == "created_at");
    j = good;
    j["exit_code"] = true;
    CHECK(view_field(j) == "exit_code");
    j = good;
    j["reason"] = json::object();
    CHECK(view_field(j) == "reason");
    j = good;
    j["retries"] = -1;
    CHECK(view_field(j) == "retries");
    j = good;
    j["attempt_history"][1]["retry"] = "1";
    CHECK(view_field(j) == "attempt_history[1].retry");
    j = good;
    j["spec"]["image"] = 3;
    CHECK(view_field(j) == "spec.image");
    j = good;
    j["attempt_history"] = "none";
    CHECK(view_field(j) == "attempt_history");
    j = good;
    j["attempt_history"][1]["started_at"] = "soon";
    CHECK(view_field(j) == "attempt_history[1].started_at");
    j = good;
    j["attempt_history"][0] = 7;
    CHECK(view_field(j) == "attempt_history[0]");
}

TEST_CASE("job list: the wire names, a round trip, optional members", "[api][jobs]") {
    const json j = json::parse(k_job_list);
    auto list = api::job_list_from_json(j);
    REQUIRE(list.has_value());
    CHECK(list->more);
    REQUIRE(list->jobs.size() == 2);
    const api::JobSummary& s = list->jobs[0];
    CHECK(s.id == JobId(12));
    CHECK(s.team_name == std::optional<std::string>("fellows"));
    CHECK(s.submitted_by == std::optional<std::string>("alice"));
    CHECK(s.sweep_index == 3);
    CHECK(s.reason == "waiting for a GPU");
    CHECK(list->jobs[1].exit_code == std::optional<std::int64_t>(2));
    CHECK(api::to_json(*list) == j);
    // An older coordinator's entry: no team name, no submitter, no cost.
    auto old = api::job_list_from_json({{"jobs", json::array({{{"id", 1}, {"state", "queued"}, {"team", 2}}})}});
    REQUIRE(old.has_value());
    CHECK_FALSE(old->more);
    CHECK_FALSE(old->jobs[0].team_name);
    CHECK_FALSE(old->jobs[0].submitted_by);
    CHECK(old->jobs[0].cost_micro == 0);
    CHECK_FALSE(api::to_json(old->jobs[0]).contains("team_name"));
    json bad = j;
    bad["jobs"][1]["attempts"] = "one";
    CHECK(field_of<api::JobList>(api::job_list_from_json, bad) == "jobs[1].attempts");
    bad = j;
    bad["more"] = 1;
    CHECK(field_of<api::JobList>(api::job_list_from_json, bad) == "more");
}

TEST_CASE("log slice and cancel answers: the wire names, round trips, refusals", "[api][jobs]") {
    const json j = json::parse(R"({"attempt": 9, "offset": 0, "next_offset": 6, "finished": false, "data": "hello\n"})");
    auto s = api::log_slice_from_json(j);
    REQUIRE(s.has_value());
    CHECK(*s == api::LogSlice{AttemptId(9), 0, 6, false, "hello\n"});
    CHECK(api::to_json(*s) == j);
    for (const char* member : {"attempt", "next_offset", "finished", "data"}) {
        json bad = j;
        bad.erase(member);
        CHECK(field_of<api::LogSlice>(api::log_slice_from_json, bad) == member);
    }
    json bad = j;
    bad["data"] = json::array();
    CHECK(field_of<api::LogSlice>(api::log_slice_from_json, bad) == "data");

    const json cancelled = json::parse(R"({"cancelled": [12]})");
    auto c = api::job_cancelled_from_json(cancelled);
    REQUIRE(c.has_value());
    CHECK(c->cancelled == std::vector<JobId>{JobId(12)});
    CHECK(api::to_json(*c) == cancelled);
    CHECK(field_of<api::JobCancelled>(api::job_cancelled_from_json, json::parse(R"({"cancelled": ["x"]})")) ==
          "cancelled[0]");
    const json sweep = json::parse(R"({"sweep_id": 4, "cancelled": 3})");
    auto sc = api::sweep_cancelled_from_json(sweep);
    REQUIRE(sc.has_value());
    CHECK(*sc == api::SweepCancelled{SweepId(4), 3});
    CHECK(api::to_json(*sc) == sweep);
    CHECK(field_of<api::SweepCancelled>(api::sweep_cancelled_from_json, json::parse(R"({"sweep_id": 4})")) ==
          "cancelled");
}

TEST_CASE("jobs wire: the service's answers read back to the same JSON", "[api][jobs][service]") {
    test::svc::Pool p;
    auto sub = p.submit({test::svc::spec("a"), test::svc::spec("b")});
    auto c = p.server.client(p.member);
    const std::string id = std::to_string(sub["jobs"][0].get<std::int64_t>());
    const json view = test::svc::call(c, "GET", "/v1/jobs/" + id);
    auto v = api::job_view_from_json(view);
    REQUIRE(v.has_value());
    CHECK(api::to_json(*v) == view);
    const json list = test::svc::call(c, "GET", "/v1/jobs");
    auto l = api::job_list_from_json(list);
    REQUIRE(l.has_value());
    CHECK(l->jobs.size() == 2);
    CHECK(api::to_json(*l) == list);
    const json logs = test::svc::call(c, "GET", "/v1/jobs/" + id + "/logs?offset=0");
    auto s = api::log_slice_from_json(logs);
    REQUIRE(s.has_value());
    CHECK(api::to_json(*s) == logs);
    const json cancelled = test::svc::call(c, "POST", "/v1/jobs/" + id + "/cancel");
    auto jc = api::job_cancelled_from_json(cancelled);
    REQUIRE(jc.has_value());
    CHECK(api::to_json(*jc) == cancelled);
}

} // namespace test_jobs_wire
} // namespace
