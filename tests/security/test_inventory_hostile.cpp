// A hostile worker's inventory and heartbeat (security review, "medium 3"): every list and string a
// worker sends is bounded where it arrives, GPU indexes are exactly 0..n-1, control characters are
// refused, and each refusal names its field. Before these checks a worker could register 19,000 GPU
// kinds (a member's estimate of a 10,000-job sweep then took 30 s and blocked every other request)
// or 5,000 GPUs (past the scheduler's fixed per-worker arrays). The low finding alongside: a GPU whose
// declared memory is not its catalog model's is reported at registration and in `admin workers`.
#include "core/api/heartbeat.hpp"
#include "core/api/inventory.hpp"
#include "core/api/worker_protocol.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_inventory_hostile {

using namespace gpupool;
using nlohmann::json;

namespace {

json gpu(std::int64_t index, const std::string& model = "L4", std::int64_t memory_mib = 24576) {
    return {{"index", index}, {"model", model}, {"memory_mib", memory_mib}};
}

json with_gpus(std::size_t n) {
    json gpus = json::array();
    for (std::size_t i = 0; i < n; ++i) {
        gpus.push_back(gpu(static_cast<std::int64_t>(i)));
    }
    return {{"cpu_milli", 16000}, {"memory_mib", 65536}, {"runtime", "podman"}, {"gpus", gpus}};
}

json changed(json j, const std::function<void(json&)>& change) {
    change(j);
    return j;
}

struct Refused {
    const char* what;
    json inventory;
    const char* field;
};

} // namespace

