// JobControl against FakeRuntime: a start, an exit seen by watch(), a stop with SIGTERM then SIGKILL,
// max_runtime, a vanished container and a silent engine as worker faults, a failed start, a GPU that
// failed under its job, and drop() recycling only what no longer runs.
#include "core/util/clock.hpp"
#include "tests/support.hpp"
#include "tests/worker/fake_runtime.hpp"
#include "worker/agent/job_control.hpp"

#include <catch2/catch.hpp>

#include <csignal>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_job_control {

using namespace gpupool;
using namespace std::chrono_literals;

namespace {

struct JobBench {
    test::TempDir work;
    test::FakeRuntime runtime;
    util::ManualClock clock{0};
    worker::Spool spool{work.path()};
    worker::AttemptTable attempts;
    std::vector<std::string> events;
    std::optional<std::string> failed_gpu; // what gpu_failed answers
    util::ManualClock wall{1'765'000'000'000}; // the worker's wall clock (Unix ms)
    worker::JobControl jobs{{10s, 60s},
                            runtime,
                            spool,
                            attempts,
                            clock,
                            {[this](const std::string& line) { events.push_back(line); },
                             [this](std::int64_t) { return failed_gpu; }, [this] { return wall.now_ms(); }}};

    // Starts attempt `id` (its container "c<id>"); `ready` as its folders' preparation went.
    worker::Attempt& start(std::int64_t id, std::int64_t max_runtime_s = 0, std::int64_t gpu = -1, Status ready = {},
                           std::optional<api::RunReport> report = std::nullopt) {
        api::Assignment a;
        a.attempt = AttemptId(id);
        a.job = JobId(10 * id);
        a.spec.name = "job" + std::to_string(id);
        a.spec.command = {"true"};
        a.spec.resources.max_runtime_s = max_runtime_s;
        a.gpu_index = gpu;
        worker::Attempt t = spool.create(a, clock.now_ms());
        worker::ContainerSpec spec;
        spec.name = "c" + std::to_string(id);
        spec.log_path = t.log_path();
        spec.image = "localhost/gpupool/busybox:latest";
        jobs.start(std::move(t), spec, ready, std::move(report));
        return attempts.at(AttemptId(id));
    }
    std::vector<int> signals(const std::string& name) { return runtime.get(name).value().signals; }
};

} // namespace

