// The scheduler's view is kept change by change (PoolView), and so are the coordinator's components
// (TokenBook, WorkerRoster); these tests hold them to ones built from every record at once. A real
// coordinator on a SQLite file goes through random sequences of what a pool does (submissions,
// passes, starts, exits, faults, cancels, pauses, drains, failing GPUs, changed inventories, new
// teams and owners' terms naming them, tokens made and revoked, silent workers, expired leases,
// preemption, restarts) and after every step each must be the same as its rebuild.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/pool_view.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

#include <random>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_pool_view {

using namespace gpupool;
using namespace gpupool::test::credit_pool;

namespace {

api::Inventory box(std::vector<std::string> models, std::int64_t slots = 0) {
    api::Inventory inv;
    inv.cpu_milli = 8000;
    inv.memory_mib = 32768;
    inv.slots = slots;
    for (std::size_t i = 0; i < models.size(); ++i) {
        inv.gpus.push_back({static_cast<std::int64_t>(i), models[i], 24576, "", ""});
    }
    return inv;
}

// An active worker with one GPU of each of `models`, last seen at time 0.
LiveWorker live_worker(const std::vector<std::string>& models) {
    LiveWorker w;
    w.record.state = store::WorkerState::active;
    w.gpus.resize(models.size());
    w.gpu_models = models;
    return w;
}

// Job 1 of team 1, sweep 1, in `state`.
store::JobRecord job_record(store::JobState state, recipe::JobSpec spec) {
    store::JobRecord j;
    j.id = JobId(1);
    j.team = TeamId(1);
    j.sweep_id = SweepId(1);
    j.state = state;
    j.spec = std::move(spec);
    return j;
}

struct Fleet {
    struct Member {
        Principal who;
        api::Inventory inventory;
        std::vector<AttemptId> running; // started, as far as the worker knows
    };
    std::vector<Member> workers;
};

class Chaos {
public:
    Chaos(CreditPool& pool, std::uint32_t seed) : p(pool), rng(seed) {
        Fleet::Member first{p.owner_worker, l4_box(), {}};
        fleet.workers.push_back(first);
        const std::vector<api::Inventory> boxes = {box({"NVIDIA A100", "NVIDIA L4"}), box({}, 2),
                                                   box({"NVIDIA H100"}, 1)};
        for (std::size_t i = 0; i < boxes.size(); ++i) {
            auto enroll =
                create_token(*p.coord, p.admin, store::Role::enroll, "owners", "e" + std::to_string(i)).value();
            auto reg = coordinator::register_worker(*p.coord, p.coord->authenticate(enroll.secret).value(),
                                                    "box-" + std::to_string(i), boxes[i]);
            REQUIRE(reg.has_value());
            fleet.workers.push_back({p.coord->authenticate(reg->secret).value(), boxes[i], {}});
        }
    }

    std::int64_t pick(std::int64_t n) { return std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng); }

    recipe::JobSpec job() {
        recipe::JobSpec s = half_l4("j");
        const std::int64_t shape = pick(5);
        s.resources.gpus = shape == 0 ? 0 : 1;
        s.resources.gpu_milli = shape == 0 ? 0 : std::vector<std::int64_t>{250, 500, 1000, 500}[shape - 1];
        const std::int64_t models = pick(6);
        if (models == 1) {
            s.resources.gpu_models = {"NVIDIA A100"};
        } else if (models == 2) {
            s.resources.gpu_models = {"NVIDIA H100", "NVIDIA L4"};
        } else if (models == 3) {
            s.resources.gpu_models = {"TPU v9"}; // nobody has it
        }
        s.priority = static_cast<recipe::Priority>(pick(3));
        return s;
    }

