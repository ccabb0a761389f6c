// The attempt table: an id is taken once, the lifecycle goes running -> stopping -> ended in one
// place (first stop wins, every change marked unsaved), kills come due once, and the owner's view
// of the running jobs.
#include "worker/agent/attempt_table.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_attempt_table {

using namespace gpupool;

namespace {

worker::Attempt held_attempt(std::int64_t id, std::int64_t gpu = -1) {
    worker::Attempt t;
    t.a.attempt = AttemptId(id);
    t.a.job = JobId(10 * id);
    t.a.team = TeamId(3);
    t.a.spec.name = "job" + std::to_string(id);
    t.a.spec.image = "busybox";
    t.a.gpu_index = gpu;
    t.a.gpu_milli = gpu >= 0 ? 500 : 0;
    t.container = "c" + std::to_string(id);
    return t;
}

} // namespace

TEST_CASE("attempt table: an id is held until retired, then done with for good", "[agent][attempts]") {
    worker::AttemptTable table;
    CHECK_FALSE(table.knows(AttemptId(1)));
    table.add(held_attempt(1));
    table.add(held_attempt(2));
    CHECK(table.holds(AttemptId(1)));
    CHECK(table.knows(AttemptId(1)));
    CHECK_FALSE(table.done_with(AttemptId(1)));
    REQUIRE(table.find(AttemptId(2)) != nullptr);
    CHECK(table.find(AttemptId(2))->container == "c2");
    CHECK(table.find(AttemptId(3)) == nullptr);
    CHECK(table.size() == 2);

    CHECK(table.retire(AttemptId(1)));
    CHECK_FALSE(table.holds(AttemptId(1)));
    CHECK(table.done_with(AttemptId(1)));
    CHECK(table.knows(AttemptId(1))); // a re-sent assignment is not taken again
    CHECK(table.size() == 1);
    CHECK_FALSE(table.retire(AttemptId(1)));
    // Listed by attempt id, whatever the order they came in.
    table.add(held_attempt(0));
    std::vector<std::int64_t> ids;
    for (const auto& [id, t] : table) {
        ids.push_back(id.value());
    }
    CHECK(ids == std::vector<std::int64_t>{0, 2});
}