TEST_CASE("job control: a started job is held and told to the owner, its exit ends it", "[agent][jobs]") {
    JobBench b;
    auto& t = b.start(1);
    CHECK(t.container == "c1");
    CHECK(t.running());
    CHECK(t.unsaved);
    REQUIRE(b.events.size() == 1);
    CHECK_THAT(b.events[0], Catch::Contains("job 10 `job1`") && Catch::Contains("started"));
    b.jobs.watch();
    CHECK(t.running());
    b.runtime.exit("c1", 3);
    b.clock.advance_ms(65'000);
    b.jobs.watch();
    CHECK_FALSE(t.running());
    CHECK(t.exit_code == 3);
    CHECK(t.reason == "exited with status 3");
    CHECK(t.outcome == worker::Outcome::exited);
    REQUIRE(b.events.size() == 2);
    CHECK_THAT(b.events[1], Catch::Contains("ended after 1m5s: exited with status 3"));
}

TEST_CASE("job control: a stop sends SIGTERM now and SIGKILL after the grace, once", "[agent][jobs]") {
    JobBench b;
    b.runtime.ignore_term_next(true);
    auto& t = b.start(1);
    b.jobs.stop(AttemptId(1), "stopped by the coordinator", worker::Outcome::exited, 1'500ms);
    CHECK(b.signals("c1") == std::vector<int>{SIGTERM});
    b.jobs.stop(AttemptId(1), "again", worker::Outcome::exited, 0ms); // the first stop holds
    CHECK(b.signals("c1") == std::vector<int>{SIGTERM});
    b.clock.advance_ms(1'000);
    b.jobs.watch();
    CHECK(b.signals("c1") == std::vector<int>{SIGTERM});
    b.clock.advance_ms(500);
    b.jobs.watch(); // due: SIGKILL (the fake job then exits 137)
    CHECK(b.signals("c1") == std::vector<int>{SIGTERM, SIGKILL});
    b.jobs.watch();
    CHECK_FALSE(t.running());
    CHECK(t.reason == "stopped by the coordinator (exit 137)");
    CHECK(b.signals("c1") == std::vector<int>{SIGTERM, SIGKILL});
}

TEST_CASE("job control: max_runtime stops a job with runtime_grace, stop_all hands the others back", "[agent][jobs]") {
    JobBench b;
    b.runtime.ignore_term_next(true);
    auto& limited = b.start(1, 60);
    b.runtime.ignore_term_next(false);
    auto& other = b.start(2);
    b.clock.advance_ms(60'001);
    b.jobs.watch();
    CHECK(limited.stop_reason == "exceeded max_runtime 1m");
    REQUIRE(limited.kill_at_ms);
    CHECK(*limited.kill_at_ms == 70'001); // runtime_grace: 10 s
    CHECK(other.stop_reason.empty());
    b.jobs.stop_all("paused by the owner: handed back to the queue", worker::Outcome::owner_preempted, 1s);
    CHECK(limited.stop_reason == "exceeded max_runtime 1m"); // already stopping
    CHECK(other.stop_outcome == worker::Outcome::owner_preempted);
    b.jobs.watch();
    CHECK_FALSE(other.running());
    CHECK(other.outcome == worker::Outcome::owner_preempted);
    CHECK(other.outputs_done);
}

TEST_CASE("job control: a vanished container and a silent engine end their jobs as worker faults", "[agent][jobs]") {
    JobBench b;
    auto& gone = b.start(1);
    b.runtime.vanish("c1");
    b.jobs.watch();
    CHECK_FALSE(gone.running());
    CHECK(gone.outcome == worker::Outcome::worker_fault);
    CHECK_THAT(gone.reason, Catch::Contains("container disappeared"));
    CHECK_THAT(b.events.back(), Catch::Contains("worker fault: "));

    auto& silent = b.start(2);
    b.runtime.fail_poll(true);
    b.jobs.watch();
    CHECK(silent.running());
    REQUIRE(silent.poll_failing_since_ms);
    b.clock.advance_ms(60'000);
    b.jobs.watch();
    CHECK(silent.running()); // not longer than engine_unanswered_max yet
    b.clock.advance_ms(1);
    b.jobs.watch();
    CHECK_FALSE(silent.running());
    CHECK(silent.outcome == worker::Outcome::worker_fault);
    CHECK_THAT(silent.reason, Catch::Contains("could not say how the job is for 60 s"));
    b.runtime.fail_poll(false);
    CHECK(b.signals("c2") == std::vector<int>{SIGKILL});
}

TEST_CASE("job control: a failed start is the job's when its inputs are wrong, else the worker's", "[agent][jobs]") {
    JobBench b;
    auto& inputs = b.start(1, 0, -1, make_error(ErrorCode::invalid_input, "inputs: over the cap"));
    CHECK_FALSE(inputs.running());
    CHECK(inputs.container.empty());
    CHECK(inputs.exit_code == 1);
    CHECK(inputs.outcome == worker::Outcome::exited);
    CHECK(inputs.reason == "inputs: over the cap");
    CHECK_THAT(test::slurp(inputs.log_path()), Catch::Contains("gpupool-worker: inputs: over the cap"));

    b.runtime.fail_start(true);
    auto& engine = b.start(2);
    CHECK_FALSE(engine.running());
    CHECK(engine.container.empty());
    CHECK(engine.outcome == worker::Outcome::worker_fault);
    CHECK(engine.reason == "could not start on fake: fake: image not found");
}

TEST_CASE("job control: a GPU job that fails with its GPU is the worker's fault", "[agent][jobs][gpu]") {
    JobBench b;
    auto& cpu = b.start(1);
    auto& gpu = b.start(2, 0, 0);
    b.failed_gpu = "uncorrectable ECC errors";
    b.runtime.exit("c1", 1);
    b.runtime.exit("c2", 1);
    b.jobs.watch();
    CHECK(cpu.outcome == worker::Outcome::exited); // no GPU: its own failure
    CHECK(gpu.outcome == worker::Outcome::worker_fault);
    CHECK(gpu.reason == "GPU 0 failed on the worker: uncorrectable ECC errors (the job exited with status 1)");
    CHECK(gpu.outputs_done);
}

TEST_CASE("job control: drop removes the container and lets go of the attempt for good", "[agent][jobs]") {
    JobBench b;
    b.start(1);
    b.runtime.exit("c1", 0);
    b.jobs.watch();
    const auto dir = b.attempts.at(AttemptId(1)).dir;
    b.jobs.drop(AttemptId(1), "delivered");
    CHECK(b.runtime.get("c1").value().removed);
    CHECK_FALSE(b.attempts.holds(AttemptId(1)));
    CHECK(b.attempts.done_with(AttemptId(1)));
    CHECK_FALSE(std::filesystem::exists(dir / "log"));
    b.jobs.drop(AttemptId(1), "twice"); // nothing held: nothing happens
    CHECK(b.attempts.done_with(AttemptId(1)));
}

TEST_CASE("job control: a started job's run report has the image as resolved at its start and the wall clock's times",
          "[agent][jobs][report]") {
    JobBench b;
    api::RunReport given;
    given.runtime = "fake";
    auto& t = b.start(1, 0, -1, {}, given);
    REQUIRE(t.report);
    CHECK(b.runtime.identity_asks() == std::vector<std::string>{"localhost/gpupool/busybox:latest"});
    CHECK(t.report->runtime == "fake"); // what the agent gave is kept
    CHECK(t.report->image_digest == test::FakeRuntime::k_digest);
    CHECK(t.report->image_id == test::FakeRuntime::k_image_id);
    CHECK(t.report->image_digest_unknown.empty());
    CHECK(t.report->started_at_ms == 1'765'000'000'000);
    CHECK(t.report->ended_at_ms == 0); // still running
    b.wall.advance_ms(4'500);
    b.runtime.exit("c1", 0);
    b.jobs.watch();
    CHECK(b.attempts.at(AttemptId(1)).report->ended_at_ms == 1'765'000'004'500);
    // Ended as a worker fault: its end time too.
    auto& lost = b.start(2, 0, -1, {}, given);
    b.wall.advance_ms(1'000);
    b.runtime.vanish("c2");
    b.jobs.watch();
    CHECK_FALSE(lost.running());
    CHECK(b.attempts.at(AttemptId(2)).report->ended_at_ms == 1'765'000'005'500);
}

TEST_CASE("job control: an engine's answer that is not a digest never reaches the run report",
          "[agent][jobs][report]") {
    JobBench b;
    SECTION("hostile values are dropped, and the report says neither is known") {
        b.runtime.set_image_identity(worker::ImageIdentity{"sha256:XYZ; rm -rf /", "--privileged", ""});
        auto& t = b.start(1, 0, -1, {}, api::RunReport{});
        REQUIRE(t.report);
        CHECK(t.report->image_digest.empty());
        CHECK(t.report->image_id.empty());
        CHECK(t.report->image_digest_unknown == "the fake engine gave no valid digest or id");
    }
    SECTION("only an id (an image built here): the digest stays empty and nothing is said unknown") {
        b.runtime.set_image_identity(worker::ImageIdentity{"", test::FakeRuntime::k_image_id, ""});
        auto& t = b.start(1, 0, -1, {}, api::RunReport{});
        CHECK(t.report->image_digest.empty());
        CHECK(t.report->image_id == test::FakeRuntime::k_image_id);
        CHECK(t.report->image_digest_unknown.empty());
    }
    SECTION("an engine that cannot be asked: its words, made printable and bounded") {
        b.runtime.set_image_identity(
            make_error(ErrorCode::io, "podman image inspect failed:\x1b[31m " + std::string(400, 'x')));
        auto& t = b.start(1, 0, -1, {}, api::RunReport{});
        CHECK_THAT(t.report->image_digest_unknown, Catch::StartsWith("the fake engine could not say: podman image "
                                                                     "inspect failed:?[31m xxx"));
        CHECK(t.report->image_digest_unknown.size() == api::k_max_report_text_bytes);
        CHECK(api::run_report_from_json(api::to_json(*t.report))); // the coordinator takes it
    }
}

TEST_CASE("job control: an attempt that never started has no run report", "[agent][jobs][report]") {
    JobBench b;
    auto& t = b.start(1, 0, -1, make_error(ErrorCode::invalid_input, "no such input"), api::RunReport{});
    CHECK_FALSE(t.running());
    CHECK_FALSE(t.report);
    CHECK(b.runtime.identity_asks().empty());
    auto& none = b.start(2); // the agent gave none
    CHECK_FALSE(none.report);
}

} // namespace test_job_control
} // namespace
