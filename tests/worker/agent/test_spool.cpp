// The spool: state.json round trips, attempt directories without a readable assignment are dropped,
// those without a readable state come back as running, and recovery after
// a restart re-attaches, reports lost attempts and removes this worker's orphaned containers.
#include "tests/support.hpp"
#include "tests/worker/fake_runtime.hpp"
#include "worker/agent/spool.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_spool {

using namespace gpupool;

namespace {

api::Assignment assignment(std::int64_t id) {
    api::Assignment a;
    a.attempt = AttemptId(id);
    a.job = JobId(100 + id);
    a.attempt_number = 1;
    a.spec.name = "spooled";
    a.spec.image = "localhost/gpupool/busybox:latest";
    a.spec.command = {"true"};
    a.spec.resources.cpu_milli = 100;
    a.spec.resources.memory_mib = 64;
    return a;
}

// What recover() returned, by attempt id.
std::map<std::int64_t, worker::Spool::Recovered> by_attempt(const std::vector<worker::Spool::Recovered>& back) {
    std::map<std::int64_t, worker::Spool::Recovered> out;
    for (const auto& r : back) {
        out.emplace(r.attempt.id().value(), r);
    }
    return out;
}

worker::ContainerSpec spec_for(const worker::Attempt& t, const std::string& label) {
    worker::ContainerSpec c;
    c.name = t.container;
    c.argv = {"true"};
    c.log_path = t.log_path();
    c.labels = {{"gpupool.worker", label}, {"gpupool.attempt", std::to_string(t.id().value())}};
    return c;
}

} // namespace

TEST_CASE("spool: state.json keeps what was delivered and how the attempt ended", "[spool]") {
    worker::Attempt t;
    t.container = "gpupool-w1-x-a3";
    t.phase = worker::AttemptPhase::ended;
    t.start_reported = true;
    t.shipped = 1234;
    t.outputs_done = true;
    t.exit_code = 137;
    t.reason = "killed";
    t.outcome = worker::Outcome::owner_preempted;
    t.stop_reason = "drain";
    t.stop_outcome = worker::Outcome::worker_fault;
    t.outputs_error = "too big";
    worker::Attempt back;
    worker::Spool::apply_state(back, worker::Spool::state_json(t));
    CHECK(worker::Spool::state_json(back) == worker::Spool::state_json(t));
    CHECK(back.exit_code == 137);
    CHECK(back.outcome == worker::Outcome::owner_preempted);
    CHECK(back.stop_outcome == worker::Outcome::worker_fault);
    CHECK_FALSE(back.running());
    worker::Attempt fresh;
    worker::Spool::apply_state(fresh, nlohmann::json::object()); // an older file: defaults
    CHECK(fresh.running());
    CHECK_FALSE(fresh.exit_code);
}

TEST_CASE("spool: state.json keeps the run report through a restart, and one without it still loads",
          "[spool][report]") {
    test::TempDir work;
    worker::Spool spool(work.path());
    auto t = spool.create(assignment(5), 0);
    t.container = "gpupool-w1-x-a5";
    api::RunReport r;
    r.runtime = "podman";
    r.image_digest = "sha256:" + std::string(64, 'a');
    r.image_id = "sha256:" + std::string(64, 'b');
    r.gpu_model = "L4";
    r.gpu_uuid = "GPU-0";
    r.driver_version = "550.54.15";
    r.cuda_version = "12.4";
    r.enforcement = "watchdog";
    r.models = {{"org/model", std::string(40, 'c')}, {"org/other", ""}};
    r.started_at_ms = 1'765'000'000'000;
    r.worker_version = "0.1.0";
    t.report = r;
    spool.save(t);
    auto back = spool.load(99);
    REQUIRE(back.size() == 1);
    REQUIRE(back[0].report);
    CHECK(*back[0].report == r);

    // Written by an older worker: no "report" member. It loads, with none.
    auto state = worker::read_json_file(t.dir / "state.json");
    REQUIRE(state);
    state->erase("report");
    REQUIRE(worker::write_json_file(t.dir / "state.json", *state));
    back = spool.load(99);
    REQUIRE(back.size() == 1);
    CHECK(back[0].container == "gpupool-w1-x-a5");
    CHECK_FALSE(back[0].report);

    // One that does not read (a digest that is not one): the rest of the state holds, without it.
    (*state)["report"] = api::to_json(r);
    (*state)["report"]["image_digest"] = "sha256:nope";
    REQUIRE(worker::write_json_file(t.dir / "state.json", *state));
    back = spool.load(99);
    REQUIRE(back.size() == 1);
    CHECK(back[0].container == "gpupool-w1-x-a5");
    CHECK_FALSE(back[0].report);
}

