// The heartbeat and its reply on the wire, and the rest of the workers' protocol (registration,
// completion): one struct per message for both ends; absent members take their defaults, every
// refused member is named, and the wire names are pinned by the JSON the worker and the
// coordinator wrote before the types were shared.
#include "core/api/heartbeat.hpp"
#include "core/api/worker_protocol.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_heartbeat {

using namespace gpupool;
using nlohmann::json;

namespace {

template <class Parse>
std::string refused(Parse parse, const json& j) {
    auto r = parse(j);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::invalid_input);
    return r.error().field;
}

const json k_inventory = {
    {"cpu_milli", 8000}, {"memory_mib", 32768}, {"gpus", json::array()}, {"slots", 0}, {"runtime", "podman"}};

} // namespace

TEST_CASE("heartbeat: the body the worker wrote before the shared type reads field by field", "[api][heartbeat]") {
    auto h = api::heartbeat_from_json(json::parse(
        R"({"running": [4, 9], "unhealthy_gpus": [1], "draining": true, "paused": false,
            "inventory": {"cpu_milli": 8000, "memory_mib": 32768, "gpus": [], "slots": 0, "runtime": "podman"}})"));
    REQUIRE(h.has_value());
    CHECK(h->running == std::vector<AttemptId>{AttemptId(4), AttemptId(9)});
    CHECK(h->unhealthy_gpus == std::vector<std::int64_t>{1});
    CHECK(h->draining);
    CHECK(h->sharing == api::SharingState::sharing);
    REQUIRE(h->inventory.has_value());
    CHECK(h->inventory->cpu_milli == 8000);
    CHECK(h->inventory->runtime == "podman");
}

TEST_CASE("heartbeat: absent members take their defaults, null included", "[api][heartbeat]") {
    for (const json& j : {json::object(), json{{"running", nullptr}, {"inventory", nullptr}, {"paused", nullptr}}}) {
        auto h = api::heartbeat_from_json(j);
        REQUIRE(h.has_value());
        CHECK(h->running.empty());
        CHECK(h->unhealthy_gpus.empty());
        CHECK(h->reclaimed_gpus.empty());
        CHECK_FALSE(h->draining);
        CHECK(h->sharing == api::SharingState::sharing);
        CHECK_FALSE(h->inventory.has_value());
        CHECK_FALSE(h->terms.has_value());
    }
}

TEST_CASE("heartbeat: to_json writes the wire names and survives a round trip", "[api][heartbeat]") {
    api::Heartbeat h;
    h.running = {AttemptId(4), AttemptId(9)};
    h.unhealthy_gpus = {0};
    h.sharing = api::SharingState::outside_window;
    h.sharing_changes_at_ms = 1'765'000'000'000;
    const json j = api::to_json(h);
    CHECK(j == json{{"running", {4, 9}},
                    {"unhealthy_gpus", {0}},
                    {"reclaimed_gpus", json::array()},
                    {"draining", false},
                    {"sharing", "outside_window"},
                    {"paused", true}, // for coordinators that read only this
                    {"sharing_changes_at_ms", 1'765'000'000'000}});
    h.reclaimed_gpus = {1, 0};
    h.terms = api::OwnerTerms{3600, {"fellows"}, {"ghcr.io/"}};
    h.inventory = api::inventory_from_json(k_inventory).value();
    auto back = api::heartbeat_from_json(api::to_json(h));
    REQUIRE(back.has_value());
    CHECK(back->running == h.running);
    CHECK(back->unhealthy_gpus == h.unhealthy_gpus);
    CHECK(back->reclaimed_gpus == std::vector<std::int64_t>{1, 0});
    CHECK(api::gpus_without_new_work(*back) == std::vector<std::int64_t>{0, 1}); // each once
    CHECK(back->sharing == api::SharingState::outside_window);
    CHECK(back->sharing_changes_at_ms == h.sharing_changes_at_ms);
    CHECK(back->terms == h.terms);
    CHECK(back->inventory == h.inventory);
}

