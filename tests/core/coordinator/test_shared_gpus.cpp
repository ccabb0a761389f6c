// The coordinator's side of shared GPUs, on a real SQLite file and a manual clock: the idle timeout
// each assignment carries, a download in progress shown as the job's reason, no fractional jobs on
// GPUs that enforce nothing when the pool says so, and jobs placed where their models are cached.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/store/sqlite_store.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_shared_gpus {

using namespace gpupool;
using namespace gpupool::coordinator;

namespace {

recipe::JobSpec gpu_job(const std::string& name, std::int64_t milli) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"true"};
    s.resources.gpus = 1;
    s.resources.gpu_milli = milli;
    s.resources.cpu_milli = 1000;
    s.resources.memory_mib = 1024;
    s.resources.max_runtime_s = 600;
    return s;
}

api::Inventory one_gpu(const std::string& enforcement, std::vector<api::CachedModelInfo> models = {}) {
    api::Inventory inv;
    inv.cpu_milli = 8000;
    inv.memory_mib = 32768;
    inv.gpus.push_back({0, "L4", 24576, "GPU-a", enforcement});
    inv.cached_models = std::move(models);
    return inv;
}

struct Pool {
    test::TempDir dir;
    util::ManualClock clock;
    std::unique_ptr<store::SqliteStore> db;
    std::unique_ptr<Coordinator> coord;
    Principal admin;
    Principal member;

    explicit Pool(CoordinatorOptions options) {
        options.policy.placement.scorer = sched::ScorerKind::bestfit;
        db = store::SqliteStore::open(dir.path() / "pool.db").value();
        coord = std::make_unique<Coordinator>(*db, clock, options);
        REQUIRE(coord->start());
        admin = coord->authenticate(init_admin(*coord).value().secret).value();
        REQUIRE(create_team(*coord, admin, "fellows", 1));
        REQUIRE(create_team(*coord, admin, "owners", 1));
        REQUIRE(grant_credits(*coord, admin, "fellows", 1'000'000 * credits::k_micro_per_credit, std::nullopt, "test"));
        member = coord->authenticate(create_token(*coord, admin, store::Role::member, "fellows", "m").value().secret)
                     .value();
    }

    Principal add_worker(const std::string& name, const api::Inventory& inv) {
        auto enroll = create_token(*coord, admin, store::Role::enroll, "owners", "enroll").value();
        auto reg = coordinator::register_worker(*coord, coord->authenticate(enroll.secret).value(), name, inv);
        REQUIRE(reg);
        return coord->authenticate(reg->secret).value();
    }

    JobId submit(recipe::JobSpec spec) {
        SubmitRequest r{"test.toml", 0, {std::move(spec)}, std::nullopt};
        auto res = coordinator::submit(*coord, member, std::move(r));
        REQUIRE(res);
        return res->jobs.at(0);
    }

    store::JobRecord job(JobId id) { return read_job(*coord, admin, id).value(); }
};

} // namespace

TEST_CASE("coordinator: an assignment carries the recipe's idle timeout, else the pool's", "[coordinator][idle]") {
    CoordinatorOptions o;
    o.idle_timeout_s = 900;
    Pool p(o);
    const auto w = p.add_worker("box", one_gpu("watchdog"));
    auto pool_default = gpu_job("default", 250);
    auto never = gpu_job("never", 250);
    never.resources.idle_timeout_s = 0;
    auto own = gpu_job("own", 250);
    own.resources.idle_timeout_s = 120;
    const auto a = p.submit(pool_default);
    const auto b = p.submit(never);
    const auto c = p.submit(own);
    p.coord->tick();
    std::map<JobId, std::int64_t> idle;
    for (const auto& x : coordinator::assignments(*p.coord, w).value()) {
        idle[x.job] = x.idle_timeout_s;
    }
    REQUIRE(idle.size() == 3);
    CHECK(idle.at(a) == 900);
    CHECK(idle.at(b) == 0);
    CHECK(idle.at(c) == 120);
}

