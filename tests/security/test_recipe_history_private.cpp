// POST /v1/recipes/history never tells a member that another team ran a recipe from a repository
// the pool does not name public (coordinator --public-recipe-repo): whether a repository is
// private cannot be told from what a job records, so only the caller's team's runs count for it.
#include "tests/core/coordinator/service_fixture.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_history_private {

using namespace gpupool;
using namespace gpupool::test::svc;

TEST_CASE("recipe history: team B does not learn that team A ran a recipe from A's private repository",
          "[service][recipes][security]") {
    Pool p;
    const std::string repo = "git@example.org:fellows/private-recipes";
    auto job = spec("probe-run");
    job.origins.push_back({"secret-probe", repo, std::string(40, 'a')});
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    p.submit({job}); // as a member of "fellows"
    json polled = json::object();
    for (int i = 0; i < 50 && polled.value("assignments", json::array()).empty(); ++i) {
        polled = call(w, "POST", "/v1/workers/poll?wait_ms=200", json::object());
    }
    REQUIRE(polled["assignments"].size() == 1);
    const std::string attempt = std::to_string(polled["assignments"][0]["attempt"].get<std::int64_t>());
    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", 0}});

    const json asked = {{"recipes", json::array({{{"recipe", "secret-probe"}, {"repo", repo}}})}};
    auto runs_for = [&](const std::string& token) {
        auto c = p.server.client(token);
        const json h = call(c, "POST", "/v1/recipes/history", asked);
        REQUIRE(h["recipes"].size() == 1);
        return h["recipes"][0]["runs"].get<std::int64_t>();
    };
    CHECK(runs_for(p.other) == 0);             // team B ("others"): nothing
    CHECK(runs_for(p.member) == 1);            // team A ("fellows"): its own run
    CHECK(runs_for(p.server.admin_token) == 1); // admins: every team's
}

} // namespace test_recipe_history_private
} // namespace
