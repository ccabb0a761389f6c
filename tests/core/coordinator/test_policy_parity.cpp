// The coordinator applies exactly sched::schedule's policy: the same queue, run once through a real
// coordinator (SQLite file, manual clock) and once through schedule() over a view written by hand
// from the same facts, gets the same placements and the same reasons to wait. A rule added to the
// coordinator outside sched/ (so that `gpupool sim` would not replay it) breaks this test.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/sched/scheduler.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <tuple>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_policy_parity {

using namespace gpupool;
using namespace gpupool::test::credit_pool;

namespace {

recipe::JobSpec quarter_l4(const std::string& name) {
    recipe::JobSpec s = half_l4(name);
    s.resources.gpu_milli = 250; // a hold of 0.25 credits
    return s;
}

using Placed = std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>>; // job, worker, gpu, milli

} // namespace

TEST_CASE("policy parity: the coordinator places what sched::schedule decides over the same view",
          "[coordinator][sched][parity]") {
    CreditPool p;
    // 0.6 credits: each 0.25 hold enters the pass, but only two placements can be covered.
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 6 * k_credit / 10, std::nullopt, ""));
    auto submit = [&](std::vector<recipe::JobSpec> specs, std::int64_t max_parallel) {
        auto r = coordinator::submit(*p.coord, p.fellow,
                                     SubmitRequest{"t.toml", max_parallel, std::move(specs), std::nullopt, true});
        REQUIRE(r);
        return *r;
    };
    auto capped = submit({quarter_l4("a1"), quarter_l4("a2")}, 1);
    auto open = submit({quarter_l4("b1"), quarter_l4("b2"), quarter_l4("b3")}, 0);
    // An H100 box is there at submit and gone (no heartbeat) when the pass runs.
    auto enroll = create_token(*p.coord, p.admin, store::Role::enroll, "owners", "e2").value();
    api::Inventory h100_box = l4_box();
    h100_box.gpus[0].model = "H100";
    REQUIRE(coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(), "h100-box", h100_box));
    recipe::JobSpec h100 = quarter_l4("c1");
    h100.resources.gpu_models = {"H100"};
    auto unknown = submit({h100}, 0);
    p.clock.advance_ms(p.options.worker_timeout_ms + 1000);
    REQUIRE(coordinator::heartbeat(*p.coord, p.owner_worker, {}));
    const std::int64_t now = p.clock.now_ms();

    // Through the coordinator.
    p.coord->tick();
    Placed by_coordinator;
    for (const auto& a : coordinator::assignments(*p.coord, p.owner_worker).value()) {
        by_coordinator.insert({a.job.value(), p.owner_worker.worker->value(), a.gpu_index, a.gpu_milli});
    }

    // Through schedule(), from the facts alone: one L4 worker, team 1's balance, the sweeps' caps.
    sched::ClusterView view;
    sched::Worker w;
    w.id = *p.owner_worker.worker;
    w.name = "l4-box";
    w.cpu_milli_total = w.cpu_milli_free = 8000;
    w.memory_mib_total = w.memory_mib_free = 32768;
    w.gpus = {sched::Gpu{view.models.intern("NVIDIA L4"), 24576, 1000}};
    view.workers.push_back(w);
    view.teams = {{TeamId(1), 1.0, 0.0}, {TeamId(2), 1.0, 0.0}};
    sched::Admission admission;
    admission.credits.emplace();
    admission.credits->team[TeamId(1)] = 6 * k_credit / 10;
    admission.prices.cpu_micro_per_core_hour = p.options.credits.rates.cpu_micro_per_core_hour;
    admission.prices.gpu_micro_per_hour = {k_credit}; // the catalog's L4: 1 credit per GPU-hour
    admission.sweep_max_parallel[capped.sweep_id] = 1;
    std::vector<sched::JobRequest> queued;
    for (const auto* sweep : {&capped, &open, &unknown}) {
        for (JobId id : sweep->jobs) {
            auto spec = read_job(*p.coord, p.admin, id).value();
            auto r = sched::make_request(id, TeamId(1), spec.spec, spec.created_at / 1000, view.models);
            r.sweep = sweep->sweep_id;
            queued.push_back(r);
        }
    }
    sched::Decisions d = sched::schedule(view, queued, admission, p.options.policy, now / 1000);
    Placed by_schedule;
    for (const auto& pl : d.placements) {
        by_schedule.insert({pl.job.value(), pl.worker.value(), pl.gpus.empty() ? -1 : pl.gpus.front(), pl.gpu_milli});
    }

    CHECK(by_coordinator.size() == 2); // the credits cover two holds
    CHECK(by_coordinator == by_schedule);
    REQUIRE(d.waiting.size() == 4);
    std::map<sched::Gate, int> gates;
    for (const auto& wj : d.waiting) {
        ++gates[wj.gate];
        const std::string reason = waiting_reason(*p.coord, wj.job);
        switch (wj.gate) {
        case sched::Gate::team_credits:
            CHECK_THAT(reason, Catch::StartsWith("waiting for credits: team `fellows` can hold"));
            break;
        case sched::Gate::max_parallel:
            CHECK(reason == "its sweep is at max_parallel = 1");
            break;
        case sched::Gate::unknown_models:
            CHECK(reason == "no worker has a GPU of the models it accepts");
            break;
        default:
            CHECK(reason == wj.reason);
        }
    }
    CHECK(gates[sched::Gate::team_credits] == 2); // b2 and b3: 0.1 credits left after two holds
    CHECK(gates[sched::Gate::max_parallel] == 1);
    CHECK(gates[sched::Gate::unknown_models] == 1);
}

} // namespace test_policy_parity
} // namespace
