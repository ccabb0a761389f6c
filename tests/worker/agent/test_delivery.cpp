// Delivery against a FakeCoordinator on a ManualClock: what goes out in which order, backoff while
// the coordinator is away (measured on the clock, not waited for), fencing, stop orders, and the
// refusals that end the worker.
#include "core/archive/archive.hpp"
#include "core/util/clock.hpp"
#include "tests/support.hpp"
#include "tests/worker/agent/fake_link.hpp"
#include "worker/agent/delivery.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_delivery {

using namespace gpupool;
using namespace std::chrono_literals;

namespace {

struct DeliveryBench {
    test::TempDir work;
    worker::DeliveryOptions opt;
    util::ManualClock clock;
    test::FakeCoordinator coordinator;
    test::FakeLink link{coordinator};
    worker::Spool spool{work.path()};
    worker::AttemptTable attempts;
    std::vector<std::string> stopped;
    std::vector<std::int64_t> cancelled_waiting;
    std::vector<std::string> events;
    std::unique_ptr<worker::Delivery> delivery;

    DeliveryBench() {
        opt.work_dir = work.path();
        opt.heartbeat = 1s;
        opt.log_flush = 500ms;
        worker::Delivery::Hooks hooks{
            [this](worker::Attempt& t, const std::string& why) {
                t.stop_reason = why;
                stopped.push_back(std::to_string(t.id().value()) + ": " + why);
            },
            [this](AttemptId id) {
                cancelled_waiting.push_back(id.value());
                return id == AttemptId(99);
            },
            [this](const std::string& line) { events.push_back(line); }};
        delivery = std::make_unique<worker::Delivery>(opt, link, clock, worker::Backoff(1s, 8s, 42), hooks);
    }

    worker::Attempt& add(std::int64_t id) {
        api::Assignment a;
        a.attempt = AttemptId(id);
        a.job = JobId(id * 10);
        a.spec.name = "job" + std::to_string(id);
        a.spec.outputs.max_size_mib = 1;
        a.spec.image = "localhost/gpupool/busybox:latest";
        a.spec.command = {"true"};
        a.spec.resources.cpu_milli = 100;
        a.spec.resources.memory_mib = 64;
        auto t = spool.create(a, clock.now_ms());
        t.container = "c" + std::to_string(id);
        std::filesystem::create_directories(t.dir / "outputs");
        spool.save(t);
        return attempts.add(std::move(t));
    }
    static void write_log(const worker::Attempt& t, const std::string& text) {
        std::ofstream(t.log_path(), std::ios::app | std::ios::binary) << text;
    }
    static void end(worker::Attempt& t, int code) {
        t.phase = worker::AttemptPhase::ended;
        t.exit_code = code;
        t.reason = "exited with status " + std::to_string(code);
    }
    worker::Delivery::Facts facts{}; // what the heartbeats say besides the attempts
    // The attempts done with, as numbers.
    std::vector<std::int64_t> deliver() {
        std::vector<std::int64_t> out;
        for (AttemptId id : delivery->deliver(attempts, [this] { return facts; })) {
            out.push_back(id.value());
        }
        return out;
    }
};

} // namespace

TEST_CASE("delivery: start, logs, outputs and completion go out in order, then the attempt is done", "[delivery]") {
    DeliveryBench b;
    auto& t = b.add(1);
    b.write_log(t, "hello\n");
    b.clock.advance_ms(500); // log_flush
    CHECK(b.deliver().empty()); // running: started and its log shipped, nothing to drop
    CHECK(b.coordinator.started(AttemptId(1)));
    CHECK(b.coordinator.log(AttemptId(1)) == "hello\n");
    CHECK(t.shipped == 6);
    std::ofstream(t.dir / "outputs" / "r.txt") << "42\n";
    b.end(t, 0);
    CHECK(b.deliver() == std::vector<std::int64_t>{1});
    REQUIRE(b.coordinator.outputs(AttemptId(1)));
    CHECK_FALSE(b.coordinator.outputs(AttemptId(1))->empty());
    REQUIRE(b.coordinator.completion(AttemptId(1)));
    CHECK(b.coordinator.completion(AttemptId(1))->exit_code == 0);
    CHECK(b.coordinator.completion(AttemptId(1))->reason == "exited with status 0");
}