TEST_CASE("hostile inventory: oversize lists and strings, control characters and bad indexes are refused by field",
          "[inventory][security]") {
    const std::string mib(std::size_t{1} << 20, 'A');
    const std::vector<Refused> cases{
        {"5,000 GPUs", with_gpus(5000), "inventory.gpus"},
        {"one GPU past the cap", with_gpus(api::k_max_gpus + 1), "inventory.gpus"},
        {"a 1 MiB model name", changed(with_gpus(2), [&](json& j) { j["gpus"][1]["model"] = mib; }),
         "inventory.gpus[1].model"},
        {"a 257-byte model name", changed(with_gpus(1), [](json& j) { j["gpus"][0]["model"] = std::string(257, 'x'); }),
         "inventory.gpus[0].model"},
        {"an escape sequence in a model name",
         changed(with_gpus(1), [](json& j) { j["gpus"][0]["model"] = "L4\x1b[2J"; }), "inventory.gpus[0].model"},
        {"a C1 control (U+009B) in a model name",
         changed(with_gpus(1), [](json& j) { j["gpus"][0]["model"] = "L4\xc2\x9b" "31m"; }), "inventory.gpus[0].model"},
        {"a newline in a uuid", changed(with_gpus(2), [](json& j) { j["gpus"][1]["uuid"] = "GPU-a\nforged log line"; }),
         "inventory.gpus[1].uuid"},
        {"a 1 MiB uuid", changed(with_gpus(1), [&](json& j) { j["gpus"][0]["uuid"] = mib; }), "inventory.gpus[0].uuid"},
        {"a NUL in memory_enforcement",
         changed(with_gpus(1), [](json& j) { j["gpus"][0]["memory_enforcement"] = std::string("mps\0x", 5); }),
         "inventory.gpus[0].memory_enforcement"},
        {"a number as memory_enforcement",
         changed(with_gpus(1), [](json& j) { j["gpus"][0]["memory_enforcement"] = 3; }),
         "inventory.gpus[0].memory_enforcement"},
        {"a 1 MiB runtime name", changed(with_gpus(0), [&](json& j) { j["runtime"] = mib; }), "inventory.runtime"},
        {"a control character in the runtime name", changed(with_gpus(0), [](json& j) { j["runtime"] = "podman\r"; }),
         "inventory.runtime"},
        {"a negative index", changed(with_gpus(2), [](json& j) { j["gpus"][1]["index"] = -1; }),
         "inventory.gpus[1].index"},
        {"a repeated index", changed(with_gpus(3), [](json& j) { j["gpus"][2]["index"] = 0; }),
         "inventory.gpus[2].index"},
        {"a gap in the indexes (0, 1, 3)", changed(with_gpus(3), [](json& j) { j["gpus"][2]["index"] = 3; }),
         "inventory.gpus[2].index"},
        {"an index past any GPU", changed(with_gpus(1), [](json& j) { j["gpus"][0]["index"] = 1'000'000; }),
         "inventory.gpus[0].index"},
        {"an index that is not an integer", changed(with_gpus(2), [](json& j) { j["gpus"][1]["index"] = "1"; }),
         "inventory.gpus[1].index"},
        {"more than 16 TiB on one GPU",
         changed(with_gpus(1), [](json& j) { j["gpus"][0]["memory_mib"] = api::k_max_gpu_memory_mib + 1; }),
         "inventory.gpus[0].memory_mib"},
        {"a machine memory past any machine",
         changed(with_gpus(0), [](json& j) { j["memory_mib"] = std::int64_t{1} << 62; }),
         "inventory.memory_mib"},
        {"a control character in a cached model's revision",
         changed(with_gpus(0),
                 [](json& j) { j["cached_models"] = json::array({{{"model", "org/m"}, {"revision", "main\x07"}}}); }),
         "inventory.cached_models[0].revision"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        auto r = api::inventory_from_json(c.inventory);
        CHECK_FALSE(r); // each row on its own: all of them were accepted before
        if (!r) {
            CHECK(r.error().code == ErrorCode::invalid_input);
            CHECK(r.error().field == c.field);
        }
    }
}

TEST_CASE("hostile inventory: GPUs out of order are accepted and read back by index, at the limits too",
          "[inventory][security]") {
    json j = with_gpus(0);
    for (std::int64_t index : {3, 0, 7, 1, 6, 2, 5, 4}) {
        j["gpus"].push_back(gpu(index, "L4-" + std::to_string(index), 20000 + index));
    }
    auto inv = api::inventory_from_json(j);
    REQUIRE(inv);
    REQUIRE(inv->gpus.size() == 8);
    for (std::size_t i = 0; i < 8; ++i) {
        // A GPU's position is its index (what the coordinator assigns), and it keeps its own fields.
        CHECK(inv->gpus[i].index == static_cast<std::int64_t>(i));
        CHECK(inv->gpus[i].model == "L4-" + std::to_string(i));
        CHECK(inv->gpus[i].memory_mib == 20000 + static_cast<std::int64_t>(i));
    }
    auto again = api::inventory_from_text(api::to_text(*inv));
    REQUIRE(again);
    CHECK(*again == *inv);

    json most = with_gpus(api::k_max_gpus);
    most["gpus"][0]["model"] = std::string(api::k_max_inventory_text_bytes, 'm');
    most["gpus"][0]["uuid"] = "GPU-\xc3\xa9t\xc3\xa9"; // UTF-8 text is printable
    most["gpus"][0]["memory_mib"] = api::k_max_gpu_memory_mib;
    most["gpus"][1].erase("index"); // workers before `index`: their position
    auto full = api::inventory_from_json(most);
    REQUIRE(full);
    CHECK(full->gpus.size() == api::k_max_gpus);
    CHECK(full->gpus[1].index == 1);
}

TEST_CASE("hostile heartbeat and registration: GPU index lists, running attempts and the name are bounded",
          "[inventory][security]") {
    const auto field = [](const json& body) {
        auto h = api::heartbeat_from_json(body);
        CHECK_FALSE(h);
        return h ? std::string("(accepted)") : h.error().field;
    };
    CHECK(field({{"unhealthy_gpus", {0, 64}}}) == "unhealthy_gpus[1]");
    CHECK(field({{"reclaimed_gpus", json(std::vector<int>(65, 0))}}) == "reclaimed_gpus");
    CHECK(field({{"gpu_memory_used_mib", {api::k_max_gpu_memory_mib + 1}}}) == "gpu_memory_used_mib[0]");
    std::vector<std::int64_t> running(api::k_max_running + 1);
    for (std::size_t i = 0; i < running.size(); ++i) {
        running[i] = static_cast<std::int64_t>(i) + 1;
    }
    CHECK(field({{"running", running}}) == "running");
    CHECK(field({{"inventory", with_gpus(5000)}}) == "inventory.gpus");
    CHECK(field({{"terms", {{"teams", json::array({"fellows\x1b]0;owned\x07"})}}}}) == "terms.teams[0]");
    CHECK(api::heartbeat_from_json({{"unhealthy_gpus", {0, 63}}, {"running", {1, 2}}}));

    auto reg = api::registration_from_json({{"name", std::string(api::k_max_worker_name_bytes + 1, 'n')},
                                            {"inventory", with_gpus(1)}});
    CHECK_FALSE(reg);
    CHECK((reg ? std::string("(accepted)") : reg.error().field) == "name");
}

TEST_CASE("hostile inventory: over loopback HTTP a worker with an oversize inventory gets a 400 naming the field",
          "[inventory][security][service]") {
    test::svc::Pool p;
    auto enroll = p.server.client(p.enroll);
    const std::vector<std::pair<json, std::string>> cases{
        {with_gpus(5000), "inventory.gpus"},
        {changed(with_gpus(4), [](json& j) { j["gpus"][3]["index"] = 0; }), "inventory.gpus[3].index"},
        {changed(with_gpus(1), [](json& j) { j["gpus"][0]["model"] = std::string(300'000, 'H'); }),
         "inventory.gpus[0].model"},
    };
    for (const auto& [inventory, field] : cases) {
        INFO(field);
        const json body{{"name", "hostile"}, {"inventory", inventory}};
        auto r = enroll.request("POST", "/v1/workers/register", body.dump());
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK(json::parse(r->body)["field"] == field);
    }
    auto admin = p.server.client(p.server.admin_token);
    CHECK(test::svc::call(admin, "GET", "/v1/workers")["workers"].size() == 1); // only the fixture's worker

    // The same over the heartbeat: refused, and the stored inventory is kept.
    auto w = p.server.client(p.worker);
    const json beat{{"running", json::array()}, {"inventory", with_gpus(5000)}};
    auto r = w.request("POST", "/v1/workers/heartbeat", beat.dump());
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(json::parse(r->body)["field"] == "inventory.gpus");
    CHECK(test::svc::call(admin, "GET", "/v1/workers")["workers"][0]["inventory"]["gpus"].size() == 1);
}

TEST_CASE("hostile inventory: a catalog model declared with another memory is warned about and shown to admins",
          "[inventory][security][service]") {
    test::svc::Pool p;
    auto enroll = p.server.client(p.enroll);
    json inventory = with_gpus(0);
    inventory["gpus"] = json::array({gpu(0, "H100-80GB", 24576), gpu(1, "NVIDIA H100 80GB HBM3", 81559)});
    const json body{{"name", "cheap-h100"}, {"inventory", inventory}};
    auto reg = test::svc::call(enroll, "POST", "/v1/workers/register", body, 201);
    std::string warnings = reg["warnings"].dump();
    CHECK(warnings.find("GPU model and memory disagree: GPU 0 `H100-80GB` with 24GiB (the catalog's H100-80GB has "
                        "80GiB)") != std::string::npos);
    CHECK(warnings.find("GPU 1") == std::string::npos); // what a real H100 reports is within the margin

    auto admin = p.server.client(p.server.admin_token);
    auto workers = test::svc::call(admin, "GET", "/v1/workers")["workers"];
    REQUIRE(workers.size() == 2);
    for (const auto& w : workers) {
        INFO(w.dump());
        if (w["name"] == "cheap-h100") {
            REQUIRE(w["model_mismatch"].is_string());
            CHECK(w["model_mismatch"] == "GPU 0 `H100-80GB` with 24GiB (the catalog's H100-80GB has 80GiB)");
        } else {
            CHECK(w["model_mismatch"].is_null()); // the fixture's L4 with 24 GiB
        }
    }
    auto text = test::run_gpupool({"--url", p.server.url, "--token", p.server.admin_token, "admin", "workers"});
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.out, Catch::Contains("worker 2 `cheap-h100`: GPU model and memory disagree: GPU 0 `H100-80GB` "
                                         "with 24GiB (the catalog's H100-80GB has 80GiB)"));
    CHECK_THAT(text.out, !Catch::Contains("`box`: GPU model"));
}

} // namespace test_inventory_hostile
} // namespace
