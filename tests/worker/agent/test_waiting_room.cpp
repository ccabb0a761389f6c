// The waiting room's GPU wait: an assignment placed on a GPU whose jobs are still stopping starts
// once they leave room, after gpu_wait_max at the latest — or, when a stopping job was given a longer
// grace to save its progress ([checkpoint] grace), only after that job's SIGKILL.
#include "worker/agent/waiting_room.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_waiting_room {

using namespace gpupool;

namespace {

api::Assignment on_gpu0(std::int64_t attempt, std::int64_t milli) {
    api::Assignment a;
    a.attempt = AttemptId(attempt);
    a.job = JobId(attempt);
    a.gpu_index = 0;
    a.gpu_milli = milli;
    return a;
}

// A job holding all of GPU 0, told to stop at `stopped_at` with SIGKILL due `grace_ms` later.
worker::AttemptTable stopping_whole_gpu(std::int64_t stopped_at, std::int64_t grace_ms) {
    worker::AttemptTable running;
    worker::Attempt victim;
    victim.a = on_gpu0(1, 1000);
    victim.stop_reason = "stopped by the coordinator (cancelled, preempted or lost)";
    victim.kill_at_ms = stopped_at + grace_ms;
    running.add(victim);
    return running;
}

} // namespace

TEST_CASE("waiting room: a share waits for the jobs stopping on its GPU, at most gpu_wait_max", "[agent][gpu]") {
    worker::WaitingRoom room(std::chrono::milliseconds(20'000));
    auto running = stopping_whole_gpu(0, 1'500); // the usual stop grace
    room.wait_for_gpu(on_gpu0(2, 500), 0);
    CHECK(room.ready(1'000, running, nullptr).empty()); // still full
    running.begin()->second.phase = worker::AttemptPhase::ended; // the victim left
    auto ready = room.ready(2'000, running, nullptr);
    REQUIRE(ready.size() == 1);
    CHECK(ready[0].a.attempt == AttemptId(2));

    // A victim that never leaves: the share starts after gpu_wait_max anyway.
    auto stuck = stopping_whole_gpu(0, 1'500);
    stuck.begin()->second.killed = true; // SIGKILL sent, the GPU still looks full
    room.wait_for_gpu(on_gpu0(3, 500), 0);
    CHECK(room.ready(19'000, stuck, nullptr).empty());
    CHECK(room.ready(20'000, stuck, nullptr).size() == 1);
}

TEST_CASE("waiting room: a victim given a long grace to save its checkpoint is waited for until its SIGKILL",
          "[agent][gpu]") {
    worker::WaitingRoom room(std::chrono::milliseconds(20'000));
    auto running = stopping_whole_gpu(0, 120'000); // [checkpoint] grace = "2m"
    room.wait_for_gpu(on_gpu0(2, 500), 0);
    CHECK(room.ready(20'000, running, nullptr).empty());  // past gpu_wait_max: still saving
    CHECK(room.ready(121'000, running, nullptr).empty()); // SIGKILL due at 120 s, memory freed by 122 s
    // Due but not sent yet (the agent's step was late, or its clock jumped past both): still waited for.
    CHECK(room.ready(400'000, running, nullptr).empty());
    running.begin()->second.killed = true;
    CHECK(room.ready(400'000, running, nullptr).size() == 1);
}

} // namespace test_waiting_room
} // namespace
