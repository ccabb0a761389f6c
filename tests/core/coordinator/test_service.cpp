// The coordinator as a service: a real HTTP server on loopback over a real SQLite file, driven
// with the real HTTP client, as workers and researchers would.
#include "core/coordinator/service.hpp"
#include "core/store/open_store.hpp"
#include "core/net/http_client.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/util/token_secret.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <algorithm>
#include <set>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_service {

using namespace gpupool;
using json = nlohmann::json;

using namespace gpupool::test::svc;

TEST_CASE("service: a job's whole life over HTTP, with a long-polling worker", "[service]") {
    Pool p;
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});

    // The worker long-polls first; the submit wakes it well before its wait runs out. (No Catch
    // assertion in the thread: Catch is not thread-safe. It reports the status it got.)
    int submitted = 0;
    std::thread submitter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        auto c = p.server.client(p.member);
        const json body = {{"source", "t.toml"},
                           {"max_parallel", 0},
                           {"jobs", json::parse(recipe::to_json(std::vector<recipe::JobSpec>{spec("hello")}).dump())}};
        auto r = c.request("POST", "/v1/jobs", body.dump());
        submitted = r ? r->status : -1;
    });
    auto t0 = std::chrono::steady_clock::now();
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=5000", json::object());
    auto waited = std::chrono::steady_clock::now() - t0;
    submitter.join();
    REQUIRE(submitted == 201);
    REQUIRE(polled["assignments"].size() == 1);
    CHECK(waited < std::chrono::milliseconds(3000));
    auto a = polled["assignments"][0];
    CHECK(a["spec"]["name"] == "hello");
    CHECK(a["gpu_milli"] == 250);
    std::string attempt = std::to_string(a["attempt"].get<std::int64_t>());

    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    auto r = w.request("POST", "/v1/attempts/" + attempt + "/logs?offset=0", "line one\n");
    REQUIRE(r);
    CHECK(r->status == 200);
    r = w.request("POST", "/v1/attempts/" + attempt + "/logs?offset=0", "line one\n"); // retried chunk
    CHECK(json::parse(r->body)["stored"] == 0);
    r = w.request("POST", "/v1/attempts/" + attempt + "/logs?offset=9", "line two\n");
    CHECK(json::parse(r->body)["length"] == 18);
    r = w.request("PUT", "/v1/attempts/" + attempt + "/outputs", std::string("tar-bytes\0\1", 11));
    CHECK(r->status == 200);
    call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", 0}});

    auto m = p.server.client(p.member);
    std::string job = std::to_string(a["job"].get<std::int64_t>());
    auto status = call(m, "GET", "/v1/jobs/" + job);
    CHECK(status["state"] == "succeeded");
    CHECK(status["exit_code"] == 0);
    CHECK(status["attempt_history"].size() == 1);
    auto logs = call(m, "GET", "/v1/jobs/" + job + "/logs?offset=0");
    CHECK(logs["data"] == "line one\nline two\n");
    CHECK(logs["finished"] == true);
    auto tail = call(m, "GET", "/v1/jobs/" + job + "/logs?offset=9");
    CHECK(tail["data"] == "line two\n");
    auto out = m.request("GET", "/v1/jobs/" + job + "/outputs");
    CHECK(out->body == std::string("tar-bytes\0\1", 11));
    // Once completed, the attempt is fenced.
    auto late = w.request("POST", "/v1/attempts/" + attempt + "/complete", json{{"exit_code", 1}}.dump());
    CHECK(late->status == 409);
}