TEST_CASE("heartbeat: every refused member is named, array elements by index", "[api][heartbeat]") {
    auto parse = [](const json& j) { return api::heartbeat_from_json(j); };
    CHECK(refused(parse, json::array()) == "body");
    CHECK(refused(parse, {{"running", 4}}) == "running");
    CHECK(refused(parse, {{"running", {1, 2, 3, "4"}}}) == "running[3]");
    CHECK(refused(parse, {{"running", {1.5}}}) == "running[0]");
    CHECK(refused(parse, {{"running", {1, 0}}}) == "running[1]");
    CHECK(refused(parse, {{"running", {-7}}}) == "running[0]");
    CHECK(refused(parse, {{"unhealthy_gpus", {0, -1}}}) == "unhealthy_gpus[1]");
    CHECK(refused(parse, {{"unhealthy_gpus", "0"}}) == "unhealthy_gpus");
    CHECK(refused(parse, {{"reclaimed_gpus", {-1}}}) == "reclaimed_gpus[0]");
    CHECK(refused(parse, {{"reclaimed_gpus", {{"gpu", 0}}}}) == "reclaimed_gpus");
    CHECK(refused(parse, {{"draining", 1}}) == "draining");
    CHECK(refused(parse, {{"paused", "yes"}}) == "paused");
    CHECK(refused(parse, {{"sharing", "napping"}}) == "sharing");
    CHECK(refused(parse, {{"sharing", true}}) == "sharing");
    CHECK(refused(parse, {{"sharing_changes_at_ms", -1}}) == "sharing_changes_at_ms");
    CHECK(refused(parse, {{"terms", {{"max_runtime_s", "12h"}}}}) == "terms.max_runtime_s");
    CHECK(refused(parse, {{"terms", {{"teams", {"a", 7}}}}}) == "terms.teams[1]");
    CHECK(refused(parse, {{"terms", {{"registries", std::vector<std::string>(65, "ghcr.io/")}}}}) == "terms.registries");
    CHECK(refused(parse, {{"terms", {{"teams", {std::string(300, 'x')}}}}}) == "terms.teams[0]");
    CHECK(refused(parse, {{"terms", 5}}) == "terms");
    CHECK(refused(parse, {{"inventory", {{"cpu_milli", 0}, {"memory_mib", 1}}}}) == "inventory.cpu_milli");
}

TEST_CASE("heartbeat: an older worker's paused bool reads as the paused state", "[api][heartbeat]") {
    auto h = api::heartbeat_from_json(json{{"paused", true}});
    REQUIRE(h.has_value());
    CHECK(h->sharing == api::SharingState::paused);
    auto both = api::heartbeat_from_json(json{{"paused", true}, {"sharing", "reclaimed"}});
    REQUIRE(both.has_value());
    CHECK(both->sharing == api::SharingState::reclaimed); // the state wins over the old bool
}

TEST_CASE("owner terms: a job outside them is named with why", "[api][heartbeat]") {
    const api::OwnerTerms open;
    CHECK_FALSE(api::outside_terms(open, "anyone", "ubuntu", 0));
    const api::OwnerTerms t{3600, {"fellows"}, {"ghcr.io/", "docker.io/library/"}};
    CHECK_FALSE(api::outside_terms(t, "fellows", "ubuntu:22.04", 600));
    CHECK_FALSE(api::outside_terms(t, "fellows", "docker.io/python:3", 600));
    CHECK_FALSE(api::outside_terms(t, "fellows", "ghcr.io/me/x:1", 3600));
    CHECK_THAT(*api::outside_terms(t, "others", "ubuntu", 600), Catch::Contains("team `others`"));
    CHECK_THAT(*api::outside_terms(t, "fellows", "me/x", 600), Catch::Contains("docker.io/me/x"));
    CHECK(api::outside_terms(t, "fellows", "ghcr.io.evil.example/x", 600));
    CHECK(api::outside_terms(t, "fellows", "localhost/x", 600));
    CHECK_THAT(*api::outside_terms(t, "fellows", "ubuntu", 7200), Catch::Contains("at most 1h"));
    CHECK_THAT(*api::outside_terms(t, "fellows", "ubuntu", 0), Catch::Contains("without a limit"));
    CHECK(api::qualified_image("localhost/gpupool/busybox:latest") == "localhost/gpupool/busybox:latest");
    CHECK(api::qualified_image("host:5000/x") == "host:5000/x:latest"); // no tag: the engines' `latest`, spelled out
    CHECK(api::qualified_image("index.docker.io/me/x") == "docker.io/me/x:latest");
    CHECK(api::qualified_image("host:5000/x@sha256:" + std::string(64, 'a')) == "host:5000/x@sha256:" + std::string(64, 'a'));
}

