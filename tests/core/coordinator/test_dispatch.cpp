// Event-driven dispatch (#12): ends reported in one batch and committed in one transaction, passes
// that run only when something they read changed, and clients parked until their jobs end — on a real
// coordinator over a real SQLite file, and through the real HTTP service.
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_dispatch {

using namespace gpupool;
using namespace gpupool::test::credit_pool;
using store::AttemptState;
using store::JobState;

namespace {

// Counts the coordinator's scheduling passes.
struct PassCounter final : CoordinatorEvents {
    int passes = 0;
    void store_committed(std::chrono::nanoseconds, bool) override {}
    void scheduling_pass(std::chrono::nanoseconds, std::size_t, std::size_t) override { ++passes; }
    void attempt_placed(const std::string&, std::int64_t) override {}
    void attempt_ended(const std::string&, AttemptOutcome, std::int64_t) override {}
};

// The submitting team's funds.
void fund(CreditPool& p) {
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 1'000 * k_credit, std::nullopt, "test"));
}

// Both halves of the pool's one L4, assigned (not started).
std::vector<api::Assignment> two_assigned(CreditPool& p) {
    fund(p);
    p.submit(half_l4("a"));
    p.submit(half_l4("b"));
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    p.coord->tick();
    auto placed = coordinator::assignments(*p.coord, p.owner_worker).value();
    REQUIRE(placed.size() == 2);
    return placed;
}

// Both halves of the pool's one L4, started.
std::vector<AttemptId> two_running(CreditPool& p) {
    const auto placed = two_assigned(p);
    std::vector<AttemptId> ids;
    for (const auto& a : placed) {
        REQUIRE(coordinator::start_attempt(*p.coord, p.owner_worker, a.attempt));
        ids.push_back(a.attempt);
    }
    return ids;
}

} // namespace

TEST_CASE("dispatch: ends reported together are committed together, each answered on its own", "[dispatch]") {
    CreditPool p;
    const auto ids = two_running(p);
    const std::vector<api::AttemptEnd> ends{{ids[0], {0, "", api::Outcome::exited}},
                                            {ids[1], {3, "", api::Outcome::exited}},
                                            {AttemptId(999), {0, "", api::Outcome::exited}},
                                            {ids[0] , {0, "", api::Outcome::exited}}};
    auto answers = coordinator::complete_attempts(*p.coord, p.owner_worker, ends);
    REQUIRE(answers.has_value());
    REQUIRE(answers->size() == 4);
    CHECK_FALSE((*answers)[0].error);
    CHECK_FALSE((*answers)[1].error);
    REQUIRE((*answers)[2].error); // never this worker's
    CHECK((*answers)[2].error->code != ErrorCode::internal);
    // Named again in the same call: refused, so that it is not ended (and settled) twice.
    REQUIRE((*answers)[3].error);
    CHECK((*answers)[3].error->code == ErrorCode::invalid_input);
    REQUIRE(p.restart());
    auto a = read_job(*p.coord, p.admin, JobId(1)).value();
    auto b = read_job(*p.coord, p.admin, JobId(2)).value();
    CHECK(a.state == JobState::succeeded);
    CHECK(b.state == JobState::failed);
    CHECK(b.exit_code == 3);
    p.check_books();
    // Once ended, a repeated end is refused as no longer current.
    auto again = coordinator::complete_attempts(*p.coord, p.owner_worker, {{ids[0], {0, "", api::Outcome::exited}}});
    REQUIRE(again.has_value());
    REQUIRE((*again)[0].error);
    CHECK((*again)[0].error->code == ErrorCode::conflict);
}

TEST_CASE("dispatch: starts reported together are committed together, each answered on its own", "[dispatch]") {
    CreditPool p;
    const auto placed = two_assigned(p);
    const std::vector<AttemptId> ids{placed[0].attempt, AttemptId(999), placed[1].attempt, placed[0].attempt};
    auto answers = coordinator::start_attempts(*p.coord, p.owner_worker, ids);
    REQUIRE(answers.has_value());
    REQUIRE(answers->size() == 4);
    CHECK_FALSE((*answers)[0].error);
    REQUIRE((*answers)[1].error); // never this worker's
    CHECK((*answers)[1].error->code == ErrorCode::not_found);
    CHECK_FALSE((*answers)[2].error);
    REQUIRE((*answers)[3].error); // named twice in one call
    CHECK((*answers)[3].error->code == ErrorCode::invalid_input);
    // Durable: a restarted coordinator has both running and re-sends neither.
    REQUIRE(p.restart());
    CHECK(read_job(*p.coord, p.admin, placed[0].job).value().state == JobState::running);
    CHECK(read_job(*p.coord, p.admin, placed[1].job).value().state == JobState::running);
    CHECK(coordinator::assignments(*p.coord, p.owner_worker).value().empty());
    // A repeated start is harmless, as with the single route; only workers report starts.
    auto again = coordinator::start_attempts(*p.coord, p.owner_worker, {placed[0].attempt});
    REQUIRE(again.has_value());
    CHECK_FALSE((*again)[0].error);
    CHECK_FALSE(coordinator::start_attempts(*p.coord, p.admin, {placed[0].attempt}).has_value());
}

TEST_CASE("dispatch: a scheduling pass runs when its inputs changed or after the quiet period, not on every tick",
          "[dispatch]") {
    CreditPool p;
    fund(p);
    PassCounter events;
    p.coord->set_events(&events);
    p.coord->tick();
    const int first = events.passes; // the first tick always decides
    CHECK(first == 1);
    for (int i = 0; i < 5; ++i) {
        p.clock.advance_ms(100);
        p.coord->tick(); // nothing changed
    }
    CHECK(events.passes == first);
    CHECK_FALSE(p.coord->pass_due());

    // A heartbeat that only renews (same state) changes nothing a pass reads.
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    CHECK_FALSE(p.coord->pass_due());

    // A submission does: the next pass places it at once.
    const JobId job = p.submit(half_l4("a"));
    CHECK(p.coord->pass_due());
    auto woken = p.coord->schedule_pass();
    CHECK(woken == std::vector<WorkerId>{*p.owner_worker.worker});
    CHECK(events.passes == first + 1);
    CHECK(read_job(*p.coord, p.admin, job).value().state == JobState::assigned);
    CHECK_FALSE(p.coord->pass_due()); // its own placements are not news to the next pass

    // A draining worker changes capacity.
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}, {}, true));
    CHECK(p.coord->pass_due());
    p.coord->tick();
    CHECK_FALSE(p.coord->pass_due());

    // The quiet period: usage decays and queued jobs age, so a pass runs at least this often.
    p.clock.advance_ms(Coordinator::k_quiet_pass_ms);
    CHECK(p.coord->pass_due());
    p.coord->set_events(nullptr);
}

