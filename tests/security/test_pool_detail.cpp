// GET /v1/pool as a member sees it: under `coordinator --members-see summary` (the default) the
// GPUs' figures are the member's own team's use and other teams go unnamed; under `full` a member
// sees every GPU's use as admins do; admins always see it all.
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_pool_detail {

using namespace gpupool;
using namespace gpupool::test::svc;

namespace {

// Team "fellows" runs one quarter-GPU job on the pool's worker; returns once it is assigned.
void fellows_run_one(Pool& p) {
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    p.submit({spec("fellows-secret-eval")});
    json polled = json::object();
    for (int i = 0; i < 50 && polled.value("assignments", json::array()).empty(); ++i) {
        polled = call(w, "POST", "/v1/workers/poll?wait_ms=200", json::object());
    }
    REQUIRE(polled["assignments"].size() == 1);
}

json pool_as(Pool& p, const std::string& token) {
    auto c = p.server.client(token);
    return call(c, "GET", "/v1/pool");
}

} // namespace

TEST_CASE("pool overview: by default a member sees the totals and its own team's use, not another team's",
          "[service][overview][security]") {
    Pool p;
    fellows_run_one(p);
    const json theirs = pool_as(p, p.other); // a member of "others"
    INFO(theirs.dump(2));
    CHECK(theirs["detail"] == "summary");
    const std::string text = theirs.dump();
    CHECK(text.find("fellows") == std::string::npos); // no other team's name...
    CHECK(text.find("owners") == std::string::npos);
    CHECK(text.find("fellows-secret-eval") == std::string::npos); // ...nor its job
    REQUIRE(theirs["workers"].size() == 1);
    CHECK(theirs["workers"][0]["name"] == "box"); // the pool's capacity is there
    CHECK(theirs["workers"][0]["gpus"][0]["allocated_milli"] == 0);
    CHECK(theirs["workers"][0]["gpus"][0]["jobs"] == 0);
    CHECK(theirs["totals"]["gpu_milli_allocated"] == 250); // the totals are the pool's
    CHECK(theirs["running"].empty());

    // The member of the team that runs it sees its own use per GPU.
    const json mine = pool_as(p, p.member);
    CHECK(mine["workers"][0]["gpus"][0]["allocated_milli"] == 250);
    CHECK(mine["workers"][0]["gpus"][0]["jobs"] == 1);
    CHECK(mine["running"].size() == 1);

    // Admins see everything, whatever members see.
    const json all = pool_as(p, p.server.admin_token);
    CHECK(all["detail"] == "full");
    CHECK(all["workers"][0]["team"] == "owners");
    CHECK(all["workers"][0]["gpus"][0]["allocated_milli"] == 250);
    REQUIRE(all["running"].size() == 1);
    CHECK(all["running"][0]["team"] == "fellows");
}

TEST_CASE("pool overview: with --members-see full a member sees every team's use of each GPU",
          "[service][overview][security]") {
    Pool p(30'000, std::int64_t{64} << 20, 60'000,
           [](coordinator::ServiceOptions& o) { o.coordinator.members_see = coordinator::MembersSee::full; });
    fellows_run_one(p);
    const json theirs = pool_as(p, p.other);
    INFO(theirs.dump(2));
    CHECK(theirs["detail"] == "full");
    CHECK(theirs["workers"][0]["team"] == "owners");
    CHECK(theirs["workers"][0]["gpus"][0]["allocated_milli"] == 250);
    CHECK(theirs["workers"][0]["gpus"][0]["jobs"] == 1);
    CHECK(theirs["running"].empty()); // other teams' job lists stay theirs in both modes
}

} // namespace test_pool_detail
} // namespace