TEST_CASE("spool: save_unsaved writes the attempts marked unsaved, once, and leaves the others alone", "[spool]") {
    test::TempDir work;
    worker::Spool spool(work.path());
    worker::AttemptTable held;
    auto& first = held.add(spool.create(assignment(1), 0));
    auto& second = held.add(spool.create(assignment(2), 0));
    spool.save(first);
    spool.save(second);
    // Two changes to the first in one step, none written yet; the second changed without the mark.
    first.start_reported = true;
    first.shipped = 10;
    first.unsaved = true;
    first.shipped = 20;
    second.shipped = 99;
    auto shipped = [&](AttemptId id) {
        for (const auto& t : spool.load(0)) {
            if (t.id() == id) {
                return t.shipped;
            }
        }
        return std::int64_t{-1};
    };
    CHECK(shipped(AttemptId(1)) == 0);
    spool.save_unsaved(held);
    CHECK_FALSE(first.unsaved);
    CHECK(shipped(AttemptId(1)) == 20); // the last value of the step
    CHECK(shipped(AttemptId(2)) == 0);  // not marked: not written
    // A step that changed nothing writes nothing: the file is not replaced.
    const auto written_at = std::filesystem::last_write_time(first.dir / "state.json");
    spool.save_unsaved(held);
    CHECK(std::filesystem::last_write_time(first.dir / "state.json") == written_at);
}

