// Banning a worker revokes the enrollment token it registered with, which stops new registrations
// but no worker that token already registered: the ban's answer names those siblings, and
// `with_siblings` bans them with it, in the same commit (POST /v1/admin/workers/{id}/ban).
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace coordinator_test_ban_siblings {

using namespace gpupool;
using namespace gpupool::test::svc;

namespace {

std::string state_of(net::HttpClient& admin, std::int64_t worker) {
    const json listed = call(admin, "GET", "/v1/workers");
    for (const auto& w : listed["workers"]) {
        if (w["id"] == worker) {
            return w["state"];
        }
    }
    FAIL("no worker " << worker << " in " << listed.dump());
    return {};
}

std::vector<std::int64_t> ids_of(const json& list) {
    std::vector<std::int64_t> out;
    for (const auto& w : list) {
        out.push_back(w.is_object() ? w["id"].get<std::int64_t>() : w.get<std::int64_t>());
    }
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace

TEST_CASE("ban: the answer names the workers enrolled with the same token, and with_siblings bans them together",
          "[service][ban][security]") {
    Pool p; // worker "box", registered with an enrollment token of "owners" good for 100 workers
    auto admin = p.server.client(p.server.admin_token);
    auto e = p.server.client(p.enroll);
    const json twin = call(e, "POST", "/v1/workers/register", {{"name", "box-twin"}, {"inventory", inventory()}}, 201);
    const json third = call(e, "POST", "/v1/workers/register", {{"name", "box-3"}, {"inventory", inventory()}}, 201);
    const std::string other_enroll =
        call(admin, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "owners"}}, 201)["token"];
    auto e2 = p.server.client(other_enroll);
    const json elsewhere =
        call(e2, "POST", "/v1/workers/register", {{"name", "elsewhere"}, {"inventory", inventory()}}, 201);
    const std::int64_t twin_id = twin["worker_id"];
    const std::int64_t third_id = third["worker_id"];
    const std::int64_t elsewhere_id = elsewhere["worker_id"];
    const std::string box = "/v1/admin/workers/" + std::to_string(p.worker_id) + "/ban";

    // A plain ban: the siblings are named, with their state, and go on.
    const json plain = call(admin, "POST", box, json::object());
    CHECK(ids_of(plain["siblings"]) == std::vector<std::int64_t>{twin_id, third_id});
    CHECK(plain["siblings"][0]["name"] == "box-twin");
    CHECK(plain["siblings"][0]["state"] == "active");
    CHECK(ids_of(plain["banned"]) == std::vector<std::int64_t>{p.worker_id});
    CHECK(state_of(admin, twin_id) == "active");
    auto twin_client = p.server.client(twin["token"]);
    call(twin_client, "POST", "/v1/workers/heartbeat", {{"running", json::array()}}); // still takes work

    // A flag that is not a boolean is refused, and bans nobody.
    call(admin, "POST", box, {{"with_siblings", "yes"}}, 400);
    CHECK(state_of(admin, twin_id) == "active");

    // With the flag: every worker enrolled with that token is banned; one enrolled otherwise is not.
    const json together = call(admin, "POST", box, {{"with_siblings", true}});
    CHECK(ids_of(together["banned"]) == std::vector<std::int64_t>{p.worker_id, twin_id, third_id});
    for (const auto& s : together["siblings"]) {
        CHECK(s["state"] == "banned");
    }
    CHECK(state_of(admin, twin_id) == "banned");
    CHECK(state_of(admin, third_id) == "banned");
    CHECK(state_of(admin, elsewhere_id) == "active");
    call(twin_client, "POST", "/v1/workers/heartbeat", {{"running", json::array()}}, 403);
    // Each ban is in the audit log; a sibling's says whose sibling it was.
    const json audit = call(admin, "GET", "/v1/admin/audit?action=worker.ban")["audit"];
    CHECK(std::count_if(audit.begin(), audit.end(), [&](const json& a) {
              return a["detail"].value("sibling_of", std::int64_t{0}) == p.worker_id;
          }) == 2);
    // Members may not ban, with or without siblings.
    auto m = p.server.client(p.member);
    call(m, "POST", "/v1/admin/workers/" + std::to_string(elsewhere_id) + "/ban", {{"with_siblings", true}}, 403);
}

} // namespace coordinator_test_ban_siblings
} // namespace
