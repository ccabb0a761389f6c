// One worker's earnings for its owner (core/coordinator/worker_earnings.hpp): summed per worker from
// the ledger over UTC days and weeks, and readable only by the worker, its team and admins. The
// route itself (GET /v1/workers/{id}/earnings) runs on a real service in test_service-style below.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/worker_earnings.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_worker_earnings {

using namespace gpupool;
using namespace gpupool::test::credit_pool;

namespace {

constexpr std::int64_t k_minute = 60'000;
constexpr std::int64_t k_wed_1000 = 1'796'205'600'000; // Wednesday 2026-12-02 10:00 UTC
constexpr std::int64_t k_wed_0000 = 1'796'169'600'000; // Wednesday 2026-12-02 00:00 UTC
constexpr std::int64_t k_mon_0000 = 1'795'996'800'000; // Monday 2026-11-30 00:00 UTC
constexpr std::int64_t k_mon_0900 = 1'796'029'200'000; // Monday 2026-11-30 09:00 UTC
constexpr std::int64_t k_fri_1200 = 1'795'780'800'000; // Friday 2026-11-27 12:00 UTC (the week before)

// Runs one half-L4 job on `worker` for 30 minutes from `at`: 0.25 credits to its owners.
void earn(CreditPool& p, const Principal& worker, std::int64_t at) {
    p.clock.set_ms(at);
    p.submit(half_l4("job"));
    REQUIRE(coordinator::heartbeat(*p.coord, worker, {}));
    p.coord->tick();
    auto a = coordinator::assignments(*p.coord, worker).value();
    REQUIRE(a.size() == 1);
    REQUIRE(coordinator::start_attempt(*p.coord, worker, a.front().attempt));
    p.clock.advance_ms(30 * k_minute);
    REQUIRE(coordinator::heartbeat(*p.coord, worker, {a.front().attempt}));
    REQUIRE(coordinator::complete_attempt(*p.coord, worker, a.front().attempt, 0, ""));
}

} // namespace

TEST_CASE("worker earnings: UTC days start at midnight and weeks on Monday, before 1970 too",
          "[credits][coordinator]") {
    using coordinator::utc_day_start_ms;
    using coordinator::utc_week_start_ms;
    CHECK(utc_day_start_ms(k_wed_1000) == k_wed_0000);
    CHECK(utc_week_start_ms(k_wed_1000) == k_mon_0000);
    CHECK(utc_week_start_ms(k_mon_0000) == k_mon_0000);
    CHECK(utc_week_start_ms(k_mon_0000 - 1) == k_mon_0000 - 7 * 86'400'000);
    CHECK(utc_week_start_ms(1'796'601'540'000) == k_mon_0000);        // Sunday 2026-12-06 23:59
    CHECK(utc_week_start_ms(1'796'601'600'000) == 1'796'601'600'000); // Monday 2026-12-07 00:00
    CHECK(utc_day_start_ms(0) == 0);
    CHECK(utc_week_start_ms(0) == -259'200'000);         // Thursday 1970-01-01: Monday 1969-12-29
    CHECK(utc_day_start_ms(-43'200'000) == -86'400'000); // Wednesday 1969-12-31 12:00
}

