// Reclaimer (worker/agent/reclaim.hpp) driven by hand: looks at chosen times with chosen process
// lists, no clock, no driver, no waiting. Grace 30 s, quiet 10 min unless a test says otherwise.
#include "worker/agent/reclaim.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_reclaim {

using namespace gpupool;
using worker::JobOnGpu;
using worker::ProcessOwner;
using worker::ReclaimChange;
using worker::Reclaimer;
using worker::SeenProcess;

namespace {

constexpr std::int64_t k_s = 1000;
constexpr std::int64_t k_min = 60 * k_s;
const std::vector<std::int64_t> k_gpus{0, 1};

using Seen = std::optional<std::vector<SeenProcess>>;
const Seen k_nothing = std::vector<SeenProcess>{};

Seen owner_on(std::int64_t gpu, std::int64_t pid = 1234) {
    return std::vector<SeenProcess>{{gpu, pid, ProcessOwner::foreign}};
}

} // namespace

TEST_CASE("reclaim: the owner's process reclaims its GPU at once, its jobs get the grace, then are stopped",
          "[reclaim]") {
    Reclaimer r;
    // A job on each GPU, the GPUs idle of anyone else.
    const std::vector<JobOnGpu> running{{7, 0}, {8, 1}};
    auto step = r.look(k_gpus, k_nothing, running, 0);
    CHECK(step.changes.empty());
    CHECK(step.term.empty());
    CHECK_FALSE(r.reclaimed(0));

    step = r.look(k_gpus, owner_on(0), running, 2 * k_s);
    REQUIRE(step.changes.size() == 1);
    CHECK(step.changes[0] == ReclaimChange{0, true, 1234, 1});
    CHECK(r.reclaimed(0));
    CHECK_FALSE(r.reclaimed(1));
    CHECK(r.reclaimed() == std::vector<std::int64_t>{0});
    CHECK(step.term == std::vector<std::int64_t>{7}); // asked once, now: the grace starts
    CHECK(step.kill.empty());

    // Within the grace: nothing more (the job is asked once, the change is told once).
    step = r.look(k_gpus, owner_on(0), running, 2 * k_s + 29'999);
    CHECK(step.changes.empty());
    CHECK(step.term.empty());
    CHECK(step.kill.empty());
    // Still running when the grace is over: stopped, once.
    step = r.look(k_gpus, owner_on(0), running, 32 * k_s);
    CHECK(step.kill == std::vector<std::int64_t>{7});
    CHECK(step.term.empty());
    step = r.look(k_gpus, owner_on(0), running, 34 * k_s);
    CHECK(step.kill.empty());
    CHECK(step.term.empty()); // not asked again while it dies
    // Gone: forgotten. The job on GPU 1 was never touched.
    step = r.look(k_gpus, owner_on(0), {{8, 1}}, 36 * k_s);
    CHECK(step.kill.empty());
    CHECK(step.term.empty());
}

TEST_CASE("reclaim: offered again after the quiet period, which starts again at each new appearance", "[reclaim]") {
    Reclaimer r({30 * k_s, 10 * k_min});
    REQUIRE(r.look(k_gpus, owner_on(1), {}, 0).changes.size() == 1);
    // The owner's job ends after a minute; nine more minutes without it are not enough.
    CHECK(r.look(k_gpus, owner_on(1), {}, 1 * k_min).changes.empty());
    CHECK(r.look(k_gpus, k_nothing, {}, 2 * k_min).changes.empty());
    CHECK(r.look(k_gpus, k_nothing, {}, 11 * k_min - 1).changes.empty());
    // It comes back (another process): the quiet period starts again from this look.
    auto step = r.look(k_gpus, owner_on(1, 999), {}, 11 * k_min - 1);
    CHECK(step.changes.empty()); // still reclaimed: nothing to tell
    CHECK(r.look(k_gpus, k_nothing, {}, 12 * k_min).changes.empty());
    CHECK(r.look(k_gpus, k_nothing, {}, 21 * k_min - 2).changes.empty());
    CHECK(r.reclaimed(1));
    step = r.look(k_gpus, k_nothing, {}, 21 * k_min - 1);
    REQUIRE(step.changes.size() == 1);
    CHECK(step.changes[0] == ReclaimChange{1, false, 0, 0});
    CHECK(r.reclaimed().empty());
    // A job placed there now runs undisturbed.
    step = r.look(k_gpus, k_nothing, {{9, 1}}, 22 * k_min);
    CHECK(step.changes.empty());
    CHECK(step.term.empty());
    // The owner again: reclaimed again, told again.
    step = r.look(k_gpus, owner_on(1, 4321), {{9, 1}}, 23 * k_min);
    REQUIRE(step.changes.size() == 1);
    CHECK(step.changes[0] == ReclaimChange{1, true, 4321, 1});
    CHECK(step.term == std::vector<std::int64_t>{9});
}

TEST_CASE("reclaim: the worker's own jobs the driver's processes and unknown pids never reclaim", "[reclaim]") {
    Reclaimer r;
    const std::vector<SeenProcess> ours{{0, 50, ProcessOwner::job},      {0, 51, ProcessOwner::system},
                                        {1, 52, ProcessOwner::unknown},  {1, 0, ProcessOwner::unknown},
                                        {-1, 53, ProcessOwner::foreign}, // a GPU index the worker does not have
                                        {7, 54, ProcessOwner::foreign}};
    for (std::int64_t t = 0; t < 5; ++t) {
        auto step = r.look(k_gpus, ours, {{7, 0}, {8, 1}}, t * k_min);
        CHECK(step.changes.empty());
        CHECK(step.term.empty());
        CHECK(step.kill.empty());
    }
    CHECK(r.reclaimed().empty());
    // Nor do they keep a reclaimed GPU from being offered again.
    REQUIRE(r.look(k_gpus, owner_on(0), {}, 10 * k_min).changes.size() == 1);
    CHECK(r.look(k_gpus, ours, {}, 15 * k_min).changes.empty());
    auto step = r.look(k_gpus, ours, {}, 20 * k_min);
    REQUIRE(step.changes.size() == 1);
    CHECK_FALSE(step.changes[0].reclaimed);
}

TEST_CASE("reclaim: a failed look decides nothing but the grace still runs out", "[reclaim]") {
    Reclaimer r({30 * k_s, 10 * k_min});
    REQUIRE(r.look(k_gpus, owner_on(0), {{7, 0}}, 0).term == std::vector<std::int64_t>{7});
    // nvidia-smi stops answering for an hour: the GPU stays reclaimed, the job is still stopped.
    auto step = r.look(k_gpus, std::nullopt, {{7, 0}}, 30 * k_s);
    CHECK(step.kill == std::vector<std::int64_t>{7});
    CHECK(r.look(k_gpus, std::nullopt, {}, 60 * k_min).changes.empty());
    CHECK(r.reclaimed(0));
    // A failed look does not reclaim either.
    CHECK(r.look(k_gpus, std::nullopt, {{8, 1}}, 61 * k_min).term.empty());
    CHECK_FALSE(r.reclaimed(1));
    // The first look that answers after the quiet period offers it again.
    step = r.look(k_gpus, k_nothing, {}, 61 * k_min);
    REQUIRE(step.changes.size() == 1);
    CHECK(step.changes[0].gpu_index == 0);
}

TEST_CASE("reclaim: jobs found later on a reclaimed GPU are stopped too and CPU jobs never", "[reclaim]") {
    Reclaimer r({5 * k_s, 60 * k_s});
    auto step = r.look(k_gpus, owner_on(0), {{3, -1}}, 0);
    REQUIRE(step.changes.size() == 1);
    CHECK(step.changes[0].jobs == 0);
    CHECK(step.term.empty()); // a CPU-only job is not on the GPU
    // Two fractional jobs turn up there (re-attached after a restart, or started in a race).
    step = r.look(k_gpus, owner_on(0), {{3, -1}, {4, 0}, {5, 0}}, 1 * k_s);
    CHECK(step.term == std::vector<std::int64_t>{4, 5});
    // The GPU is offered again within their grace: once asked, they are stopped all the same.
    r = Reclaimer({60 * k_s, 2 * k_s});
    REQUIRE(r.look(k_gpus, owner_on(0), {{4, 0}}, 0).term.size() == 1);
    step = r.look(k_gpus, k_nothing, {{4, 0}}, 2 * k_s);
    REQUIRE(step.changes.size() == 1);
    CHECK_FALSE(step.changes[0].reclaimed);
    CHECK(r.look(k_gpus, k_nothing, {{4, 0}}, 60 * k_s).kill == std::vector<std::int64_t>{4});
}

TEST_CASE("reclaim: what the owner is told", "[reclaim]") {
    const worker::ReclaimPolicy p{30 * k_s, 10 * k_min};
    CHECK(worker::describe({0, true, 1234, 1}, p) ==
          "GPU 0 reclaimed: a process you started (pid 1234) uses it, so the pool gets no new work there; the job "
          "there gets 30s to stop, then goes back to the queue (not charged)");
    CHECK(worker::describe({1, true, 77, 2}, p) ==
          "GPU 1 reclaimed: a process you started (pid 77) uses it, so the pool gets no new work there; the 2 jobs "
          "there get 30s to stop, then go back to the queue (not charged)");
    CHECK(worker::describe({1, true, 77, 0}, p) ==
          "GPU 1 reclaimed: a process you started (pid 77) uses it, so the pool gets no new work there; no job of the "
          "pool was running on it");
    CHECK(worker::describe({0, false, 0, 0}, p) == "GPU 0 is shared again: none of your processes used it for 10m");
    CHECK(worker::describe({0, true, 5, 1}, {1500, 90 * k_s}).find("gets 1500 ms to stop") != std::string::npos);
}

} // namespace test_reclaim
} // namespace
