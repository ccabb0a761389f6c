// The assignment on the wire: one struct for the coordinator that writes it and the worker that
// reads it; every member validated where it arrives, errors naming the field with its path, the
// defaults of an older coordinator's answer kept, and the wire names pinned by the JSON the
// coordinator wrote before the type was shared.
#include "core/api/assignment.hpp"
#include "core/recipe/recipe_json.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_assignment {

using namespace gpupool;
using nlohmann::json;

namespace {

// A poll answer's assignment as the coordinator wrote it (service_json.cpp's assignment_json).
const char* const k_old_wire = R"({
  "attempt": 31, "job": 12, "attempt_number": 2, "gpu_index": 1, "gpu_milli": 250,
  "team": 3, "team_name": "fellows",
  "spec": {"name": "sweep-3", "image": "localhost/gpupool/busybox:latest", "command": ["python", "train.py"],
           "resources": {"gpus": 1, "gpu_milli": 250, "cpu_milli": 2000, "memory_mib": 4096, "max_runtime_s": 600},
           "params": {"lr": "0.1"}, "env": {"MODE": "test"}}
})";

api::Assignment sample() {
    api::Assignment a;
    a.attempt = AttemptId(31);
    a.job = JobId(12);
    a.attempt_number = 2;
    a.gpu_index = 1;
    a.gpu_milli = 250;
    a.team = TeamId(3);
    a.team_name = "fellows";
    a.spec.name = "sweep-3";
    a.spec.image = "localhost/gpupool/busybox:latest";
    a.spec.command = {"python", "train.py"};
    a.spec.resources.gpus = 1;
    a.spec.resources.gpu_milli = 250;
    a.spec.resources.cpu_milli = 2000;
    a.spec.resources.memory_mib = 4096;
    a.spec.resources.max_runtime_s = 600;
    a.spec.params = {{"lr", "0.1"}};
    a.spec.env = {{"MODE", "test"}};
    return a;
}

// The field a refused assignment names.
std::string refused(const json& j) {
    auto r = api::assignment_from_json(j, "assignments[2]");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::invalid_input);
    return r.error().field;
}

json with(const std::string& key, const json& value) {
    json j = api::to_json(sample());
    j[key] = value;
    return j;
}

json without(const std::string& key) {
    json j = api::to_json(sample());
    j.erase(key);
    return j;
}

} // namespace

TEST_CASE("assignment: the JSON the coordinator wrote before the shared type reads field by field",
          "[api][assignment]") {
    auto a = api::assignment_from_json(json::parse(k_old_wire));
    REQUIRE(a.has_value());
    CHECK(a->attempt == AttemptId(31));
    CHECK(a->job == JobId(12));
    CHECK(a->attempt_number == 2);
    CHECK(a->gpu_index == 1);
    CHECK(a->gpu_milli == 250);
    CHECK(a->team == TeamId(3));
    CHECK(a->team_name == "fellows");
    CHECK(a->spec.name == "sweep-3");
    CHECK(a->spec.command == std::vector<std::string>{"python", "train.py"});
    CHECK(a->spec.resources.memory_mib == 4096);
    CHECK(a->spec.params == decltype(a->spec.params){{"lr", "0.1"}});
}

TEST_CASE("assignment: to_json writes the wire names, the spec in its wire form", "[api][assignment]") {
    const json j = api::to_json(sample());
    const json old = json::parse(k_old_wire);
    for (const char* key : {"attempt", "job", "attempt_number", "gpu_index", "gpu_milli", "team", "team_name"}) {
        INFO(key);
        CHECK(j.at(key) == old.at(key));
    }
    CHECK(j.size() == old.size() + 1); // and idle_timeout_s, which came later
    CHECK(j.at("idle_timeout_s") == 0);
    CHECK(j.at("spec") == recipe::to_wire_json(sample().spec));
}

