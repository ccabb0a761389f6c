// POST /v1/jobs/retry over real HTTP on loopback (a real SQLite file): the body's shape, the answer,
// and the job's view with its runs (`retries`, each attempt's `retry`).
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_retry_service {

using namespace gpupool;
using json = nlohmann::json;
using namespace gpupool::test::svc;

namespace {

// Runs the worker's next assignment to `exit_code`; returns its attempt id.
std::int64_t run_next(Pool& p, std::int64_t exit_code) {
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    const std::string attempt = std::to_string(polled["assignments"][0]["attempt"].get<std::int64_t>());
    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", exit_code}});
    return std::stoll(attempt);
}

} // namespace

TEST_CASE("service: POST /v1/jobs/retry runs a failed job again, its attempts kept", "[service][retry]") {
    Pool p;
    const std::int64_t job = p.submit({spec("flaky")})["jobs"][0];
    const std::int64_t first = run_next(p, 1);
    auto m = p.server.client(p.member);
    const std::string jid = std::to_string(job);
    REQUIRE(call(m, "GET", "/v1/jobs/" + jid)["state"] == "failed");

    auto r = call(m, "POST", "/v1/jobs/retry", {{"jobs", {job}}, {"idempotency_key", "k-1"}});
    CHECK(r == json{{"jobs", {{{"id", job}, {"retry", 1}}}}});
    // The same key: the same answer, no second retry.
    CHECK(call(m, "POST", "/v1/jobs/retry", {{"jobs", {job}}, {"idempotency_key", "k-1"}}) == r);
    const std::int64_t second = run_next(p, 0);

    auto v = call(m, "GET", "/v1/jobs/" + jid);
    CHECK(v["state"] == "succeeded");
    CHECK(v["retries"] == 1);
    CHECK(v["attempts"] == 2);
    REQUIRE(v["attempt_history"].size() == 2);
    CHECK(v["attempt_history"][0]["id"] == first);
    CHECK(v["attempt_history"][0]["state"] == "failed");
    CHECK(v["attempt_history"][0]["retry"] == 0);
    CHECK(v["attempt_history"][1]["id"] == second);
    CHECK(v["attempt_history"][1]["retry"] == 1);
    // Both attempts' logs stay readable.
    call(m, "GET", "/v1/jobs/" + jid + "/logs?attempt=" + std::to_string(first));

    // Now it succeeded: refused, with the reason.
    auto again = m.request("POST", "/v1/jobs/retry", json{{"jobs", {job}}}.dump());
    REQUIRE(again);
    CHECK(again->status == 409);
    CHECK_THAT(again->body, Catch::Contains("succeeded: only failed or cancelled jobs are retried"));
    // Another team's member: no such job.
    auto o = p.server.client(p.other);
    auto hidden = o.request("POST", "/v1/jobs/retry", json{{"jobs", {job}}}.dump());
    REQUIRE(hidden);
    CHECK(hidden->status == 404);
}

TEST_CASE("service: a retry's body names jobs or one sweep, and each error its field", "[service][retry]") {
    Pool p;
    auto m = p.server.client(p.member);
    struct Case {
        json body;
        std::string field;
    };
    const std::vector<Case> cases{
        {json::object(), "jobs"},
        {{{"jobs", {1}}, {"sweep", 1}}, "sweep"},
        {{{"jobs", {0}}}, "jobs[0]"},
        {{{"jobs", "1"}}, "jobs"},
        {{{"sweep", 1}, {"states", {"running"}}}, "states[0]"},
        {{{"jobs", {1}}, {"states", {"failed"}}}, "states"},
        {{{"sweep", -3}}, "sweep"},
        {{{"jobs", {1}}, {"allow_unfunded", "yes"}}, "allow_unfunded"},
    };
    for (const auto& c : cases) {
        INFO(c.body.dump());
        auto r = m.request("POST", "/v1/jobs/retry", c.body.dump());
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK(json::parse(r->body)["field"] == c.field);
    }
}

} // namespace test_retry_service
} // namespace