    std::string step() {
        auto& w = fleet.workers[static_cast<std::size_t>(pick(static_cast<std::int64_t>(fleet.workers.size())))];
        switch (pick(13)) {
        case 0: {
            SubmitRequest r;
            r.source = "chaos.toml";
            r.max_parallel = pick(3);
            for (std::int64_t i = 0, n = 1 + pick(3); i < n; ++i) {
                r.jobs.push_back(job());
            }
            r.allow_unfunded = true;
            (void)coordinator::submit(*p.coord, p.fellow, std::move(r));
            return "submit";
        }
        case 1: p.coord->tick(); return "tick";
        case 2: {
            std::vector<std::int64_t> unhealthy;
            if (!w.inventory.gpus.empty() && pick(4) == 0) {
                unhealthy.push_back(pick(static_cast<std::int64_t>(w.inventory.gpus.size())));
            }
            (void)coordinator::heartbeat(*p.coord, w.who, w.running, unhealthy, pick(6) == 0, nullptr, pick(6) == 0);
            return "heartbeat";
        }
        case 3: {
            auto list = coordinator::assignments(*p.coord, w.who);
            if (list && !list->empty() && coordinator::start_attempt(*p.coord, w.who, list->front().attempt)) {
                w.running.push_back(list->front().attempt);
            }
            return "start";
        }
        case 4: {
            if (w.running.empty()) {
                return "no exit";
            }
            const AttemptId a = w.running.back();
            w.running.pop_back();
            const auto outcome = pick(4) == 0 ? Outcome::worker_fault : Outcome::exited;
            (void)coordinator::complete_attempt(*p.coord, w.who, a, pick(2), "done", outcome);
            return "exit";
        }
        case 5: {
            const std::int64_t jobs = static_cast<std::int64_t>(p.coord->job_book().jobs().size());
            if (jobs > 0) {
                (void)cancel_job(*p.coord, p.fellow, JobId(1 + pick(jobs)));
            }
            return "cancel";
        }
        case 6: p.clock.advance_ms(1000 * (1 + pick(12))); return "time";
        case 7: {
            api::Inventory inv = w.inventory;
            if (!inv.gpus.empty() && pick(2) == 0) {
                inv.gpus.pop_back();
            } else {
                inv.gpus.push_back({static_cast<std::int64_t>(inv.gpus.size()), pick(2) ? "NVIDIA L4" : "RTX 4090",
                                    24576, "", ""});
            }
            w.inventory = inv;
            (void)coordinator::heartbeat(*p.coord, w.who, w.running, {}, false, &inv, false);
            return "inventory";
        }
        case 9: {
            // A new team, and an owner whose terms name it (terms resolve team names to ids).
            const std::string name = "t" + std::to_string(++teams);
            (void)create_team(*p.coord, p.admin, name, 1 + pick(3));
            api::Heartbeat beat;
            beat.running = w.running;
            if (pick(3) != 0) {
                beat.terms = api::OwnerTerms{};
                beat.terms->teams = {"fellows", name, "t" + std::to_string(teams + 1)}; // the next one too
            }
            (void)coordinator::receive_heartbeat(*p.coord, w.who, beat);
            return "team and terms";
        }
        case 10: {
            auto t = create_token(*p.coord, p.admin, store::Role::member, "fellows", "m" + std::to_string(pick(3)));
            if (t && pick(2) == 0) {
                (void)revoke_token(*p.coord, p.admin, t->id);
            }
            return "token";
        }
        case 11: {
            (void)set_worker_state(*p.coord, p.admin, *w.who.worker,
                                   pick(2) == 0 ? store::WorkerState::draining : store::WorkerState::active);
            return "drain or activate";
        }
        default: {
            for (auto& m : fleet.workers) {
                (void)coordinator::heartbeat(*p.coord, m.who, m.running, {});
            }
            p.coord->tick();
            return "all beat and tick";
        }
        }
    }

    CreditPool& p;
    std::mt19937 rng;
    Fleet fleet;
    int teams = 0;
};

} // namespace

// Coordinator::drift: the TokenBook and the WorkerRoster against ones rebuilt from the store, and the
// scheduler's view against one fed from scratch.
TEST_CASE("pool view: the view and the components kept change by change are those built from every record",
          "[coordinator][sched][pool_view][components]") {
    for (std::uint32_t seed : {1U, 2U, 3U, 4U}) {
        CAPTURE(seed);
        CreditPool p(false);
        p.options.policy.preemption.min_runtime_s = 0; // preemption happens in a short run
        REQUIRE(p.restart());
        Chaos chaos(p, seed);
        std::size_t placed = 0;
        for (int i = 0; i < 400; ++i) {
            const std::string what = chaos.step();
            CAPTURE(i, what);
            const auto drift = p.coord->drift();
            INFO((drift ? *drift : std::string()));
            REQUIRE_FALSE(drift.has_value());
            placed += what == "start" ? 1 : 0;
        }
        CHECK(placed > 0);
        REQUIRE(p.restart()); // the view a start builds from the store is the same too
        REQUIRE_FALSE(p.coord->drift().has_value());
    }
}