TEST_CASE("delivery: a small log chunk waits for log_flush on the clock, a running job's bytes are not forced",
          "[delivery]") {
    DeliveryBench b;
    auto& t = b.add(1);
    b.deliver();
    b.write_log(t, "a little\n");
    b.clock.advance_ms(100);
    b.deliver();
    CHECK(b.coordinator.log(AttemptId(1)).empty()); // under 64 KiB and within log_flush (500 ms)
    b.clock.advance_ms(400);
    b.deliver();
    CHECK(b.coordinator.log(AttemptId(1)) == "a little\n");
    b.write_log(t, std::string(70 * 1024, 'x')); // over 64 KiB: at once
    b.deliver();
    CHECK(b.coordinator.log(AttemptId(1)).size() == 9 + 70 * 1024);
}

TEST_CASE("delivery: while the coordinator is away nothing goes out until the backoff has passed, and the "
          "result stays spooled until it is taken",
          "[delivery]") {
    DeliveryBench b;
    auto& t = b.add(1);
    b.write_log(t, "done\n");
    b.end(t, 3);
    b.coordinator.fail_all(ErrorCode::unavailable);
    CHECK(b.deliver().empty());
    CHECK_FALSE(b.delivery->online());
    const auto calls = b.coordinator.calls();
    b.deliver();
    CHECK(b.coordinator.calls() == calls); // offline: no call at all
    // The spool still holds the ended attempt: a restart would deliver it.
    b.spool.save(t);
    auto back = b.spool.load(b.clock.now_ms());
    REQUIRE(back.size() == 1);
    CHECK(back[0].phase == worker::AttemptPhase::ended);
    CHECK(back[0].exit_code == 3);
    // The first failure waits within [0.5 s, 1 s] (backoff_initial 1 s, equal jitter).
    b.clock.advance_ms(1'000);
    CHECK(b.delivery->online());
    b.deliver(); // fails again: the second wait is within [1 s, 2 s]
    b.clock.advance_ms(900);
    CHECK_FALSE(b.delivery->online());
    b.clock.advance_ms(1'100);
    REQUIRE(b.delivery->online());
    b.coordinator.fail_all(std::nullopt);
    CHECK(b.deliver() == std::vector<std::int64_t>{1});
    CHECK(b.coordinator.log(AttemptId(1)) == "done\n");
    CHECK(b.coordinator.completion(AttemptId(1))->exit_code == 3);
}

TEST_CASE("delivery: a 409 fences the attempt: a running one is stopped, an ended one dropped undelivered",
          "[delivery]") {
    DeliveryBench b;
    auto& running = b.add(1);
    auto& ended = b.add(2);
    b.end(ended, 0);
    b.coordinator.conflict(AttemptId(1));
    b.coordinator.conflict(AttemptId(2));
    // Both starts are refused in one batch: the ended one is done with in the same round, nothing sent.
    CHECK(b.deliver() == std::vector<std::int64_t>{2});
    CHECK(running.fenced);
    CHECK(ended.fenced);
    REQUIRE(b.stopped.size() == 1);
    CHECK(b.stopped[0] == "1: the coordinator no longer knows this attempt");
    b.attempts.retire(AttemptId(2)); // the agent drops what is done with
    CHECK(b.deliver().empty());      // the running one is done with once its stop has ended it
    CHECK_FALSE(b.coordinator.completion(AttemptId(2)));
    CHECK(b.delivery->online()); // a refusal is not an outage
}

TEST_CASE("delivery: a 409 on a running attempt asks the coordinator why, and stops it in its words", "[delivery]") {
    DeliveryBench b;
    auto& t = b.add(1);
    b.deliver(); // started, first heartbeat sent
    REQUIRE(b.coordinator.beats().size() == 1);
    b.coordinator.conflict(AttemptId(1));
    b.coordinator.stop_named(AttemptId(1), "cancelled by its submitter");
    b.write_log(t, "more\n");
    b.clock.advance_ms(600); // the log is due, the next heartbeat is not
    b.deliver();
    REQUIRE(b.stopped.size() == 1);
    CHECK(b.stopped[0] == "1: cancelled by its submitter");
    const auto beats = b.coordinator.beats();
    REQUIRE(beats.size() == 2); // asked at once, naming the refused attempt
    CHECK(beats[1].running == std::vector<AttemptId>{AttemptId(1)});
    CHECK(t.fenced);
}

TEST_CASE("delivery: a heartbeat's stop orders stop running attempts and cancel waiting ones", "[delivery]") {
    DeliveryBench b;
    b.add(1);
    b.coordinator.order_stop(AttemptId(1));
    b.coordinator.order_stop(AttemptId(99)); // waiting for its GPU (the hook says so)
    b.deliver();
    CHECK(b.cancelled_waiting == std::vector<std::int64_t>{1, 99});
    REQUIRE(b.stopped.size() == 1);
    CHECK(b.stopped[0] == "1: stopped by the coordinator (cancelled, preempted or lost)");
    CHECK(b.attempts.at(AttemptId(1)).fenced);
    const auto beats = b.coordinator.beats();
    REQUIRE(beats.size() == 1);
    CHECK(beats[0].running == std::vector<AttemptId>{AttemptId(1)});
    CHECK(beats[0].inventory.has_value()); // the first one since the start
}

TEST_CASE("delivery: heartbeats go every `heartbeat` on the clock, at once when asked, inventory only first",
          "[delivery]") {
    DeliveryBench b;
    b.deliver();
    b.clock.advance_ms(500);
    b.deliver();
    CHECK(b.coordinator.beats().size() == 1);
    b.clock.advance_ms(500);
    b.deliver();
    CHECK(b.coordinator.beats().size() == 2);
    b.delivery->heartbeat_now();
    b.deliver();
    const auto beats = b.coordinator.beats();
    REQUIRE(beats.size() == 3);
    CHECK_FALSE(beats[2].inventory.has_value());
}

TEST_CASE("delivery: the sharing state and the owner's terms go with every heartbeat", "[delivery]") {
    DeliveryBench b;
    api::OwnerTerms terms;
    terms.teams = {"fellows"};
    b.facts.sharing = api::SharingState::outside_window;
    b.facts.sharing_changes_at_ms = 1'700'000'000'000;
    b.facts.terms = terms;
    b.deliver();
    b.delivery->heartbeat_now();
    b.deliver();
    const auto beats = b.coordinator.beats();
    REQUIRE(beats.size() == 2);
    for (const auto& beat : beats) {
        CHECK(beat.sharing == api::SharingState::outside_window);
        CHECK(beat.sharing_changes_at_ms == 1'700'000'000'000);
        REQUIRE(beat.terms);
        CHECK(beat.terms->teams == std::vector<std::string>{"fellows"});
    }
}

TEST_CASE("delivery: a changed inventory goes again with the next heartbeat", "[delivery]") {
    DeliveryBench b;
    b.facts.inventory.cpu_milli = 4000;
    b.deliver();
    b.delivery->heartbeat_now();
    b.deliver();
    b.facts.inventory.cpu_milli = 2000; // the owner reloaded worker.toml
    b.delivery->heartbeat_now();
    b.deliver();
    const auto beats = b.coordinator.beats();
    REQUIRE(beats.size() == 3);
    REQUIRE(beats[0].inventory);
    CHECK_FALSE(beats[1].inventory);
    REQUIRE(beats[2].inventory);
    CHECK(beats[2].inventory->cpu_milli == 2000);
    CHECK(b.delivery->last_contact_ms() == b.clock.now_ms());
}

TEST_CASE("delivery: a refused worker (401/403) is fatal and names worker.json", "[delivery]") {
    DeliveryBench b;
    b.coordinator.fail_all(ErrorCode::forbidden);
    b.deliver();
    REQUIRE(b.delivery->fatal());
    CHECK(b.delivery->fatal()->code == ErrorCode::forbidden);
    CHECK_THAT(b.delivery->fatal()->message, Catch::Contains("worker.json"));
}

TEST_CASE("delivery: hand_back completes unstarted assignments as owner_preempted", "[delivery]") {
    DeliveryBench b;
    b.attempts.hand_back(AttemptId(5));
    b.attempts.hand_back(AttemptId(6), "outside the owner's terms");
    b.coordinator.fail_all(ErrorCode::unavailable);
    b.delivery->hand_back(b.attempts);
    CHECK(b.attempts.hand_backs().size() == 2); // kept for later
    b.clock.advance_ms(2'000);
    b.coordinator.fail_all(std::nullopt);
    b.delivery->hand_back(b.attempts);
    CHECK(b.attempts.hand_backs().empty());
    REQUIRE(b.coordinator.completion(AttemptId(5)));
    CHECK(b.coordinator.completion(AttemptId(5))->outcome == worker::Outcome::owner_preempted);
    CHECK_FALSE(b.coordinator.completion(AttemptId(5))->exit_code);
    CHECK_THAT(b.coordinator.completion(AttemptId(5))->reason, Catch::Contains("shutting down"));
    CHECK(b.coordinator.completion(AttemptId(6))->reason == "outside the owner's terms");
}

TEST_CASE("delivery: outputs over the cap fail the job with the reason, and its log says so", "[delivery]") {
    DeliveryBench b;
    auto& t = b.add(1);
    std::ofstream(t.dir / "outputs" / "big.bin") << std::string(2 * 1024 * 1024, 'x');
    b.end(t, 0);
    CHECK(b.deliver() == std::vector<std::int64_t>{1});
    REQUIRE(b.coordinator.completion(AttemptId(1)));
    CHECK(b.coordinator.completion(AttemptId(1))->exit_code == 1);
    CHECK_THAT(b.coordinator.completion(AttemptId(1))->reason, Catch::StartsWith("outputs not uploaded"));
    CHECK_THAT(b.coordinator.log(AttemptId(1)), Catch::Contains("gpupool-worker: outputs not uploaded"));
    CHECK_FALSE(b.coordinator.outputs(AttemptId(1)));
}

TEST_CASE("delivery: small outputs go from memory, large ones through outputs.tar, and both arrive whole", "[delivery]") {
    DeliveryBench b;
    auto& small = b.add(1);
    std::ofstream(small.dir / "outputs" / "r.txt") << "42\n";
    auto& large = b.add(2);
    large.a.spec.outputs.max_size_mib = 4;
    std::ofstream(large.dir / "outputs" / "big.bin") << std::string(1536 * 1024, 'x');
    b.end(small, 0);
    b.end(large, 0);
    CHECK(b.deliver() == std::vector<std::int64_t>{1, 2});
    for (std::int64_t id : {1, 2}) {
        REQUIRE(b.coordinator.outputs(AttemptId(id)));
        test::TempDir out;
        auto unpacked = archive::unpack_archive(*b.coordinator.outputs(AttemptId(id)), out.path());
        REQUIRE(unpacked);
        CHECK(unpacked->written.size() == 1);
        CHECK_FALSE(std::filesystem::exists(b.attempts.at(AttemptId(id)).dir / "outputs.tar")); // removed once sent
    }
    CHECK(b.coordinator.outputs(AttemptId(2))->size() > 1536 * 1024);
}

TEST_CASE("delivery: a job that wrote no outputs uploads nothing and is completed", "[delivery]") {
    DeliveryBench b;
    auto& nothing = b.add(1);
    auto& only_link = b.add(2); // a link out of outputs/ is left out: nothing left to send either
    std::filesystem::create_symlink("/etc/passwd", only_link.dir / "outputs" / "escape");
    b.end(nothing, 0);
    b.end(only_link, 0);
    CHECK(b.deliver() == std::vector<std::int64_t>{1, 2});
    for (std::int64_t id : {1, 2}) {
        CHECK_FALSE(b.coordinator.outputs(AttemptId(id)));
        REQUIRE(b.coordinator.completion(AttemptId(id)));
        CHECK(b.coordinator.completion(AttemptId(id))->exit_code == 0);
        CHECK(b.attempts.at(AttemptId(id)).outputs_done);
    }
    CHECK_THAT(b.coordinator.log(AttemptId(2)), Catch::Contains("outputs: skipped escape"));
}

TEST_CASE("delivery: attempts that end together are completed in one request, each answered on its own",
          "[delivery]") {
    DeliveryBench b;
    for (std::int64_t id : {1, 2, 3}) {
        b.add(id);
    }
    CHECK(b.deliver().empty()); // started, running
    b.coordinator.conflict(AttemptId(2)); // re-run elsewhere meanwhile
    for (std::int64_t id : {1, 2, 3}) {
        b.end(b.attempts.at(AttemptId(id)), id == 3 ? 1 : 0);
    }
    CHECK(b.deliver() == std::vector<std::int64_t>{1, 3});
    b.attempts.retire(AttemptId(1)); // the agent drops what is done with
    b.attempts.retire(AttemptId(3));
    // One request for the ends (2 is refused on the way: at its outputs, or in the batch itself).
    REQUIRE(b.coordinator.batches().size() == 1);
    CHECK(b.coordinator.batches()[0] >= 2);
    REQUIRE(b.coordinator.completion(AttemptId(3)));
    CHECK(b.coordinator.completion(AttemptId(3))->exit_code == 1);
    CHECK_FALSE(b.coordinator.completion(AttemptId(2)));
    CHECK(b.deliver() == std::vector<std::int64_t>{2}); // fenced: dropped undelivered
}

TEST_CASE("delivery: attempts started in one step are reported in one request, each answered on its own, and "
          "marked for the spool",
          "[delivery]") {
    DeliveryBench b;
    for (std::int64_t id : {1, 2, 3}) {
        b.add(id).unsaved = false;
    }
    b.coordinator.conflict(AttemptId(2)); // re-run elsewhere meanwhile
    const auto calls = b.coordinator.calls();
    CHECK(b.deliver().empty());
    REQUIRE(b.coordinator.start_batches() == std::vector<std::size_t>{3});
    // The heartbeat, the one batch (no start one by one), and a heartbeat naming the refused running
    // attempt, to learn why it stops.
    CHECK(b.coordinator.calls() == calls + 3);
    CHECK(b.coordinator.started(AttemptId(1)));
    CHECK(b.coordinator.started(AttemptId(3)));
    CHECK(b.attempts.at(AttemptId(1)).start_reported);
    CHECK(b.attempts.at(AttemptId(1)).unsaved); // the agent writes state.json at the end of its step
    CHECK_FALSE(b.attempts.at(AttemptId(2)).start_reported);
    CHECK(b.attempts.at(AttemptId(2)).fenced); // refused: stopped, never started again
    CHECK(b.stopped.size() == 1);
    // Reported once: the next step sends no start.
    b.deliver();
    CHECK(b.coordinator.start_batches().size() == 1);
}

TEST_CASE("delivery: a batch refused as a whole keeps every end for later", "[delivery]") {
    DeliveryBench b;
    b.add(1);
    b.add(2);
    CHECK(b.deliver().empty());
    b.end(b.attempts.at(AttemptId(1)), 0);
    b.end(b.attempts.at(AttemptId(2)), 0);
    b.coordinator.fail_all(ErrorCode::unavailable);
    CHECK(b.deliver().empty());
    b.coordinator.fail_all(std::nullopt);
    b.clock.advance_ms(8'000); // past the backoff
    CHECK(b.deliver() == std::vector<std::int64_t>{1, 2});
    CHECK(b.coordinator.batches().back() == 2);
}

} // namespace test_delivery
} // namespace