TEST_CASE("spool: load reads attempts back and drops directories it cannot trust", "[spool]") {
    test::TempDir work;
    worker::Spool spool(work.path());
    auto t = spool.create(assignment(1), 5'000);
    t.shipped = 42;
    spool.save(t);
    CHECK(std::filesystem::exists(t.dir / "assignment.json"));
    std::filesystem::create_directories(spool.dir() / "2"); // no files: a crash mid-create
    std::filesystem::create_directories(spool.dir() / "3");
    std::ofstream(spool.dir() / "3" / "assignment.json") << "{not json";
    std::ofstream(spool.dir() / "3" / "state.json") << "{}";
    const auto back = spool.load(9'000);
    REQUIRE(back.size() == 1);
    CHECK(back[0].id() == AttemptId(1));
    CHECK(back[0].shipped == 42);
    CHECK(back[0].started_ms == 9'000); // max_runtime starts again from the restart
    CHECK_FALSE(std::filesystem::exists(spool.dir() / "2"));
    CHECK_FALSE(std::filesystem::exists(spool.dir() / "3"));
    spool.remove(back[0], true);
    CHECK(spool.load(9'000).empty());
}

TEST_CASE("spool: recovery re-attaches running containers, reports the lost and removes orphans", "[spool]") {
    test::TempDir work;
    test::FakeRuntime rt;
    worker::Spool spool(work.path());
    const std::string label = "w1-00000000000000aa";
    auto alive = spool.create(assignment(1), 0);
    alive.container = "gpupool-" + label + "-a1";
    spool.save(alive);
    REQUIRE(rt.start(spec_for(alive, label)));
    auto gone = spool.create(assignment(2), 0);
    gone.container = "gpupool-" + label + "-a2";
    spool.save(gone);
    auto ended = spool.create(assignment(3), 0);
    ended.phase = worker::AttemptPhase::ended;
    ended.exit_code = 0;
    spool.save(ended);
    worker::Attempt orphan;
    orphan.container = "gpupool-" + label + "-a9";
    orphan.a.attempt = AttemptId(9);
    orphan.dir = work.path();
    REQUIRE(rt.start(spec_for(orphan, label)));
    worker::Attempt foreign; // another pool's worker on the same engine
    foreign.container = "gpupool-w1-00000000000000bb-a1";
    foreign.a.attempt = AttemptId(1);
    foreign.dir = work.path();
    REQUIRE(rt.start(spec_for(foreign, "w1-00000000000000bb")));

    const auto by_id = by_attempt(spool.recover(rt, label, 0));
    REQUIRE(by_id.size() == 3);
    CHECK_FALSE(by_id.at(1).lost);
    CHECK(rt.get(alive.container)->reattached == 1);
    REQUIRE(by_id.at(2).lost);
    CHECK_THAT(*by_id.at(2).lost, Catch::Contains("container was gone"));
    CHECK_FALSE(by_id.at(3).lost); // ended before: only its delivery is left
    CHECK(rt.get(orphan.container)->removed);
    CHECK_FALSE(rt.get(foreign.container)->removed);
}

TEST_CASE("spool: an attempt created and never recorded comes back, re-attached by its labels or lost, never dropped",
          "[spool]") {
    // The worker died between starting a job and writing its state.json (the CI run of stop 54 hit
    // this window with kill -9): the attempt used to vanish, and the coordinator heard only at the
    // lease's end.
    test::TempDir work;
    test::FakeRuntime rt;
    worker::Spool spool(work.path());
    const std::string label = "w1-00000000000000aa";
    auto started = spool.create(assignment(1), 0); // its container runs; no state.json
    started.container = "gpupool-" + label + "-a1";
    REQUIRE(rt.start(spec_for(started, label)));
    spool.create(assignment(2), 0);                // never started
    auto garbled = spool.create(assignment(3), 0); // a state.json that is not JSON
    std::ofstream(garbled.dir / "state.json") << "{\"phase\": \"ended\", \"shipp";
    REQUIRE_FALSE(std::filesystem::exists(started.dir / "state.json"));

    const auto loaded = spool.load(7'000);
    REQUIRE(loaded.size() == 3);
    for (const auto& t : loaded) {
        CHECK(t.running());
        CHECK(t.container.empty());
        CHECK(t.shipped == 0);
        CHECK(t.started_ms == 7'000);
    }

    const auto by_id = by_attempt(spool.recover(rt, label, 0));
    REQUIRE(by_id.size() == 3);
    CHECK_FALSE(by_id.at(1).lost);
    CHECK(by_id.at(1).attempt.container == started.container);
    CHECK(rt.get(started.container)->reattached == 1);
    CHECK_FALSE(rt.get(started.container)->removed); // not taken for an orphan
    for (std::int64_t id : {2, 3}) {
        REQUIRE(by_id.at(id).lost);
        CHECK_THAT(*by_id.at(id).lost, Catch::Contains("before it recorded the job's start"));
    }
}

TEST_CASE("spool: a runtime that cannot re-attach reports every running attempt lost, without asking it", "[spool]") {
    test::TempDir work;
    test::FakeRuntime rt;
    auto caps = rt.capabilities();
    caps.reattaches = false;
    rt.set_capabilities(caps);
    worker::Spool spool(work.path());
    auto t = spool.create(assignment(1), 0);
    t.container = "gpupool-w1-00000000000000aa-a1";
    spool.save(t);
    REQUIRE(rt.start(spec_for(t, "w1-00000000000000aa")));
    const auto back = spool.recover(rt, "w1-00000000000000aa", 0);
    REQUIRE(back.size() == 1);
    REQUIRE(back[0].lost);
    CHECK_THAT(*back[0].lost, Catch::Contains("cannot be re-attached"));
    CHECK(rt.get(t.container)->reattached == 0);
}

TEST_CASE("spool: an assignment.json written by an older worker (the assignment as received) still loads",
          "[spool]") {
    test::TempDir work;
    worker::Spool spool(work.path());
    const auto dir = spool.dir() / "17";
    std::filesystem::create_directories(dir);
    // Written by the worker before the wire types were shared: the poll answer's object, verbatim
    // (recipe::to_json's key order, pretty-printed), and the state of a job that ended.
    std::ofstream(dir / "assignment.json") << R"({
  "attempt": 17,
  "attempt_number": 2,
  "gpu_index": 0,
  "gpu_milli": 250,
  "job": 5,
  "spec": {
    "name": "old-spool",
    "image": "localhost/gpupool/busybox:latest",
    "command": ["sh", "-c", "true"],
    "resources": {"gpus": 1, "gpu_milli": 250, "cpu_milli": 100, "memory_mib": 64, "max_runtime_s": 60}
  },
  "team": 3,
  "team_name": "fellows"
}
)";
    std::ofstream(dir / "state.json") << R"({"container": "gpupool-w1-x-a17", "phase": "ended", "exit_code": 0,
                                            "shipped": 12, "outcome": "exited"})";
    const auto back = spool.load(1'000);
    REQUIRE(back.size() == 1);
    const auto& a = back[0].a;
    CHECK(a.attempt == AttemptId(17));
    CHECK(a.job == JobId(5));
    CHECK(a.attempt_number == 2);
    CHECK(a.gpu_index == 0);
    CHECK(a.gpu_milli == 250);
    CHECK(a.team == TeamId(3));
    CHECK(a.team_name == "fellows");
    CHECK(a.spec.name == "old-spool");
    CHECK(a.spec.resources.gpu_milli == 250);
    CHECK(back[0].shipped == 12);
    CHECK_FALSE(back[0].running());
}

TEST_CASE("spool: an assignment.json from a coordinator that did not say the team loads with the defaults",
          "[spool]") {
    test::TempDir work;
    worker::Spool spool(work.path());
    const auto dir = spool.dir() / "4";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "assignment.json")
        << R"({"attempt": 4, "job": 40, "spec": {"name": "j", "image": "localhost/i:1", "command": ["true"],
               "resources": {"cpu_milli": 100, "memory_mib": 64}}})";
    std::ofstream(dir / "state.json") << "{}";
    const auto back = spool.load(0);
    REQUIRE(back.size() == 1);
    CHECK(back[0].a.attempt_number == 1);
    CHECK(back[0].a.gpu_index == -1);
    CHECK(back[0].a.team == TeamId(0));
    CHECK(back[0].a.team_name.empty());
    CHECK(back[0].running());
}