TEST_CASE("pool view: a job waits for a model until a live worker has it and again after it goes",
          "[coordinator][sched][pool_view]") {
    PoolView view(10'000);
    store::JobRecord j = job_record(store::JobState::queued, half_l4("wants-h100"));
    j.spec.resources.gpu_models = {"H100"};
    view.set_job(j, 0, TokenId(7), 0);
    view.refresh(0);
    REQUIRE(view.queued().size() == 1);
    CHECK(view.queued()[0].no_known_model);
    CHECK(view.queued()[0].member == TokenId(7));

    view.set_worker(WorkerId(1), live_worker({"H100"}));
    view.refresh(5'000);
    REQUIRE(view.view().workers.size() == 1);
    CHECK_FALSE(view.queued()[0].no_known_model);
    CHECK(sched::model_allowed(view.queued()[0].gpu_models, view.view().workers[0].gpus[0].model));

    view.refresh(10'001); // silent past the timeout
    CHECK(view.view().workers.empty());
    CHECK(view.queued()[0].no_known_model);
}

TEST_CASE("pool view: a catalog full of models nobody has any more is rebuilt and a 65th model "
          "takes only jobs that accept any model",
          "[coordinator][sched][pool_view]") {
    sched::ModelCatalog catalog;
    for (int i = 0; i < 64; ++i) {
        CHECK(catalog.intern("M" + std::to_string(i)) == static_cast<std::uint32_t>(i));
    }
    CHECK(catalog.full());
    const std::uint32_t extra = catalog.intern("M64");
    CHECK(extra == sched::ModelCatalog::k_uncatalogued);
    CHECK(catalog.name(extra) == "(uncatalogued)");
    CHECK(sched::model_allowed(0, extra));
    CHECK_FALSE(sched::model_allowed(~sched::ModelMask{0}, extra));

    PoolView view(10'000);
    for (int i = 0; i < 64; ++i) {
        view.set_worker(WorkerId(i + 1), live_worker({"M" + std::to_string(i)}));
    }
    CHECK_FALSE(view.needs_rebuild());
    // Worker 1 now reports a new model: its old one is in no worker any more, and the catalog is full.
    view.set_worker(WorkerId(1), live_worker({"M64"}));
    CHECK(view.needs_rebuild());
    view.refresh(0);
    CHECK(view.view().workers[0].gpus[0].model == sched::ModelCatalog::k_uncatalogued);
}

TEST_CASE("pool view: a failing GPU takes no new work and indices of GPUs a worker lacks change nothing",
          "[coordinator][sched][pool_view]") {
    PoolView view(10'000);
    LiveWorker w = live_worker({"L4", "L4"});
    w.unhealthy_gpus = {7, -3, 1, 1};
    view.set_worker(WorkerId(1), w);
    view.refresh(0);
    REQUIRE(view.view().workers.size() == 1);
    CHECK(view.view().workers[0].gpus[0].milli_free == sched::k_milli_per_gpu);
    CHECK(view.view().workers[0].gpus[1].milli_free == 0);

    w.unhealthy_gpus = {};
    view.set_worker(WorkerId(1), w); // healthy again: the next pass offers it
    view.refresh(0);
    CHECK(view.view().workers[0].gpus[1].milli_free == sched::k_milli_per_gpu);
}

TEST_CASE("pool view: an attempt on a GPU its worker no longer reports shows the scheduler no such GPU",
          "[coordinator][sched][pool_view]") {
    // A worker restarted with one GPU fewer while an attempt on its second GPU still holds its
    // lease: preemption gives a victim's share back to the GPUs it names, which must exist.
    PoolView view(10'000);
    LiveWorker w = live_worker({"L4", "L4"});
    view.set_worker(WorkerId(1), w);
    const store::JobRecord j = job_record(store::JobState::running, half_l4("on-gpu-1"));
    store::AttemptRecord a;
    a.id = AttemptId(1);
    a.job = j.id;
    a.worker = WorkerId(1);
    a.gpu_index = 1;
    a.gpu_milli = 500;
    a.state = store::AttemptState::running;
    view.set_attempt(a, j, 0);
    view.refresh(0);
    REQUIRE(view.view().running.size() == 1);
    CHECK(view.view().running[0].gpu_indices == std::vector<std::uint32_t>{1U});
    CHECK(view.view().workers[0].gpus[1].milli_free == 500);

    w.gpus.resize(1);
    w.gpu_models = {"L4"};
    view.set_worker(WorkerId(1), w);
    view.refresh(0);
    REQUIRE(view.view().workers[0].gpus.size() == 1);
    CHECK(view.view().workers[0].gpus[0].milli_free == sched::k_milli_per_gpu);
    REQUIRE(view.view().running.size() == 1);
    CHECK(view.view().running[0].gpu_indices.empty());
}

} // namespace test_pool_view
} // namespace
