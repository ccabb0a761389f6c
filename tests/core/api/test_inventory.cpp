// The worker inventory on the wire: validated once where it arrives, every error naming its field;
// compared by value; over HTTP a bad one is refused with the field and changes nothing.
#include "core/api/inventory.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_inventory {

using namespace gpupool;
using nlohmann::json;

namespace {

json two_gpus() {
    return {{"cpu_milli", 8000},
            {"memory_mib", 32768},
            {"slots", 2},
            {"runtime", "podman"},
            {"gpus",
             json::array({{{"index", 0}, {"model", "L4"}, {"memory_mib", 24576}, {"uuid", "GPU-a"}},
                          {{"index", 1}, {"model", "L4"}, {"memory_mib", 24576}, {"memory_enforcement", "mps"}}})}};
}

std::string field_of(const json& j) {
    auto r = api::inventory_from_json(j);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::invalid_input);
    return r.error().field;
}

} // namespace

TEST_CASE("inventory: reads every field and survives a round trip by value", "[api][inventory]") {
    auto inv = api::inventory_from_json(two_gpus());
    REQUIRE(inv);
    CHECK(inv->cpu_milli == 8000);
    CHECK(inv->memory_mib == 32768);
    CHECK(inv->slots == 2);
    CHECK(inv->runtime == "podman");
    REQUIRE(inv->gpus.size() == 2);
    CHECK(inv->gpus[0].uuid == "GPU-a");
    CHECK(inv->gpus[1].index == 1);
    CHECK(inv->gpus[1].memory_enforcement == "mps");
    auto again = api::inventory_from_json(api::to_json(*inv));
    REQUIRE(again);
    CHECK(*again == *inv);
    api::Inventory other = *inv;
    other.gpus[1].memory_mib -= 1;
    CHECK_FALSE(other == *inv); // a changed machine is noticed
}

TEST_CASE("inventory: optional fields default, unknown keys are ignored", "[api][inventory]") {
    auto inv = api::inventory_from_json({{"cpu_milli", 1000}, {"memory_mib", 512}, {"from_the_future", true}});
    REQUIRE(inv);
    CHECK(inv->slots == 0);
    CHECK(inv->gpus.empty());
    CHECK(inv->runtime.empty());
}

TEST_CASE("inventory: every refusal names its field", "[api][inventory]") {
    CHECK(field_of(json::array()) == "inventory");
    CHECK(field_of(nullptr) == "inventory");
    json j = two_gpus();
    j.erase("cpu_milli");
    CHECK(field_of(j) == "inventory.cpu_milli");
    j = two_gpus();
    j["memory_mib"] = 0;
    CHECK(field_of(j) == "inventory.memory_mib");
    j = two_gpus();
    j["memory_mib"] = "lots";
    CHECK(field_of(j) == "inventory.memory_mib");
    j = two_gpus();
    j["slots"] = -2;
    CHECK(field_of(j) == "inventory.slots");
    j = two_gpus();
    j["gpus"] = "L4";
    CHECK(field_of(j) == "inventory.gpus");
    j = two_gpus();
    j["gpus"][1].erase("memory_mib");
    CHECK(field_of(j) == "inventory.gpus[1].memory_mib");
    j = two_gpus();
    j["gpus"][0]["model"] = 7;
    CHECK(field_of(j) == "inventory.gpus[0].model");
}

TEST_CASE("inventory: a heartbeat with a bad inventory is refused with its field and changes nothing",
          "[api][inventory][service]") {
    test::svc::Pool p;
    auto w = p.server.client(p.worker);
    json bad = test::svc::inventory();
    bad["gpus"][0]["memory_mib"] = -1;
    auto r = w.request("POST", "/v1/workers/heartbeat", json{{"running", json::array()}, {"inventory", bad}}.dump());
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(json::parse(r->body)["field"] == "inventory.gpus[0].memory_mib");

    json more = test::svc::inventory();
    more["slots"] = 3;
    test::svc::call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}, {"inventory", more}});
    auto admin = p.server.client(p.server.admin_token);
    auto workers = test::svc::call(admin, "GET", "/v1/workers");
    REQUIRE(workers["workers"].size() == 1);
    CHECK(workers["workers"][0]["inventory"]["slots"] == 3);
    CHECK(workers["workers"][0]["inventory"]["gpus"][0]["memory_mib"] == 24576);
}

TEST_CASE("inventory: the worker's cached models and free cache space, validated", "[api][inventory][model-cache]") {
    json j = two_gpus();
    j["cached_models"] = json::array({{{"model", "org/tiny"}, {"revision", "main"}, {"bytes", 4096}}});
    j["cache_free_mib"] = 20480;
    auto inv = api::inventory_from_json(j);
    REQUIRE(inv);
    REQUIRE(inv->cached_models.size() == 1);
    CHECK(inv->cached_models[0] == api::CachedModelInfo{"org/tiny", "main", 4096});
    CHECK(inv->cache_free_mib == 20480);
    auto again = api::inventory_from_json(api::to_json(*inv));
    REQUIRE(again);
    CHECK(*again == *inv);
    CHECK(api::inventory_from_json(two_gpus())->cache_free_mib == -1); // not said

    json bad = j;
    bad["cached_models"][0]["model"] = "../../etc";
    CHECK(field_of(bad) == "inventory.cached_models[0].model");
    bad = j;
    bad["cached_models"][0]["bytes"] = -1;
    CHECK(field_of(bad) == "inventory.cached_models[0].bytes");
    bad = j;
    bad["cached_models"] = json::array();
    for (int i = 0; i < 1001; ++i) {
        bad["cached_models"].push_back({{"model", "org/m" + std::to_string(i)}});
    }
    CHECK(field_of(bad) == "inventory.cached_models");
    bad = j;
    bad["cache_free_mib"] = "lots";
    CHECK(field_of(bad) == "inventory.cache_free_mib");
}

} // namespace test_inventory
} // namespace