TEST_CASE("dispatch: an attempt ending lets the next queued job onto the freed share in the next pass", "[dispatch]") {
    CreditPool p;
    const auto ids = two_running(p);
    const JobId third = p.submit(half_l4("c"));
    p.coord->tick();
    CHECK(read_job(*p.coord, p.admin, third).value().state == JobState::queued); // the GPU is full
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, ids[0], 0, ""));
    CHECK(p.coord->pass_due());
    CHECK(p.coord->schedule_pass() == std::vector<WorkerId>{*p.owner_worker.worker});
    auto offered = coordinator::assignments(*p.coord, p.owner_worker).value();
    REQUIRE(offered.size() == 1);
    CHECK(offered[0].job == third);
}

namespace svc = gpupool::test::svc;
using json = nlohmann::json;

TEST_CASE("dispatch: POST /v1/jobs/wait is answered when the jobs end, and at once when they have", "[dispatch]") {
    svc::Pool pool;
    auto sub = pool.submit({svc::spec("a")});
    const std::int64_t job = sub["jobs"][0];
    auto member = pool.server.client(pool.member);
    auto w = pool.server.client(pool.worker);

    // A zero wait answers at once: not done.
    auto now = svc::call(member, "POST", "/v1/jobs/wait", {{"jobs", {job}}, {"wait_ms", 0}});
    CHECK(now["done"] == false);
    REQUIRE(now["jobs"].size() == 1);
    CHECK(now["jobs"][0]["id"] == job);

    // Parked: answered by the job's end, long before its 20 s wait is over.
    auto waiter = std::async(std::launch::async, [&] {
        auto c = pool.server.client(pool.member);
        const auto began = std::chrono::steady_clock::now();
        // No Catch2 assertion off the test's thread (they are not thread-safe): the answer is checked below.
        auto r = c.request("POST", "/v1/jobs/wait", json{{"jobs", {job}}, {"wait_ms", 20'000}}.dump());
        return std::make_pair(r, std::chrono::steady_clock::now() - began);
    });
    auto polled = svc::call(w, "POST", "/v1/workers/poll?wait_ms=5000");
    REQUIRE(polled["assignments"].size() == 1);
    const std::int64_t attempt = polled["assignments"][0]["attempt"];
    svc::call(w, "POST", "/v1/attempts/" + std::to_string(attempt) + "/start");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(waiter.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout); // still running
    auto batch = svc::call(w, "POST", "/v1/attempts/complete",
                           {{"completions", {{{"attempt", attempt}, {"exit_code", 0}, {"outcome", "exited"}}}}});
    CHECK(batch["results"][0]["attempt"] == attempt);
    CHECK_FALSE(batch["results"][0].contains("error"));
    auto [reply, took] = waiter.get();
    REQUIRE(reply);
    REQUIRE(reply->status == 200);
    const json answer = json::parse(reply->body);
    CHECK(answer["done"] == true);
    CHECK(answer["jobs"][0]["state"] == "succeeded");
    CHECK(took < std::chrono::seconds(10));

    // Ended already: answered at once whatever the wait.
    const auto began = std::chrono::steady_clock::now();
    auto ended = svc::call(member, "POST", "/v1/jobs/wait", {{"jobs", {job}}, {"wait_ms", 20'000}});
    CHECK(ended["done"] == true);
    CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(5));

    // Another team's job, a job that does not exist, a bad body: refused with the field.
    auto other = pool.server.client(pool.other);
    auto r = other.request("POST", "/v1/jobs/wait", json{{"jobs", {job}}, {"wait_ms", 0}}.dump());
    REQUIRE(r);
    CHECK(r->status == 404);
    CHECK(json::parse(r->body)["field"] == "jobs[0]");
    r = member.request("POST", "/v1/jobs/wait", json{{"jobs", {job, 4242}}}.dump());
    REQUIRE(r);
    CHECK(r->status == 404);
    CHECK(json::parse(r->body)["field"] == "jobs[1]");
    r = member.request("POST", "/v1/jobs/wait", json{{"jobs", "all"}}.dump());
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(json::parse(r->body)["field"] == "jobs");
    // Workers do not wait on jobs.
    r = w.request("POST", "/v1/jobs/wait", json{{"jobs", {job}}}.dump());
    REQUIRE(r);
    CHECK(r->status == 403);
}

TEST_CASE("dispatch: a parked poll is answered by the pass a submission triggers, well inside the tick", "[dispatch]") {
    // A slow tick (10 s): only the event-driven pass can place the job in time.
    svc::Server server(30'000, std::int64_t{64} << 20, 60'000,
                       [](coordinator::ServiceOptions& o) { o.tick = std::chrono::milliseconds(10'000); });
    auto admin = server.client(server.admin_token);
    for (const char* team : {"fellows", "owners"}) {
        svc::call(admin, "POST", "/v1/admin/teams", {{"name", team}}, 201);
    }
    std::string member = svc::call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
    std::string enroll = svc::call(admin, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "owners"}}, 201)["token"];
    svc::call(admin, "POST", "/v1/admin/grants", {{"team", "fellows"}, {"amount_micro", 1'000'000'000'000}}, 201);
    auto e = server.client(enroll);
    std::string worker = svc::call(e, "POST", "/v1/workers/register", {{"name", "box"}, {"inventory", svc::inventory()}}, 201)["token"];
    auto w = server.client(worker);
    svc::call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    auto poll = std::async(std::launch::async, [&] {
        auto c = server.client(worker);
        const auto began = std::chrono::steady_clock::now();
        // No Catch2 assertion off the test's thread (they are not thread-safe): the answer is checked below.
        auto r = c.request("POST", "/v1/workers/poll?wait_ms=8000", "");
        return std::make_pair(r, std::chrono::steady_clock::now() - began);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // parked
    auto m = server.client(member);
    svc::call(m, "POST", "/v1/jobs",
              {{"source", "t.toml"}, {"max_parallel", 0}, {"jobs", json::parse(recipe::to_json(std::vector{svc::spec("a")}).dump())}},
              201);
    auto [reply, took] = poll.get();
    REQUIRE(reply);
    REQUIRE(reply->status == 200);
    const json answer = json::parse(reply->body);
    REQUIRE(answer["assignments"].size() == 1);
    CHECK(took < std::chrono::seconds(5)); // the 10 s tick did not place it
}

} // namespace test_dispatch
} // namespace
