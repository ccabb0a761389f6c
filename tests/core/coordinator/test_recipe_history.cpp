// recipe_history (credit_ops.hpp): the pool's runs of a shared-repository recipe, for `recipe list`.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_history {

using namespace gpupool;
using namespace gpupool::test::credit_pool;

namespace {

recipe::JobSpec from_repo(const std::string& name, const std::string& recipe_name, const std::string& repo) {
    auto spec = half_l4(name);
    spec.origins.push_back({recipe_name, repo, std::string(40, 'a')});
    return spec;
}

// Runs the job on the pool's worker for `minutes`, ending with `exit_code`; returns the attempt.
store::AttemptRecord run(CreditPool& p, JobId job, std::int64_t minutes, int exit_code) {
    auto attempt = p.place_and_start();
    REQUIRE(attempt);
    p.clock.advance_ms(minutes * 60 * 1000);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {*attempt}));
    REQUIRE(coordinator::complete_attempt(*p.coord, p.owner_worker, *attempt, exit_code, ""));
    return p.coord->job_book().attempts_of(job).front();
}

} // namespace

TEST_CASE("recipe history: the median runtime and cost of a repository recipe's successful runs, by repo and name",
          "[coordinator]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, "fellowship"));
    const std::string repo = "https://example.org/recipes";
    auto a1 = run(p, p.submit(from_repo("e1", "toy-eval", repo)), 10, 0);
    auto a2 = run(p, p.submit(from_repo("e2", "toy-eval", repo)), 30, 0);
    run(p, p.submit(from_repo("e3", "toy-eval", repo)), 50, 1);                       // failed: not counted
    run(p, p.submit(from_repo("o1", "toy-eval", "https://example.org/fork")), 90, 0); // another repository
    run(p, p.submit(half_l4("local")), 70, 0);                                        // from a file

    auto h = recipe_history(*p.coord, p.fellow, {{"toy-eval", repo, ""}, {"probe", repo, ""}});
    REQUIRE(h.size() == 2);
    CHECK(h[0].recipe.recipe == "toy-eval");
    CHECK(h[0].runs == 2);
    CHECK(h[0].median_runtime_s == 20 * 60); // runs of 10 and 30 minutes
    const std::int64_t c1 = p.coord->credit_desk().cost_micro(a1, p.coord->now_ms());
    const std::int64_t c2 = p.coord->credit_desk().cost_micro(a2, p.coord->now_ms());
    CHECK(c1 == k_credit / 12); // 0.5 GPU x 1 credit/h x 10 min
    CHECK(h[0].median_cost_micro == (c1 + c2 + 1) / 2);
    CHECK(h[1].runs == 0);
    CHECK(h[1].median_runtime_s == 0);
    // History survives a restart: it is rebuilt from the stored jobs and attempts.
    REQUIRE(p.restart());
    CHECK(recipe_history(*p.coord, p.fellow, {{"toy-eval", repo, ""}})[0].runs == 2);
}

TEST_CASE("estimates: a recipe file's past successful runs give its median runtime, kept as runs end and after a "
          "restart",
          "[coordinator][estimate]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, "fellowship"));
    const auto runs_of = [&](const std::string& source) {
        auto est = estimate_cost(*p.coord, p.fellow, source, {half_l4("next")}, std::nullopt);
        REQUIRE(est);
        REQUIRE(est->jobs.size() == 1);
        return std::pair{est->jobs[0].history_runs, est->jobs[0].runtime_s};
    };
    CHECK(runs_of("train.toml") == std::pair<std::int64_t, std::int64_t>{0, 3600}); // no runs: max_runtime
    run(p, p.submit(half_l4("a")), 10, 0);
    CHECK(runs_of("train.toml") == std::pair<std::int64_t, std::int64_t>{1, 10 * 60});
    run(p, p.submit(half_l4("b")), 30, 0);
    run(p, p.submit(half_l4("c")), 50, 3); // failed: not a run to learn from
    CHECK(runs_of("train.toml") == std::pair<std::int64_t, std::int64_t>{2, 20 * 60});
    CHECK(runs_of("other.toml").first == 0); // by source
    REQUIRE(p.restart());
    CHECK(runs_of("train.toml") == std::pair<std::int64_t, std::int64_t>{2, 20 * 60});
}

TEST_CASE("recipe history: a member counts its own team's runs, and every team's for the pool's public repositories",
          "[coordinator][recipes][security]") {
    CreditPool p;
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 10 * k_credit, std::nullopt, "fellowship"));
    const std::string community = "https://example.org/community-recipes";
    const std::string mine = "/home/fellow/recipes";
    run(p, p.submit(from_repo("c", "toy-eval", community)), 10, 0);
    run(p, p.submit(from_repo("m", "my-probe", mine)), 10, 0);
    const Principal owner_member =
        p.coord->authenticate(create_token(*p.coord, p.admin, store::Role::member, "owners", "o").value().secret)
            .value();
    const std::vector<recipe::Origin> asked{{"toy-eval", community, ""}, {"my-probe", mine, ""}};
    auto runs = [&](const Principal& who) {
        auto h = recipe_history(*p.coord, who, asked);
        REQUIRE(h.size() == 2);
        return std::pair{h[0].runs, h[1].runs};
    };
    CHECK(runs(p.fellow) == std::pair<std::int64_t, std::int64_t>{1, 1});
    CHECK(runs(owner_member) == std::pair<std::int64_t, std::int64_t>{0, 0}); // another team's runs
    CHECK(runs(p.admin) == std::pair<std::int64_t, std::int64_t>{1, 1});
    // The pool names the community repository public: its runs count for everyone, the rest do not.
    p.options.public_recipe_repos = {community};
    REQUIRE(p.restart());
    CHECK(runs(owner_member) == std::pair<std::int64_t, std::int64_t>{1, 0});
}

} // namespace test_recipe_history
} // namespace