TEST_CASE("service: a sweep of 100 jobs in one request, all placed and finished", "[service]") {
    Pool p;
    std::vector<recipe::JobSpec> specs;
    for (int i = 0; i < 100; ++i) {
        specs.push_back(spec("s" + std::to_string(i), 100)); // ten fit on the GPU at once
    }
    auto res = p.submit(specs);
    REQUIRE(res["jobs"].size() == 100);
    auto w = p.server.client(p.worker);
    std::set<std::int64_t> done;
    for (int round = 0; round < 100 && done.size() < 100; ++round) {
        call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
        auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=2000", json::object());
        CHECK(polled["assignments"].size() <= 10);
        for (const auto& a : polled["assignments"]) {
            std::string id = std::to_string(a["attempt"].get<std::int64_t>());
            call(w, "POST", "/v1/attempts/" + id + "/start", json::object());
            call(w, "POST", "/v1/attempts/" + id + "/complete", {{"exit_code", 0}});
            CHECK(done.insert(a["job"].get<std::int64_t>()).second); // never assigned twice
        }
    }
    CHECK(done.size() == 100);
    auto m = p.server.client(p.member);
    auto list = call(m, "GET", "/v1/jobs?state=succeeded");
    CHECK(list["jobs"].size() == 100);
    CHECK(list["more"] == false);

    // Paging back through the 100, 30 at a time: oldest first within a page, newest page first,
    // nothing twice or left out.
    std::vector<std::int64_t> seen;
    std::string before;
    for (int page = 0; page < 10; ++page) {
        auto got = call(m, "GET", "/v1/jobs?state=succeeded&limit=30" + before);
        std::vector<std::int64_t> ids;
        for (const auto& j : got["jobs"]) {
            ids.push_back(j["id"].get<std::int64_t>());
            CHECK(j["cost_micro"].get<std::int64_t>() >= 0);
        }
        REQUIRE_FALSE(ids.empty());
        CHECK(std::is_sorted(ids.begin(), ids.end()));
        CHECK((seen.empty() || ids.back() < seen.front()));
        seen.insert(seen.begin(), ids.begin(), ids.end());
        if (!got["more"].get<bool>()) {
            break;
        }
        CHECK(ids.size() == 30);
        before = "&before=" + std::to_string(ids.front());
    }
    CHECK(seen.size() == 100);
    CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == 100);
    for (const char* bad : {"limit=0", "limit=x", "before=-1", "sweep=abc"}) {
        auto r = m.request("GET", std::string("/v1/jobs?") + bad);
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK_THAT(r->body, Catch::Contains(std::string(bad).substr(0, std::string(bad).find('='))));
    }
}

