// A submission on the wire (core/api/submit.hpp): the body the client sends and the service reads,
// with its defaults for absent members and a refusal naming every bad field; and the answer.
#include "core/api/field_reader.hpp"
#include "core/api/submit.hpp"
#include "core/recipe/recipe_json.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_submit {

using namespace gpupool;
using nlohmann::json;

namespace {

recipe::JobSpec spec(const std::string& name, std::int64_t sweep_index = 0) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"echo", name};
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    s.sweep_index = sweep_index;
    return s;
}

json body() { return {{"jobs", recipe::to_wire_json(std::vector<recipe::JobSpec>{spec("a", 0), spec("b", 1)})}}; }

std::string field_of(const json& j) {
    auto r = api::submit_request_from_json(j);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::invalid_input);
    return r.error().field;
}

} // namespace

TEST_CASE("submit request: absent members take their defaults", "[api][submit]") {
    auto r = api::submit_request_from_json(body());
    REQUIRE(r.has_value());
    CHECK(r->source == "api");
    CHECK(r->max_parallel == 0);
    CHECK_FALSE(r->team);
    CHECK_FALSE(r->allow_unfunded);
    CHECK(r->idempotency_key.empty());
    REQUIRE(r->jobs.size() == 2);
    CHECK(r->jobs[1] == spec("b", 1));
    // null is absent
    json j = body();
    j["source"] = nullptr;
    j["max_parallel"] = nullptr;
    j["allow_unfunded"] = nullptr;
    j["idempotency_key"] = nullptr;
    r = api::submit_request_from_json(j);
    REQUIRE(r.has_value());
    CHECK(r->source == "api");
    CHECK(r->idempotency_key.empty());
}

TEST_CASE("submit request: the wire names, pinned by a literal body", "[api][submit]") {
    const json j = json::parse(R"({"source": "eval.toml", "max_parallel": 4, "team": "fellows",
        "allow_unfunded": true, "idempotency_key": "submit-abc",
        "jobs": [{"name": "a", "image": "busybox", "command": ["echo", "a"]}]})");
    auto r = api::submit_request_from_json(j);
    REQUIRE(r.has_value());
    CHECK(r->source == "eval.toml");
    CHECK(r->max_parallel == 4);
    CHECK(r->team == std::optional<std::string>("fellows"));
    CHECK(r->allow_unfunded);
    CHECK(r->idempotency_key == "submit-abc");
    REQUIRE(r->jobs.size() == 1);
    CHECK(r->jobs[0].name == "a");
}

TEST_CASE("submit request: a round trip, and defaults left out of the body", "[api][submit]") {
    api::SubmitRequest r;
    r.source = "sweep.toml";
    r.max_parallel = 2;
    r.jobs = {spec("a", 0), spec("b", 1)};
    // The body the commands have always sent: no team, allow_unfunded or idempotency_key unless set.
    CHECK(api::to_json(r) ==
          json{{"source", "sweep.toml"}, {"max_parallel", 2}, {"jobs", recipe::to_wire_json(r.jobs)}});
    r.team = "fellows";
    r.allow_unfunded = true;
    r.idempotency_key = "submit-0123";
    auto back = api::submit_request_from_json(api::to_json(r));
    REQUIRE(back.has_value());
    CHECK(back->source == r.source);
    CHECK(back->max_parallel == r.max_parallel);
    CHECK(back->jobs == r.jobs);
    CHECK(back->team == r.team);
    CHECK(back->allow_unfunded);
    CHECK(back->idempotency_key == r.idempotency_key);
}

TEST_CASE("submit request: every refusal names its field", "[api][submit]") {
    json j = body();
    j["max_parallel"] = 1.5;
    CHECK(field_of(j) == "max_parallel");
    j = body();
    j["max_parallel"] = "2";
    CHECK(field_of(j) == "max_parallel");
    j = body();
    j["source"] = 7;
    CHECK(field_of(j) == "source");
    j = body();
    j["source"] = std::string(api::k_max_text_bytes + 1, 'x');
    CHECK(field_of(j) == "source");
    j = body();
    j["allow_unfunded"] = "yes";
    CHECK(field_of(j) == "allow_unfunded");
    j = body();
    j["idempotency_key"] = json::array();
    CHECK(field_of(j) == "idempotency_key");
    j = body();
    j.erase("jobs");
    CHECK(field_of(j) == "jobs");
    j = body();
    j["jobs"] = json::object();
    CHECK(field_of(j) == "jobs");
    j = body();
    j["jobs"][1]["image"] = 3;
    CHECK(field_of(j) == "jobs[1].image");
    CHECK(field_of(json::array()) == "body");
}

TEST_CASE("submit request: a team that is not a string is ignored, as it always was", "[api][submit]") {
    json j = body();
    j["team"] = 12;
    auto r = api::submit_request_from_json(j);
    REQUIRE(r.has_value());
    CHECK_FALSE(r->team);
}

TEST_CASE("submit reply: the wire names, a round trip and refusals", "[api][submit]") {
    auto r = api::submit_reply_from_json(json::parse(R"({"sweep_id": 4, "jobs": [12, 13]})"));
    REQUIRE(r.has_value());
    CHECK(r->sweep_id == SweepId(4));
    CHECK(r->jobs == std::vector<JobId>{JobId(12), JobId(13)});
    CHECK(api::to_json(*r) == json::parse(R"({"sweep_id": 4, "jobs": [12, 13]})"));
    auto back = api::submit_reply_from_json(api::to_json(*r));
    REQUIRE(back.has_value());
    CHECK(*back == *r);
    for (const char* bad : {R"({"jobs": [1]})", R"({"sweep_id": "4", "jobs": [1]})", R"({"sweep_id": 4})",
                            R"({"sweep_id": 4, "jobs": [1, "2"]})", R"([])"}) {
        INFO(bad);
        auto refused = api::submit_reply_from_json(json::parse(bad));
        REQUIRE_FALSE(refused.has_value());
        CHECK_FALSE(refused.error().field.empty());
    }
    CHECK(api::submit_reply_from_json(json::parse(R"({"sweep_id": 4, "jobs": [1, "2"]})")).error().field == "jobs[1]");
}

} // namespace test_submit
} // namespace
