// What a recipe's jobs may cost before they run (core/credits/estimate.hpp), on a small catalog.
#include "core/credits/estimate.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_estimate {

using namespace gpupool;
using namespace gpupool::credits;

namespace {

// T4: 16 GiB at 2 credits per GPU-hour; H100: 80 GiB at 4; CPU: 0.02 per core-hour.
RateCatalog small_rates() {
    RateCatalog r;
    r.gpus = {GpuRate{"T4", {}, 16 * 1024, 2 * k_micro_per_credit},
              GpuRate{"H100", {}, 80 * 1024, 4 * k_micro_per_credit}};
    r.cpu_micro_per_core_hour = 20'000;
    return r;
}

// One cloud offer: an H100 at $3 per GPU-hour.
PriceCatalog small_prices() {
    PriceCatalog p;
    p.as_of = "2026-11-01";
    p.prices = {CloudPrice{"cloudy", "h100.1x", "H100", 3'000'000, "2026-11-01", "https://example.test"}};
    return p;
}

recipe::JobSpec gpu_job(std::int64_t runtime_s, std::int64_t gpu_milli = 1000, std::int64_t gpu_memory_mib = 0) {
    recipe::JobSpec j;
    j.resources.gpus = 1;
    j.resources.gpu_milli = gpu_milli;
    j.resources.gpu_memory_mib = gpu_memory_mib;
    j.resources.max_runtime_s = runtime_s;
    return j;
}

} // namespace

TEST_CASE("estimate: each model that fits, cheapest first, with the cloud price of the same GPU-hours",
          "[credits][estimate]") {
    const auto rates = small_rates();
    const auto prices = small_prices();
    // Two one-hour jobs on half a GPU: one GPU-hour in all.
    const std::vector<recipe::JobSpec> jobs{gpu_job(3600, 500), gpu_job(3600, 500)};
    const CostEstimate e = estimate_cost(jobs, rates, prices);
    CHECK(e.cpu_only_max_micro == 0);
    REQUIRE(e.models.size() == 2);
    // T4: 2 x (2 credits/h x 0.5 x 1 h) = 2 credits; H100: 4 credits.
    CHECK(e.models[0].gpu->model == "T4");
    CHECK(e.models[0].max_micro == 2 * k_micro_per_credit);
    CHECK(e.models[1].gpu->model == "H100");
    CHECK(e.models[1].max_micro == 4 * k_micro_per_credit);
    CHECK(e.models[1].gpu_hours() == Approx(1.0));
    CHECK(e.models[0].cloud.empty());
    REQUIRE(e.models[1].cloud.size() == 1);
    CHECK(e.models[1].cloud[0].price->provider == "cloudy");
    CHECK(e.models[1].cloud[0].micro_usd == 3'000'000); // one GPU-hour at $3
    CHECK(e.models[0].accepted);
    CHECK(e.models[1].accepted);
}

TEST_CASE("estimate: a model with less memory than a job asks for is left out, and memory sets the share",
          "[credits][estimate]") {
    const auto rates = small_rates();
    // 40 GiB of an 80 GiB H100 for two hours: half a GPU, 2 credits/h x 2 h = 4 credits.
    const CostEstimate e = estimate_cost({gpu_job(7200, 0, 40 * 1024)}, rates, small_prices());
    REQUIRE(e.models.size() == 1);
    CHECK(e.models[0].gpu->model == "H100");
    CHECK(e.models[0].max_micro == 4 * k_micro_per_credit);
}

TEST_CASE("estimate: CPU-only jobs cost the same everywhere and alone list no model", "[credits][estimate]") {
    recipe::JobSpec cpu;
    cpu.resources.gpus = 0;
    cpu.resources.cpu_milli = 2000;
    cpu.resources.max_runtime_s = 3600;
    const auto rates = small_rates();
    // 2 cores x 0.02 credits per core-hour x 1 h.
    const CostEstimate alone = estimate_cost({cpu}, rates, small_prices());
    CHECK(alone.cpu_only_max_micro == 40'000);
    CHECK(alone.models.empty());
    const CostEstimate mixed = estimate_cost({cpu, gpu_job(3600)}, rates, small_prices());
    REQUIRE(mixed.models.size() == 2);
    CHECK(mixed.models[0].max_micro == 40'000 + 2 * k_micro_per_credit);
}

TEST_CASE("estimate: a cheaper model is named against the priciest accepted one, or the pool's choice",
          "[credits][estimate]") {
    const auto rates = small_rates();
    const std::vector<recipe::JobSpec> free_jobs{gpu_job(3600)};
    const CostEstimate e = estimate_cost(free_jobs, rates, small_prices());
    auto c = cheaper_model(e, free_jobs, rates, std::nullopt);
    REQUIRE(c);
    CHECK(c->cheapest->gpu->model == "T4");
    CHECK(c->instead_of->gpu->model == "H100");
    CHECK_FALSE(c->restricted);

    // The pool says it lands on the T4: nothing is cheaper.
    CHECK_FALSE(cheaper_model(e, free_jobs, rates, std::string("T4")));
    // The pool chose the H100: cheaper exists, but the jobs are not free to move.
    auto pool = cheaper_model(e, free_jobs, rates, std::string("H100"));
    REQUIRE(pool);
    CHECK(pool->restricted);

    // Jobs that allow only the H100: T4 is not accepted, still the cheaper one to mention.
    auto restricted_job = gpu_job(3600);
    restricted_job.resources.gpu_models = {"H100"};
    const std::vector<recipe::JobSpec> only_h100{restricted_job};
    const CostEstimate r = estimate_cost(only_h100, rates, small_prices());
    REQUIRE(r.models.size() == 2);
    CHECK_FALSE(r.models[0].accepted);
    CHECK(r.models[1].accepted);
    auto rc = cheaper_model(r, only_h100, rates, std::nullopt);
    REQUIRE(rc);
    CHECK(rc->restricted);
    CHECK(rc->instead_of->gpu->model == "H100");
}

} // namespace test_estimate
} // namespace