TEST_CASE("service: a worker that stops heartbeating loses its attempt, its late completion is refused",
          "[service]") {
    Pool p(1'000); // one-second leases
    auto admin = p.server.client(p.server.admin_token);
    auto e = p.server.client(p.enroll);
    auto reg2 = call(e, "POST", "/v1/workers/register", {{"name", "box-2"}, {"inventory", inventory()}}, 201);
    auto w1 = p.server.client(p.worker);
    auto w2 = p.server.client(reg2["token"].get<std::string>());
    call(w2, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    call(admin, "POST", "/v1/admin/workers/" + std::to_string(reg2["worker_id"].get<std::int64_t>()) + "/drain",
         json::object());
    auto job = p.submit({spec("once", 1000)})["jobs"][0].get<std::int64_t>();
    call(w1, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    auto a = call(w1, "POST", "/v1/workers/poll?wait_ms=3000", json::object())["assignments"];
    REQUIRE(a.size() == 1);
    std::string old = std::to_string(a[0]["attempt"].get<std::int64_t>());
    call(w1, "POST", "/v1/attempts/" + old + "/start", json::object());

    // Worker 1 goes silent; worker 2 is back in service and keeps its heartbeats going.
    call(admin, "POST", "/v1/admin/workers/" + std::to_string(reg2["worker_id"].get<std::int64_t>()) + "/activate",
         json::object());
    json again;
    for (int i = 0; i < 40 && again.empty(); ++i) {
        call(w2, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
        again = call(w2, "POST", "/v1/workers/poll?wait_ms=200", json::object())["assignments"];
    }
    REQUIRE(again.size() == 1);
    CHECK(again[0]["job"] == job);
    CHECK(again[0]["attempt_number"] == 2);

    auto late = w1.request("POST", "/v1/attempts/" + old + "/complete", json{{"exit_code", 0}}.dump());
    CHECK(late->status == 409);
    CHECK_THAT(late->body, Catch::Contains("no longer current"));
    auto hb = call(w1, "POST", "/v1/workers/heartbeat", {{"running", json::array({std::stoll(old)})}});
    CHECK(hb["stop"] == json::array({std::stoll(old)}));
    auto m = p.server.client(p.member);
    auto st = call(m, "GET", "/v1/jobs/" + std::to_string(job));
    CHECK(st["attempt_history"][0]["state"] == "lost");
}

TEST_CASE("service: bad requests get the documented status and error body, and the server keeps serving",
          "[service]") {
    Pool p;
    auto m = p.server.client(p.member);
    struct Bad {
        const char* method;
        const char* path;
        std::string body;
        int status;
        const char* field;
    };
    const std::vector<Bad> cases{
        {"POST", "/v1/jobs", "{not json", 400, "body"},
        {"POST", "/v1/jobs", "[1,2]", 400, "body"},
        {"POST", "/v1/jobs", R"({"jobs": 5})", 400, "jobs"},
        {"POST", "/v1/jobs", R"({"jobs": []})", 400, "jobs"},
        {"POST", "/v1/jobs", R"({"jobs": [{"name": "x"}]})", 400, "jobs[0].image"},
        {"POST", "/v1/jobs", R"({"jobs": [{"name": "x", "image": "b", "command": ["t"], "resources": {"gpus": "1"}}]})",
         400, "jobs[0].resources.gpus"},
        {"POST", "/v1/jobs", R"({"max_parallel": "x", "jobs": []})", 400, "max_parallel"},
        {"GET", "/v1/jobs/abc", "", 400, "id"},
        {"GET", "/v1/jobs?state=sleeping", "", 400, "state"},
        {"GET", "/v1/jobs/12345", "", 404, nullptr},
        {"GET", "/v1/nope", "", 404, nullptr},
        {"PATCH", "/v1/jobs", "", 405, nullptr},
        {"POST", "/v1/admin/teams", std::string(2 * 1024 * 1024, 'x'), 413, nullptr},
    };
    for (const auto& c : cases) {
        INFO(c.method << " " << c.path);
        auto r = m.request(c.method, c.path, c.body);
        REQUIRE(r);
        CHECK(r->status == c.status);
        auto body = json::parse(r->body, nullptr, false);
        REQUIRE(body.is_object());
        CHECK(body.contains("error"));
        CHECK(body.contains("detail"));
        if (c.field != nullptr) {
            CHECK(body.value("field", std::string()) == c.field);
        }
        // Still serving after each one.
        auto health = m.request("GET", "/v1/health");
        REQUIRE(health);
        CHECK(health->status == 200);
    }
}

TEST_CASE("service: authorization matrix over every route", "[service]") {
    Pool p;
    auto job = p.submit({spec("matrix")})["jobs"][0].get<std::int64_t>();
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    auto assignments = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object())["assignments"];
    REQUIRE(assignments.size() == 1);
    const std::string attempt = std::to_string(assignments[0]["attempt"].get<std::int64_t>());
    const std::string jid = std::to_string(job);
    const std::string wid = std::to_string(p.worker_id);

    // More identities: a second worker (the attempt is not its own), a revoked member token and a
    // banned worker's token.
    auto admin_client = p.server.client(p.server.admin_token);
    auto e = p.server.client(p.enroll);
    const std::string other_worker_token =
        call(e, "POST", "/v1/workers/register", {{"name", "box2"}, {"inventory", inventory()}}, 201)["token"];
    auto banned_reg = call(e, "POST", "/v1/workers/register", {{"name", "box3"}, {"inventory", inventory()}}, 201);
    call(admin_client, "POST", "/v1/admin/workers/" + std::to_string(banned_reg["worker_id"].get<std::int64_t>()) + "/ban",
         json::object());
    auto revoked_tok = call(admin_client, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201);
    call(admin_client, "DELETE", "/v1/admin/tokens/" + std::to_string(revoked_tok["id"].get<std::int64_t>()));
    // The ban revoked the enrollment token the banned worker came in with (and the others' too):
    // a fresh one for the matrix's enroll caller.
    const std::string enroll2 =
        call(admin_client, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "owners"}, {"uses", 100}}, 201)["token"];

    enum Who { none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin };
    const std::vector<std::pair<Who, std::string>> callers{
        {none, ""},         {bad, "gpp_0000"},   {revoked, revoked_tok["token"]}, {banned, banned_reg["token"]},
        {other, p.other},   {worker, p.worker},  {other_worker, other_worker_token}, {enroll, enroll2},
        {member, p.member}, {admin, p.server.admin_token}};
    // Expected: who may call each route. `hidden` routes answer 404 (not 403) to other teams.
    struct Rule {
        std::set<Who> allowed;
        bool hidden = false;
        std::string path;
        json body;
    };
    const json job_body = {{"source", "m"}, {"team", "fellows"}, {"jobs", json::parse(recipe::to_json(std::vector{spec("m2")}).dump())}};
    std::map<std::string, Rule> rules{
        {"GET /v1/health",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin},
          false,
          "/v1/health",
          nullptr}},
        {"POST /v1/admin/teams", {{admin}, false, "/v1/admin/teams", {{"name", "newteam"}}}},
        {"GET /v1/admin/teams", {{admin}, false, "/v1/admin/teams", nullptr}},
        {"POST /v1/admin/tokens", {{admin}, false, "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}}},
        {"DELETE /v1/admin/tokens/{id}", {{admin}, false, "/v1/admin/tokens/999", nullptr}},
        {"GET /v1/admin/tokens", {{admin}, false, "/v1/admin/tokens", nullptr}},
        {"GET /v1/workers", {{other, member, admin}, false, "/v1/workers", nullptr}},
        {"POST /v1/admin/workers/{id}/drain", {{admin}, false, "/v1/admin/workers/" + wid + "/drain", json::object()}},
        {"POST /v1/admin/workers/{id}/ban", {{admin}, false, "/v1/admin/workers/999/ban", json::object()}},
        {"POST /v1/admin/workers/{id}/activate",
         {{admin}, false, "/v1/admin/workers/" + wid + "/activate", json::object()}},
        {"POST /v1/jobs", {{other, member, admin}, false, "/v1/jobs", job_body}}, // each for their own team
        {"GET /v1/jobs", {{other, member, admin}, false, "/v1/jobs", nullptr}},
        {"GET /v1/jobs/{id}", {{member, admin}, true, "/v1/jobs/" + jid, nullptr}},
        {"POST /v1/jobs/{id}/cancel", {{member, admin}, true, "/v1/jobs/999/cancel", json::object()}},
        {"POST /v1/sweeps/{id}/cancel", {{member, admin}, true, "/v1/sweeps/999/cancel", json::object()}},
        // the job is assigned: its team is told it cannot be retried yet (409), another team that
        // there is no such job (404)
        {"POST /v1/jobs/retry", {{member, admin}, true, "/v1/jobs/retry", {{"jobs", {job}}}}},
        {"GET /v1/jobs/{id}/logs", {{member, admin}, true, "/v1/jobs/" + jid + "/logs", nullptr}},
        {"GET /v1/jobs/{id}/outputs", {{member, admin}, true, "/v1/jobs/" + jid + "/outputs", nullptr}},
        {"GET /v1/jobs/{id}/manifest", {{member, admin}, true, "/v1/jobs/" + jid + "/manifest", nullptr}},
        {"POST /v1/workers/register",
         {{enroll}, false, "/v1/workers/register", {{"name", "w"}, {"inventory", inventory()}}}},
        {"POST /v1/workers/heartbeat", {{worker}, false, "/v1/workers/heartbeat", {{"running", json::array()}}}},
        {"POST /v1/workers/poll", {{worker}, false, "/v1/workers/poll", json::object()}},
        // a worker's clean exit: only a worker may leave, and only itself (the rows after it in the
        // map's order, the worker's poll and register and its attempt's outputs, still hold)
        {"POST /v1/workers/leave", {{worker}, false, "/v1/workers/leave", nullptr}},
        {"POST /v1/attempts/{id}/start", {{worker}, false, "/v1/attempts/" + attempt + "/start", json::object()}},
        // several starts at once, each answered on its own (an attempt that is no one's: no side effect)
        {"POST /v1/attempts/start", {{worker}, false, "/v1/attempts/start", {{"attempts", {999'999}}}}},
        {"POST /v1/attempts/{id}/logs", {{worker}, false, "/v1/attempts/" + attempt + "/logs?offset=0", nullptr}},
        {"PUT /v1/attempts/{id}/outputs", {{worker}, false, "/v1/attempts/" + attempt + "/outputs", nullptr}},
        {"GET /v1/attempts/{id}/inputs", {{worker}, false, "/v1/attempts/" + attempt + "/inputs", nullptr}},
        // the body is "x": its SHA-256
        {"PUT /v1/inputs/{sha256}",
         {{other, member, admin},
          false,
          "/v1/inputs/2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
          nullptr}},
        {"POST /v1/attempts/{id}/complete",
         {{worker}, false, "/v1/attempts/" + attempt + "/complete", {{"exit_code", 0}}}},
        // several ends at once, each answered on its own (an attempt that is no one's: no side effect)
        {"POST /v1/attempts/complete",
         {{worker}, false, "/v1/attempts/complete", {{"completions", {{{"attempt", 999'999}, {"exit_code", 0}}}}}}},
        // parked until the jobs end (wait_ms 0: at once); other teams' jobs are not found
        {"POST /v1/jobs/wait", {{member, admin}, true, "/v1/jobs/wait", {{"jobs", {job}}, {"wait_ms", 0}}}},
        {"POST /v1/admin/grants", {{admin}, false, "/v1/admin/grants", {{"team", "fellows"}, {"amount_micro", 1}}}},
        {"POST /v1/admin/adjustments",
         {{admin}, false, "/v1/admin/adjustments", {{"team", "fellows"}, {"amount_micro", 1}, {"note", "n"}}}},
        {"POST /v1/admin/budgets", {{admin}, false, "/v1/admin/budgets", {{"team", "fellows"}}}},
        {"GET /v1/admin/report", {{admin}, false, "/v1/admin/report", nullptr}},
        {"GET /v1/admin/audit", {{admin}, false, "/v1/admin/audit", nullptr}},
        // the pool at a glance: admins everything, members their team's work and the pool's capacity
        {"GET /v1/pool", {{other, member, admin}, false, "/v1/pool", nullptr}},
        {"GET /v1/pool/samples", {{other, member, admin}, false, "/v1/pool/samples", nullptr}},
        // the dashboard's files hold no data: anyone (the data comes from the routes above)
        {"GET /",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin}, false, "/", nullptr}},
        {"GET /dashboard/app.js",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin},
          false,
          "/dashboard/app.js",
          nullptr}},
        {"GET /dashboard/style.css",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin},
          false,
          "/dashboard/style.css",
          nullptr}},
        // the files for GPU owners hold no secret, and an owner has no token yet: anyone (this pool
        // has no --dist, so they answer 404 or {"enabled": false}; test_dist_routes.cpp serves some)
        {"GET /dist/{name}",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin},
          false,
          "/dist/gpupool-0.1.0-linux-x86_64",
          nullptr}},
        {"GET /dist/SHA256SUMS",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin},
          false,
          "/dist/SHA256SUMS",
          nullptr}},
        {"GET /dist/install.sh",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin},
          false,
          "/dist/install.sh",
          nullptr}},
        {"GET /v1/dist",
         {{none, bad, revoked, banned, other, worker, other_worker, enroll, member, admin},
          false,
          "/v1/dist",
          nullptr}},
        {"POST /v1/admin/backup", {{admin}, false, "/v1/admin/backup", json::object()}},
        // Prometheus: admins (and the scrape token, when the coordinator has one: test_metrics_service.cpp)
        {"GET /metrics", {{admin}, false, "/metrics", nullptr}},
        // members and workers: their own team
        {"GET /v1/credits", {{other, worker, other_worker, member, admin}, false, "/v1/credits", nullptr}},
        // one worker's earnings: the worker itself, its team ("owners") and admins; for the members of
        // "fellows" and "others" and for another worker, there is no such worker (404)
        {"GET /v1/workers/{id}/earnings", {{worker, admin}, true, "/v1/workers/" + wid + "/earnings", nullptr}},
        {"POST /v1/estimate", {{other, member, admin}, false, "/v1/estimate", job_body}},
        // aggregates over every team's runs: any member or admin
        {"POST /v1/recipes/history",
         {{other, member, admin}, false, "/v1/recipes/history", {{"recipes", {{{"recipe", "r"}, {"repo", "u"}}}}}}},
        // any valid token: who it is
        {"GET /v1/whoami", {{other, worker, other_worker, enroll, member, admin}, false, "/v1/whoami", nullptr}},
    };
    // Every route the server serves is in the matrix, and nothing else.
    std::set<std::string> served;
    for (const auto& r : p.server.service->routes()) {
        served.insert(r.method + " " + r.pattern);
    }
    std::set<std::string> covered;
    for (const auto& [k, v] : rules) {
        covered.insert(k);
    }
    REQUIRE(served == covered);

    for (const auto& [route, rule] : rules) {
        const std::string method = route.substr(0, route.find(' '));
        for (const auto& [who, token] : callers) {
            INFO(route << " as caller " << static_cast<int>(who));
            auto c = p.server.client(token);
            std::string body = rule.body.is_null() ? (method == "GET" ? "" : "x") : rule.body.dump();
            auto r = c.request(method, rule.path, body);
            REQUIRE(r);
            INFO("status " << r->status << ": " << r->body);
            const bool open_route = rule.allowed.count(none) != 0; // /v1/health, the dashboard's files
            if (who == other_worker && rule.allowed.count(worker) != 0 && !open_route) {
                // Its own heartbeat and poll, but another worker's attempt is not found (the batch of
                // ends answers each attempt on its own).
                if (rule.path.starts_with("/v1/attempts/") && rule.path != "/v1/attempts/complete" &&
                    rule.path != "/v1/attempts/start") {
                    CHECK(r->status == 404);
                } else {
                    CHECK(r->status != 401);
                    CHECK(r->status != 403);
                }
            } else if (rule.allowed.count(who) != 0) {
                CHECK(r->status != 401);
                CHECK(r->status != 403);
                if (rule.hidden) {
                    CHECK_THAT(r->body, !Catch::Contains("no job " + jid));
                }
            } else if (who == none || who == bad || who == revoked) {
                CHECK(r->status == 401);
            } else if (who == banned) {
                CHECK(r->status == 403);
                CHECK_THAT(r->body, Catch::Contains("banned"));
            } else if (rule.hidden && (who == other || who == member)) { // member not allowed: another team's
                CHECK(r->status == 404);
            } else {
                CHECK(r->status == 403);
            }
        }
    }
}

TEST_CASE("service: acknowledged state survives a restart", "[service]") {
    test::TempDir keep;
    std::vector<std::int64_t> ids;
    std::string admin_token;
    std::string member;
    {
        coordinator::ServiceOptions o;
        auto opened = store::open_store((keep.path() / "pool.db").string());
        REQUIRE(opened);
        coordinator::CoordinatorService s(o, std::move(*opened), coordinator::system_clock());
        REQUIRE(s.start(&admin_token));
        net::ClientOptions co;
        co.base_url = "http://127.0.0.1:" + std::to_string(s.port());
        co.token = admin_token;
        net::HttpClient admin(co);
        call(admin, "POST", "/v1/admin/teams", {{"name", "fellows"}}, 201);
        call(admin, "POST", "/v1/admin/grants", {{"team", "fellows"}, {"amount_micro", 5'000'000}}, 201);
        member = call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
        co.token = member;
        net::HttpClient m(co);
        auto r = call(m, "POST", "/v1/jobs", {{"jobs", json::parse(recipe::to_json(std::vector{spec("a"), spec("b")}).dump())}}, 201);
        ids = r["jobs"].get<std::vector<std::int64_t>>();
        s.stop();
    }
    coordinator::ServiceOptions o;
    auto opened = store::open_store((keep.path() / "pool.db").string());
    REQUIRE(opened);
    coordinator::CoordinatorService s(o, std::move(*opened), coordinator::system_clock());
    std::string second_admin;
    REQUIRE(s.start(&second_admin));
    CHECK(second_admin.empty()); // the admin exists already: no new token is minted
    net::ClientOptions co;
    co.base_url = "http://127.0.0.1:" + std::to_string(s.port());
    co.token = member;
    net::HttpClient m(co);
    auto list = call(m, "GET", "/v1/jobs");
    REQUIRE(list["jobs"].size() == 2);
    CHECK(list["jobs"][0]["id"] == ids[0]);
    CHECK(list["jobs"][1]["name"] == "b");
    CHECK(call(m, "GET", "/v1/credits")["balance_micro"] == 5'000'000); // the grant survived too
}

TEST_CASE("service: completion outcomes, and the cost on the job view", "[service][credits]") {
    Pool p;
    auto w = p.server.client(p.worker);
    auto m = p.server.client(p.member);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    p.submit({spec("outcomes")});
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    const std::string job = std::to_string(polled["assignments"][0]["job"].get<std::int64_t>());
    const std::string attempt = std::to_string(polled["assignments"][0]["attempt"].get<std::int64_t>());
    auto view = call(m, "GET", "/v1/jobs/" + job);
    // An L4 quarter for max_runtime 1h at 1 credit per GPU-hour: 0.25 credits held.
    CHECK(view["held_micro"] == 250'000);
    CHECK(view["cost_micro"] == 0);
    CHECK(view["attempt_history"][0]["price_micro_per_hour"] == 250'000);

    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    auto bad = call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", 0}, {"outcome", "exploded"}}, 400);
    CHECK(bad["field"] == "outcome");
    auto no_code = call(w, "POST", "/v1/attempts/" + attempt + "/complete", json::object(), 400);
    CHECK(no_code["field"] == "exit_code");
    auto fault = call(w, "POST", "/v1/attempts/" + attempt + "/complete",
                      {{"exit_code", nullptr}, {"outcome", "worker_fault"}, {"reason", "container failed to start"}});
    CHECK(fault["outcome"] == "worker_fault");
    view = call(m, "GET", "/v1/jobs/" + job);
    CHECK(view["attempt_history"][0]["state"] == "lost");
    CHECK(view["attempt_history"][0]["cost_micro"] == 0);
    CHECK(view["cost_micro"] == 0);
    CHECK(view["state"] != "failed"); // re-queued per the retry rules

    auto credits = call(m, "GET", "/v1/credits");
    CHECK(credits["team"] == "fellows");
    CHECK(credits["movements"].size() >= 3); // grant, hold, release
    const json moves = credits["movements"];
    CHECK(std::any_of(moves.begin(), moves.end(), [](const json& e) { return e["reason"] == "release"; }));
    auto est = call(m, "POST", "/v1/estimate", {{"source", "t.toml"}, {"jobs", json::parse(recipe::to_json(std::vector{spec("e")}).dump())}});
    CHECK(est["total_max_micro"] == 250'000);
    CHECK(est["jobs"][0]["gpu_model"] == "L4");
    auto admin = p.server.client(p.server.admin_token);
    auto report = call(admin, "GET", "/v1/admin/report");
    CHECK(report["workers"][0]["failures"] == 1);
    CHECK(report["escrow_micro"].get<std::int64_t>() >= 0);
}

TEST_CASE("service: input archives are uploaded by digest, checked at submit and fetched by the attempt's worker",
          "[service]") {
    Pool p;
    auto m = p.server.client(p.member);
    const std::string body("inputs-tar\0\1\2", 13);
    const std::string sha = util::sha256_hex(body);
    // A digest that does not match the body is refused, naming the field.
    auto bad = m.request("PUT", "/v1/inputs/" + std::string(64, 'a'), body);
    REQUIRE(bad);
    CHECK(bad->status == 400);
    CHECK(json::parse(bad->body)["field"] == "sha256");
    auto up = m.request("PUT", "/v1/inputs/" + sha, body);
    REQUIRE(up);
    CHECK(up->status == 201);
    CHECK(m.request("PUT", "/v1/inputs/" + sha, body)->status == 201); // idempotent

    // A job naming an archive nobody uploaded is refused at submit.
    auto orphan = spec("orphan");
    orphan.inputs.archive = std::string(64, 'b');
    auto refused = m.request("POST", "/v1/jobs",
                             json{{"source", "t.toml"}, {"max_parallel", 0},
                                  {"jobs", json::parse(recipe::to_json(std::vector{orphan}).dump())}}
                                 .dump());
    REQUIRE(refused);
    CHECK(refused->status == 400);
    CHECK(json::parse(refused->body)["field"] == "jobs[0].inputs.archive");

    auto with = spec("with-inputs");
    with.inputs.archive = sha;
    p.submit({with});
    auto w = p.server.client(p.worker);
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=2000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    CHECK(polled["assignments"][0]["spec"]["inputs"]["archive"] == sha);
    const std::string attempt = std::to_string(polled["assignments"][0]["attempt"].get<std::int64_t>());
    auto got = w.request("GET", "/v1/attempts/" + attempt + "/inputs");
    REQUIRE(got);
    CHECK(got->status == 200);
    CHECK(got->body == body);
    // Members cannot read it through the worker route.
    CHECK(m.request("GET", "/v1/attempts/" + attempt + "/inputs")->status == 403);
}

TEST_CASE("service: admin workers shows each worker's presence and team name", "[service]") {
    Pool p(600); // workers are offline 600 ms after their last heartbeat
    auto w = p.server.client(p.worker);
    auto workers_table = [&] {
        auto r = test::run_gpupool({"--url", p.server.url, "--token", p.server.admin_token, "admin", "workers"});
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        return r.out;
    };
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    auto a = p.server.client(p.server.admin_token);
    auto listed = call(a, "GET", "/v1/workers")["workers"][0];
    CHECK(listed["presence"] == "online");
    CHECK(listed["team_name"] == "owners");
    CHECK_THAT(workers_table(), Catch::Contains("box") && Catch::Contains("owners") && Catch::Contains("online"));
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}, {"draining", true}});
    CHECK(call(a, "GET", "/v1/workers")["workers"][0]["presence"] == "draining");
    std::this_thread::sleep_for(std::chrono::milliseconds(900));
    CHECK(call(a, "GET", "/v1/workers")["workers"][0]["presence"] == "offline");
    CHECK_THAT(workers_table(), Catch::Contains("offline since "));
    call(a, "POST", "/v1/admin/workers/" + std::to_string(p.worker_id) + "/ban", json::object());
    CHECK(call(a, "GET", "/v1/workers")["workers"][0]["presence"] == "banned");
}

TEST_CASE("service: fetching a job without outputs says why", "[service]") {
    Pool p;
    const auto job = std::to_string(p.submit({spec("waiting")})["jobs"][0].get<std::int64_t>());
    auto m = p.server.client(p.member);
    auto fetch = [&] {
        auto r = test::run_gpupool({"--url", p.server.url, "--token", p.member, "fetch", job, p.server.dir.path().string()});
        CHECK(r.exit_code == 1);
        return r.err;
    };
    auto r = m.request("GET", "/v1/jobs/" + job + "/outputs");
    REQUIRE(r);
    CHECK(r->status == 404);
    // Queued, or already assigned to the pool's worker: either way it says the outputs come later.
    CHECK_THAT(json::parse(r->body)["detail"].get<std::string>(),
               Catch::Contains("has not run yet") || Catch::Contains("its outputs come back when it ends"));
    CHECK_THAT(fetch(), Catch::Contains("job " + job + " ") &&
                            (Catch::Contains("has not run yet") || Catch::Contains("its outputs come back when it ends")));
    call(m, "POST", "/v1/jobs/" + job + "/cancel", json::object());
    CHECK_THAT(fetch(), Catch::Contains("job " + job + " was cancelled") && Catch::Contains("no outputs"));
}

TEST_CASE("service: a job that succeeded without outputs has an empty archive, a failed one says why",
          "[service]") {
    Pool p;
    auto once = spec("failed-quietly");
    once.retry.max_attempts = 1; // its failure is final
    const auto ids = p.submit({spec("wrote-nothing"), once})["jobs"];
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    std::map<std::string, std::string> attempt_of; // job name -> attempt
    for (int i = 0; i < 5 && attempt_of.size() < 2; ++i) {
        const json polled = call(w, "POST", "/v1/workers/poll?wait_ms=2000", json::object());
        UNSCOPED_INFO(polled.dump());
        for (const auto& a : polled["assignments"]) {
            attempt_of[a["spec"]["name"]] = std::to_string(a["attempt"].get<std::int64_t>());
        }
    }
    REQUIRE(attempt_of.size() == 2);
    // No PUT of outputs: the worker had nothing to send.
    call(w, "POST", "/v1/attempts/" + attempt_of["wrote-nothing"] + "/start", json::object());
    call(w, "POST", "/v1/attempts/" + attempt_of["wrote-nothing"] + "/complete", {{"exit_code", 0}});
    call(w, "POST", "/v1/attempts/" + attempt_of["failed-quietly"] + "/start", json::object());
    call(w, "POST", "/v1/attempts/" + attempt_of["failed-quietly"] + "/complete", {{"exit_code", 3}});
    auto m = p.server.client(p.member);
    const std::string ok = std::to_string(ids[0].get<std::int64_t>());
    const std::string bad = std::to_string(ids[1].get<std::int64_t>());
    auto r = m.request("GET", "/v1/jobs/" + ok + "/outputs");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == std::string(1024, '\0')); // an archive with no entries
    test::TempDir into;
    auto fetched = test::run_gpupool({"--url", p.server.url, "--token", p.member, "fetch", ok, into.path().string()});
    CHECK(fetched.exit_code == 0);
    r = m.request("GET", "/v1/jobs/" + bad + "/outputs");
    REQUIRE(r);
    CHECK(r->status == 404);
    CHECK_THAT(json::parse(r->body)["detail"].get<std::string>(),
               Catch::Contains("job " + bad + " failed") && Catch::Contains("no outputs came back"));
}