TEST_CASE("heartbeat reply: the coordinator's answer reads back, warnings included", "[api][heartbeat]") {
    auto old = api::heartbeat_reply_from_json(json::parse(R"({"stop": [12], "lease_ms": 30000})"));
    REQUIRE(old.has_value());
    CHECK(old->stop == std::vector<AttemptId>{AttemptId(12)});
    CHECK(old->lease_ms == 30'000);
    CHECK(old->warnings.empty());
    api::HeartbeatReply r{{AttemptId(3), AttemptId(5)}, 9'000, {"GPU model `X1` is not in the rate catalog"}};
    const json j = api::to_json(r);
    CHECK(j ==
          json{{"stop", {3, 5}}, {"lease_ms", 9'000}, {"warnings", {"GPU model `X1` is not in the rate catalog"}}});
    auto back = api::heartbeat_reply_from_json(j);
    REQUIRE(back.has_value());
    CHECK(back->stop == r.stop);
    CHECK(back->lease_ms == r.lease_ms);
    CHECK(back->warnings == r.warnings);
    auto defaults = api::heartbeat_reply_from_json(json::object());
    REQUIRE(defaults.has_value());
    CHECK(defaults->stop.empty());
    CHECK(defaults->lease_ms == 0);
    auto parse = [](const json& x) { return api::heartbeat_reply_from_json(x); };
    CHECK(refused(parse, {{"stop", {"3"}}}) == "stop[0]");
    CHECK(refused(parse, {{"lease_ms", -1}}) == "lease_ms");
    CHECK(refused(parse, {{"warnings", {1}}}) == "warnings[0]");
}

TEST_CASE("heartbeat reply: why each attempt stops reads back, one per attempt at most", "[api][heartbeat]") {
    api::HeartbeatReply r{{AttemptId(3), AttemptId(5)}, 9'000, {}, {{AttemptId(3), "cancelled by its submitter"}}};
    const json j = api::to_json(r);
    CHECK(j["stop_reasons"] == json::parse(R"([{"attempt": 3, "reason": "cancelled by its submitter"}])"));
    auto back = api::heartbeat_reply_from_json(j);
    REQUIRE(back.has_value());
    CHECK(back->stop_reasons == r.stop_reasons);
    auto parse = [](const json& x) { return api::heartbeat_reply_from_json(x); };
    CHECK(refused(parse, {{"stop", {3}}, {"stop_reasons", {{{"attempt", 0}, {"reason", "x"}}}}}) ==
          "stop_reasons[0].attempt");
    CHECK(refused(parse, {{"stop", {3}}, {"stop_reasons", {{{"attempt", 3}}}}}) == "stop_reasons[0].reason");
    CHECK(refused(parse, {{"stop", json::array()}, {"stop_reasons", {{{"attempt", 3}, {"reason", "x"}}}}}) ==
          "stop_reasons");
}

TEST_CASE("registration: request and reply keep their wire names, refusals are named", "[api][registration]") {
    auto req = api::registration_from_json({{"name", "gpu-box"}, {"inventory", k_inventory}});
    REQUIRE(req.has_value());
    CHECK(req->name == "gpu-box");
    CHECK(req->inventory.memory_mib == 32768);
    CHECK(api::to_json(*req) == json{{"name", "gpu-box"}, {"inventory", api::to_json(req->inventory)}});
    auto parse = [](const json& j) { return api::registration_from_json(j); };
    CHECK(refused(parse, {{"inventory", k_inventory}}) == "name");
    CHECK(refused(parse, {{"name", 3}, {"inventory", k_inventory}}) == "name");
    CHECK(refused(parse, {{"name", std::string(4097, 'n')}, {"inventory", k_inventory}}) == "name");
    CHECK(refused(parse, {{"name", "gpu-box"}}) == "inventory");

    auto reply =
        api::registration_reply_from_json(json::parse(R"({"worker_id": 7, "token": "gpw_x", "warnings": []})"));
    REQUIRE(reply.has_value());
    CHECK(reply->worker_id == WorkerId(7));
    CHECK(reply->token == "gpw_x");
    CHECK(api::to_json(*reply) == json{{"worker_id", 7}, {"token", "gpw_x"}, {"warnings", json::array()}});
    auto parse_reply = [](const json& j) { return api::registration_reply_from_json(j); };
    CHECK(refused(parse_reply, {{"token", "gpw_x"}}) == "worker_id");
    CHECK(refused(parse_reply, {{"worker_id", 0}, {"token", "gpw_x"}}) == "worker_id");
    CHECK(refused(parse_reply, {{"worker_id", 7}}) == "token");
}

TEST_CASE("completion: the outcome defaults to exited, the exit code may be absent", "[api][completion]") {
    auto bare = api::completion_from_json(json::object());
    REQUIRE(bare.has_value());
    CHECK_FALSE(bare->exit_code.has_value());
    CHECK(bare->reason.empty());
    CHECK(bare->outcome == api::Outcome::exited);
    auto old = api::completion_from_json(
        json::parse(R"({"reason": "exited with status 3", "outcome": "exited", "exit_code": 3})"));
    REQUIRE(old.has_value());
    CHECK(old->exit_code == 3);
    CHECK(old->reason == "exited with status 3");
    const api::Completion fault{std::nullopt, "could not start", api::Outcome::worker_fault};
    CHECK(api::to_json(fault) == json{{"reason", "could not start"}, {"outcome", "worker_fault"}});
    auto back = api::completion_from_json(api::to_json(*old));
    REQUIRE(back.has_value());
    CHECK(back->exit_code == 3);
    CHECK(api::completion_from_json({{"exit_code", nullptr}, {"outcome", "owner_preempted"}})->outcome ==
          api::Outcome::owner_preempted);
    auto parse = [](const json& j) { return api::completion_from_json(j); };
    CHECK(refused(parse, {{"exit_code", "0"}}) == "exit_code");
    CHECK(refused(parse, {{"exit_code", 0.5}}) == "exit_code");
    CHECK(refused(parse, {{"outcome", "exploded"}}) == "outcome");
    CHECK(refused(parse, {{"outcome", 1}}) == "outcome");
    CHECK(refused(parse, {{"reason", std::string(4097, 'r')}}) == "reason");
}

TEST_CASE("heartbeat: downloads in progress travel by attempt, and a bad entry is named", "[api][heartbeat][model-cache]") {
    api::Heartbeat h;
    h.running = {AttemptId(4)};
    h.fetching = {{AttemptId(4), 3'200'000'000, 14'000'000'000}};
    auto back = api::heartbeat_from_json(api::to_json(h));
    REQUIRE(back.has_value());
    REQUIRE(back->fetching.size() == 1);
    CHECK(back->fetching[0] == api::FetchProgress{AttemptId(4), 3'200'000'000, 14'000'000'000});
    CHECK(api::heartbeat_from_json(json{{"running", json::array()}})->fetching.empty());
    json bad = api::to_json(h);
    bad["fetching"][0]["done_bytes"] = -5;
    CHECK(refused(api::heartbeat_from_json, bad) == "fetching[0].done_bytes");
    bad["fetching"] = "all of it";
    CHECK(refused(api::heartbeat_from_json, bad) == "fetching");
}

} // namespace test_heartbeat
} // namespace