TEST_CASE("worker earnings: each worker's own today, this week and all time, not its team's",
          "[credits][coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, "fellowship"));
    const Principal first = p.owner_worker;
    earn(p, first, k_fri_1200); // last week
    earn(p, first, k_mon_0900); // this week, not today
    earn(p, first, k_wed_1000); // today
    // A second machine of the same owners earns today too, while the first is drained.
    auto enroll = create_token(*p.coord, p.admin, store::Role::enroll, "owners", "e2").value();
    auto reg =
        coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(), "second-box", l4_box())
            .value();
    const Principal second = p.coord->authenticate(reg.secret).value();
    REQUIRE(set_worker_state(*p.coord, p.admin, *first.worker, store::WorkerState::draining));
    earn(p, second, k_wed_1000 + 60 * k_minute);

    p.clock.set_ms(k_wed_1000 + 2 * 60 * k_minute);
    auto e = worker_earnings(*p.coord, first, *first.worker);
    REQUIRE(e);
    CHECK(e->name == "l4-box");
    CHECK(e->team_name == "owners");
    CHECK(e->day_start_ms == k_wed_0000);
    CHECK(e->week_start_ms == k_mon_0000);
    // shares: 0.25 credits per job; the first machine ran one today, two this week, three in all.
    CHECK(e->today_micro == k_credit / 4);
    CHECK(e->week_micro == k_credit / 2);
    CHECK(e->total_micro == 3 * k_credit / 4);
    CHECK(e->attempts == 3);
    CHECK(e->settling_micro == 0);
    auto s = worker_earnings(*p.coord, p.admin, *second.worker);
    REQUIRE(s);
    CHECK(s->today_micro == k_credit / 4);
    CHECK(s->total_micro == k_credit / 4);
    // The team's balance is both machines' together; each worker's figure is its own.
    CHECK(p.balance("owners") == k_credit);

    // Another worker, the paying team's member, or a worker asking about its sibling: no such worker.
    for (const Principal* who : std::initializer_list<const Principal*>{&p.fellow, &second}) {
        auto denied = worker_earnings(*p.coord, *who, *first.worker);
        REQUIRE_FALSE(denied);
        CHECK(denied.error().code == ErrorCode::not_found);
    }
    CHECK_FALSE(worker_earnings(*p.coord, p.admin, WorkerId(999)));
}

TEST_CASE("worker earnings: a voided attempt's refund lowers the day it was made, the fee is not the owner's",
          "[credits][coordinator]") {
    CreditPool p(true, 100'000, 7 * 86'400'000); // a 10% fee, a week of settling
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 100 * k_credit, std::nullopt, "fellowship"));
    earn(p, p.owner_worker, k_mon_0900);
    earn(p, p.owner_worker, k_wed_1000);
    p.clock.set_ms(k_wed_1000 + 60 * k_minute);
    auto e = worker_earnings(*p.coord, p.owner_worker, *p.owner_worker.worker).value();
    // shares: 0.25 charged per job, 0.025 of it the fee: 0.225 to the owners, still settling.
    CHECK(e.today_micro == 225'000);
    CHECK(e.total_micro == 450'000);
    CHECK(e.settling_micro == 450'000);
    // Banning it and voiding since Monday refunds both today.
    REQUIRE(ban_worker(*p.coord, p.admin, *p.owner_worker.worker, k_mon_0000));
    e = worker_earnings(*p.coord, p.admin, *p.owner_worker.worker).value();
    CHECK(e.total_micro == 0);
    CHECK(e.week_micro == 0);
    CHECK(e.today_micro == 225'000 - 450'000);
    CHECK(e.settling_micro == 0);
}

TEST_CASE("worker earnings route: the worker and its owners read it, another team's member cannot",
          "[credits][service]") {
    using namespace gpupool::test::svc;
    Pool p;
    auto admin = p.server.client(p.server.admin_token);
    const std::string owner =
        call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "owners"}}, 201)["token"];
    const std::string path = "/v1/workers/" + std::to_string(p.worker_id) + "/earnings";
    for (const std::string& token : {p.worker, owner, p.server.admin_token}) {
        auto c = p.server.client(token);
        auto j = call(c, "GET", path);
        CHECK(j["worker"] == p.worker_id);
        CHECK(j["name"] == "box");
        CHECK(j["team"] == "owners");
        CHECK(j["total_micro"] == 0);
        CHECK(j["day_start_ms"].get<std::int64_t>() % 86'400'000 == 0);
        CHECK(j.contains("week_micro"));
        CHECK(j.contains("settling_micro"));
    }
    for (const std::string& token : {p.member, p.other}) {
        auto c = p.server.client(token);
        auto r = c.request("GET", path);
        REQUIRE(r);
        CHECK(r->status == 404);
        CHECK(r->body.find("total_micro") == std::string::npos);
    }
    auto anonymous = p.server.client();
    auto r = anonymous.request("GET", path);
    REQUIRE(r);
    CHECK(r->status == 401);
    auto c = p.server.client(owner);
    call(c, "GET", "/v1/workers/abc/earnings", nullptr, 400);
}

} // namespace test_worker_earnings
} // namespace