TEST_CASE("assignment: a round trip keeps every field", "[api][assignment]") {
    auto back = api::assignment_from_json(api::to_json(sample()));
    REQUIRE(back.has_value());
    CHECK(api::to_json(*back) == api::to_json(sample()));
    CHECK(back->attempt == AttemptId(31));
    CHECK(back->team == TeamId(3));
}

TEST_CASE("assignment: an older coordinator's answer takes the defaults", "[api][assignment]") {
    json j = api::to_json(sample());
    for (const char* key : {"attempt_number", "gpu_index", "gpu_milli", "team", "team_name"}) {
        j.erase(key);
    }
    auto a = api::assignment_from_json(j);
    REQUIRE(a.has_value());
    CHECK(a->attempt_number == 1);
    CHECK(a->gpu_index == -1);
    CHECK(a->gpu_milli == 0);
    CHECK(a->team == TeamId(0));
    CHECK(a->team_name.empty());
    j["team"] = nullptr; // null is absent
    CHECK(api::assignment_from_json(j).has_value());
}

TEST_CASE("assignment: every refused member is named with its path", "[api][assignment]") {
    CHECK(refused(json::array()) == "assignments[2]");
    CHECK(refused(without("attempt")) == "assignments[2].attempt");
    CHECK(refused(without("job")) == "assignments[2].job");
    CHECK(refused(without("spec")) == "assignments[2].spec");
    CHECK(refused(with("attempt", 0)) == "assignments[2].attempt");
    CHECK(refused(with("attempt", -4)) == "assignments[2].attempt");
    CHECK(refused(with("attempt", "31")) == "assignments[2].attempt");
    CHECK(refused(with("attempt", 31.5)) == "assignments[2].attempt");
    CHECK(refused(with("attempt", true)) == "assignments[2].attempt");
    CHECK(refused(with("attempt", json(18446744073709551615ULL))) == "assignments[2].attempt");
    CHECK(refused(with("job", 0)) == "assignments[2].job");
    CHECK(refused(with("attempt_number", 0)) == "assignments[2].attempt_number");
    CHECK(refused(with("gpu_index", -2)) == "assignments[2].gpu_index");
    CHECK(refused(with("gpu_milli", -1)) == "assignments[2].gpu_milli");
    CHECK(refused(with("gpu_milli", 1001)) == "assignments[2].gpu_milli");
    CHECK(refused(with("team", -1)) == "assignments[2].team");
    CHECK(refused(with("team_name", 7)) == "assignments[2].team_name");
    CHECK(refused(with("team_name", std::string(257, 't'))) == "assignments[2].team_name");
    CHECK(refused(with("spec", "a job")) == "assignments[2].spec");
    json bad_image = api::to_json(sample());
    bad_image["spec"]["image"] = "--privileged";
    CHECK(refused(bad_image) == "assignments[2].spec.image");
}

TEST_CASE("assignment: the edges of the ranges are taken", "[api][assignment]") {
    CHECK(api::assignment_from_json(with("gpu_milli", 1000)).has_value());
    CHECK(api::assignment_from_json(with("gpu_milli", 0)).has_value());
    CHECK(api::assignment_from_json(with("gpu_index", -1)).has_value());
    CHECK(api::assignment_from_json(with("team_name", std::string(256, 't'))).has_value());
    CHECK(api::assignment_from_json(with("unknown_member", "ignored")).has_value());
}

TEST_CASE("assignment: the idle timeout in force travels, and a bad one is named", "[api][assignment]") {
    api::Assignment a = sample();
    a.idle_timeout_s = 1800;
    auto back = api::assignment_from_json(api::to_json(a));
    REQUIRE(back.has_value());
    CHECK(back->idle_timeout_s == 1800);
    CHECK(api::assignment_from_json(json::parse(k_old_wire))->idle_timeout_s == 0); // an older coordinator: never
    CHECK(refused(with("idle_timeout_s", -1)) == "assignments[2].idle_timeout_s");
    CHECK(refused(with("idle_timeout_s", "30m")) == "assignments[2].idle_timeout_s");
}

} // namespace test_assignment
} // namespace