TEST_CASE("spool: create says when the spool cannot hold the attempt, and load survives a folder in a file's place",
          "[spool]") {
    test::TempDir work;
    worker::Spool spool(work.path());
    Status spooled = make_error(ErrorCode::internal, "not set");
    auto t = spool.create(assignment(1), 0, &spooled);
    CHECK(spooled);
    CHECK(std::filesystem::exists(t.dir / "assignment.json"));

    // A file that cannot be written (a full disk in the soak; here a folder in its place): the
    // agent must not start the attempt (agent.cpp ends it as a worker fault instead).
    std::filesystem::create_directories(spool.dir() / "7" / "assignment.json");
    auto blocked = spool.create(assignment(7), 0, &spooled);
    REQUIRE_FALSE(spooled);
    CHECK_THAT(spooled.error().message, Catch::Contains("assignment.json"));

    // A restart meets the same folders: load drops what it cannot read rather than throw from the
    // stream (it used to end the worker: "basic_filebuf::underflow error reading the file").
    spool.save(t);
    std::filesystem::create_directories(spool.dir() / "8" / "state.json");
    std::ofstream(spool.dir() / "8" / "assignment.json") << "{}";
    const auto back = spool.load(0);
    REQUIRE(back.size() == 1);
    CHECK(back[0].id() == AttemptId(1));
    CHECK_FALSE(std::filesystem::exists(spool.dir() / "7"));
    CHECK_FALSE(std::filesystem::exists(spool.dir() / "8"));
}

} // namespace test_spool
} // namespace