TEST_CASE("coordinator: a download in progress is the job's reason until it starts", "[coordinator][model-cache]") {
    Pool p(CoordinatorOptions{});
    const auto w = p.add_worker("box", one_gpu("watchdog"));
    const auto id = p.submit(gpu_job("weights", 500));
    p.coord->tick();
    const auto as = coordinator::assignments(*p.coord, w).value();
    REQUIRE(as.size() == 1);
    api::Heartbeat beat;
    beat.running = {as[0].attempt};
    beat.fetching = {{as[0].attempt, 3'200'000'000, 14'000'000'000}};
    REQUIRE(coordinator::receive_heartbeat(*p.coord, w, beat));
    CHECK(shown_reason(*p.coord, p.job(id)) == "fetching weights (3.2 of 14.0 GB)");
    // Another worker cannot speak for this attempt.
    const auto other = p.add_worker("other", one_gpu("watchdog"));
    api::Heartbeat lie;
    lie.fetching = {{as[0].attempt, 1, 2}};
    REQUIRE(coordinator::receive_heartbeat(*p.coord, other, lie));
    CHECK(shown_reason(*p.coord, p.job(id)) == "fetching weights (3.2 of 14.0 GB)");
    beat.fetching = {{as[0].attempt, 0, 0}};
    REQUIRE(coordinator::receive_heartbeat(*p.coord, w, beat));
    CHECK(shown_reason(*p.coord, p.job(id)) == "fetching weights (0.0 of ? GB)");
    REQUIRE(coordinator::start_attempt(*p.coord, w, as[0].attempt));
    CHECK_THAT(shown_reason(*p.coord, p.job(id)), Catch::StartsWith("running on worker"));
}

TEST_CASE("coordinator: GPUs that enforce nothing take whole-GPU jobs only, when the pool says so",
          "[coordinator][enforcement]") {
    CoordinatorOptions o;
    o.whole_gpu_only_unenforced = true;
    Pool p(o);
    const auto w = p.add_worker("bare", one_gpu("none"));
    const auto share = p.submit(gpu_job("share", 250));
    p.coord->tick();
    CHECK(coordinator::assignments(*p.coord, w).value().empty());
    CHECK(p.job(share).state == store::JobState::queued);
    const auto whole = p.submit(gpu_job("whole", 1000));
    p.coord->tick();
    const auto as = coordinator::assignments(*p.coord, w).value();
    REQUIRE(as.size() == 1);
    CHECK(as[0].job == whole);

    // By default such a GPU takes shares too (the inventory still says `none`).
    Pool lax(CoordinatorOptions{});
    const auto w2 = lax.add_worker("bare", one_gpu("none"));
    lax.submit(gpu_job("share", 250));
    lax.coord->tick();
    CHECK(coordinator::assignments(*lax.coord, w2).value().size() == 1);
}

TEST_CASE("coordinator: a job goes to the worker whose cache holds its models", "[coordinator][model-cache]") {
    Pool p(CoordinatorOptions{});
    const auto cold = p.add_worker("cold", one_gpu("watchdog"));
    const auto warm = p.add_worker("warm", one_gpu("watchdog", {{"org/tiny", "main", 4096}}));
    auto spec = gpu_job("eval", 1000);
    spec.cache_models = {"org/tiny"};
    for (int i = 0; i < 5; ++i) { // the ties between equal workers are random: the cache must decide each time
        const auto id = p.submit(spec);
        p.coord->tick();
        const auto as = coordinator::assignments(*p.coord, warm).value();
        REQUIRE(as.size() == 1);
        CHECK(as[0].job == id);
        CHECK(coordinator::assignments(*p.coord, cold).value().empty());
        REQUIRE(coordinator::start_attempt(*p.coord, warm, as[0].attempt));
        REQUIRE(coordinator::complete_attempt(*p.coord, warm, as[0].attempt, 0, ""));
    }
}

} // namespace test_shared_gpus
} // namespace