TEST_CASE("attempt table: a stop keeps its first reason, and ending counts the slot free", "[agent][attempts]") {
    worker::AttemptTable table;
    table.add(held_attempt(1));
    table.add(held_attempt(2));
    CHECK(table.running() == 2);

    CHECK(table.stop(AttemptId(1), "exceeded max_runtime 1m", worker::Outcome::exited, 5'000));
    const auto& t = table.at(AttemptId(1));
    CHECK(t.unsaved);
    CHECK(t.stop_reason == "exceeded max_runtime 1m");
    REQUIRE(t.kill_at_ms);
    CHECK(*t.kill_at_ms == 5'000);
    // A second stop (the owner paused meanwhile) changes nothing.
    CHECK_FALSE(table.stop(AttemptId(1), "paused by the owner", worker::Outcome::owner_preempted, 1'000));
    CHECK(t.stop_reason == "exceeded max_runtime 1m");
    CHECK(t.stop_outcome == worker::Outcome::exited);
    CHECK(*t.kill_at_ms == 5'000);
    CHECK(table.running() == 2); // stopping still holds its slot

    table.finish(AttemptId(1), 143, "stopped: exceeded max_runtime 1m");
    CHECK_FALSE(t.running());
    CHECK(t.exit_code == 143);
    CHECK(t.outcome == worker::Outcome::exited);
    CHECK_FALSE(t.outputs_done); // a job stopped by the pool's rules still sends its outputs
    CHECK(table.running() == 1);
    CHECK_FALSE(table.stop(AttemptId(1), "late", worker::Outcome::exited, 0)); // ended: nothing to stop
}

TEST_CASE("attempt table: a job handed back or faulted ends without outputs to send", "[agent][attempts]") {
    worker::AttemptTable table;
    table.add(held_attempt(1));
    table.add(held_attempt(2));
    table.add(held_attempt(3));
    table.add(held_attempt(4, 0));

    // Handed back by the owner: it ends as its stop said.
    REQUIRE(table.stop(AttemptId(1), "paused by the owner", worker::Outcome::owner_preempted, 0));
    table.finish(AttemptId(1), 143, "stopped");
    CHECK(table.at(AttemptId(1)).outcome == worker::Outcome::owner_preempted);
    CHECK(table.at(AttemptId(1)).outputs_done);

    table.end_unexited(AttemptId(2), worker::Outcome::worker_fault, "the container disappeared");
    CHECK_FALSE(table.at(AttemptId(2)).exit_code);
    CHECK(table.at(AttemptId(2)).outcome == worker::Outcome::worker_fault);
    CHECK(table.at(AttemptId(2)).outputs_done);
    CHECK(table.at(AttemptId(2)).reason == "the container disappeared");

    table.fail(AttemptId(3), "inputs: 12 MiB over the 10 MiB cap");
    CHECK(table.at(AttemptId(3)).exit_code == 1);
    CHECK(table.at(AttemptId(3)).outcome == worker::Outcome::exited);
    CHECK(table.at(AttemptId(3)).outputs_done);

    // Its GPU failed under it: the job's exit is the worker's fault.
    table.finish(AttemptId(4), 1, "exited with status 1");
    CHECK_FALSE(table.at(AttemptId(4)).outputs_done);
    table.blame_worker(AttemptId(4), "GPU 0 failed on the worker: ECC (the job exited with status 1)");
    CHECK(table.at(AttemptId(4)).outcome == worker::Outcome::worker_fault);
    CHECK(table.at(AttemptId(4)).outputs_done);
    CHECK(table.at(AttemptId(4)).exit_code == 1);
    CHECK(table.running() == 0);
}

TEST_CASE("attempt table: a SIGKILL comes due once, at its time or when hastened", "[agent][attempts]") {
    worker::AttemptTable table;
    table.add(held_attempt(1));
    table.add(held_attempt(2));
    table.add(held_attempt(3));
    REQUIRE(table.stop(AttemptId(1), "stop order", worker::Outcome::exited, 1'500));
    REQUIRE(table.stop(AttemptId(2), "reclaimed", worker::Outcome::owner_preempted, 30'000));
    CHECK(table.kills_due(1'000).empty());
    CHECK(table.kills_due(1'500) == std::vector<AttemptId>{AttemptId(1)});
    CHECK(table.kills_due(2'000).empty()); // sent once
    CHECK(table.at(AttemptId(1)).killed);
    table.kill_now(AttemptId(2), 2'000); // the owner's grace is over early
    CHECK(table.kills_due(2'000) == std::vector<AttemptId>{AttemptId(2)});
    // Never asked to stop: never killed.
    CHECK_FALSE(table.at(AttemptId(3)).killed);
    CHECK(table.kills_due(1'000'000).empty());
}

TEST_CASE("attempt table: hand-backs queue in order, with their reasons", "[agent][attempts]") {
    worker::AttemptTable table;
    table.hand_back(AttemptId(7));
    table.hand_back(AttemptId(8), "outside the owner's terms: handed back to the queue");
    REQUIRE(table.hand_backs().size() == 2);
    CHECK(table.hand_backs()[0].attempt == AttemptId(7));
    CHECK(table.hand_backs()[0].why == worker::HandBack().why);
    CHECK(table.hand_backs()[1].why == "outside the owner's terms: handed back to the queue");
    CHECK(table.empty()); // owed, not held
}

TEST_CASE("attempt table: the owner sees the running jobs with their runtime and why they stop",
          "[agent][attempts][owner]") {
    worker::AttemptTable table;
    auto one = held_attempt(1, 0);
    one.started_ms = 1'000;
    table.add(std::move(one));
    auto two = held_attempt(2);
    two.a.team_name = "fellows";
    two.started_ms = 50'000;
    table.add(std::move(two));
    table.add(held_attempt(3));
    table.end_unexited(AttemptId(3), worker::Outcome::worker_fault, "gone");
    REQUIRE(table.stop(AttemptId(2), "paused by the owner", worker::Outcome::owner_preempted, 0));

    const auto jobs = table.running_jobs(61'000);
    REQUIRE(jobs.size() == 2); // the ended one is not running
    CHECK(jobs[0].attempt == 1);
    CHECK(jobs[0].job == 10);
    CHECK(jobs[0].name == "job1");
    CHECK(jobs[0].team == "3"); // no team name: its number
    CHECK(jobs[0].image == "busybox");
    CHECK(jobs[0].gpu_index == 0);
    CHECK(jobs[0].gpu_milli == 500);
    CHECK(jobs[0].runtime_s == 60);
    CHECK(jobs[0].stopping.empty());
    CHECK(jobs[1].team == "fellows");
    CHECK(jobs[1].runtime_s == 11);
    CHECK(jobs[1].stopping == "paused by the owner");
    CHECK(table.running_jobs(0)[1].runtime_s == 0); // a clock behind the start reads 0, not negative
}

} // namespace test_attempt_table
} // namespace