TEST_CASE("service: a GPU its owner reclaimed takes no new work until a heartbeat no longer names it",
          "[service][reclaim]") {
    Pool p;
    auto w = p.server.client(p.worker);
    // A list the wire refuses names its element; then the owner's use of the worker's only GPU.
    auto bad = w.request("POST", "/v1/workers/heartbeat", json{{"running", json::array()}, {"reclaimed_gpus", {0, -2}}}.dump());
    REQUIRE(bad);
    CHECK(bad->status == 400);
    CHECK_THAT(bad->body, Catch::Contains("reclaimed_gpus[1]"));
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}, {"reclaimed_gpus", {0}}});
    const auto job = std::to_string(p.submit({spec("waits")})["jobs"][0].get<std::int64_t>());
    CHECK(call(w, "POST", "/v1/workers/poll?wait_ms=500", json::object())["assignments"].empty());
    auto m = p.server.client(p.member);
    CHECK(call(m, "GET", "/v1/jobs/" + job)["state"] == "queued");
    // The owner is done (the worker's quiet period passed): placed at once.
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}, {"reclaimed_gpus", json::array()}});
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=5000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    CHECK(std::to_string(polled["assignments"][0]["job"].get<std::int64_t>()) == job);
    CHECK(polled["assignments"][0]["gpu_index"] == 0);
}

} // namespace test_service
} // namespace
