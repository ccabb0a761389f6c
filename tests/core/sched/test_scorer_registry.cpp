// The scorer registry (scorers.hpp): names, parsing and the named built-ins agree with it, and
// every entry places a job the filters let through.
#include "core/sched/placement.hpp"
#include "core/sched/scorers.hpp"
#include "tests/core/sched/fixtures.hpp"

#include <catch2/catch.hpp>

#include <set>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_scorer_registry {

using namespace gpupool;
using namespace gpupool::sched;
using namespace gpupool::sched::test;

TEST_CASE("scorer registry: every scorer parses by its name, and the built-ins are where their names say",
          "[sched][scorers]") {
    REQUIRE(scorers().size() >= 5);
    std::set<std::string_view> names;
    for (std::size_t i = 0; i < scorers().size(); ++i) {
        const ScorerEntry& e = scorers()[i];
        CHECK(names.insert(e.name).second); // unique
        CHECK_FALSE(e.summary.empty());
        REQUIRE(e.choose != nullptr);
        auto k = parse_scorer(e.name);
        REQUIRE(k);
        CHECK(k->index() == i);
        CHECK(std::string(to_string(*k)) == e.name);
        CHECK(scorer_names().at(i) == e.name);
    }
    CHECK(std::string(to_string(ScorerKind::fgd)) == "fgd");
    CHECK(std::string(to_string(ScorerKind::fgd_k8s)) == "fgd-k8s");
    CHECK(std::string(to_string(ScorerKind::bestfit)) == "bestfit");
    CHECK(std::string(to_string(ScorerKind::packing)) == "packing");
    CHECK(std::string(to_string(ScorerKind::random)) == "random");
    auto bad = parse_scorer("worstfit");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "unknown placement policy `worstfit` (known: fgd, fgd-k8s, bestfit, packing, random)");
}

TEST_CASE("scorer registry: each scorer picks a usable GPU share, and bestfit picks the tightest",
          "[sched][scorers]") {
    const Worker w = worker(1, {1000, 300, 600});
    const JobRequest job = share_job(1, 250);
    const Workload workload = typical_workload({job});
    const ScoreScale scale = scale_of({w});
    Rng rng(7);
    for (std::size_t i = 0; i < scorers().size(); ++i) {
        INFO(scorers()[i].name);
        auto c = choose_on_worker(w, job, ScorerKind(static_cast<std::uint8_t>(i)), workload, scale, rng);
        REQUIRE(c);
        REQUIRE(c->gpus.size() == 1);
        CHECK(c->milli == 250);
        CHECK(w.gpus[c->gpus.front()].milli_free >= 250);
    }
    auto tight = choose_on_worker(w, job, ScorerKind::bestfit, workload, scale, rng);
    REQUIRE(tight);
    CHECK(tight->gpus.front() == 1); // 300 free: 50 left over
    CHECK_FALSE(choose_on_worker(w, share_job(2, 1000, 64000), ScorerKind::fgd, workload, scale, rng));
}

} // namespace test_scorer_registry
} // namespace
