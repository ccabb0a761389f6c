// The owner's terms in a running agent: no work outside the sharing window or while paused (what
// arrives is handed back unstarted), running jobs handed back after the drain grace when a window
// ends, assignments outside the terms refused, GPUs not shared left out of the inventory; and the
// owner's controls over the real control socket (status, pause --for/--now, resume, reload).
#include "tests/support.hpp"
#include "tests/worker/agent/fake_link.hpp"
#include "tests/worker/fake_runtime.hpp"
#include "worker/agent/agent.hpp"
#include "worker/owner/control_socket.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <ctime>
#include <sys/stat.h>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_owner {

using namespace gpupool;
using namespace std::chrono_literals;
using nlohmann::json;
using test::eventually;

namespace {

// Unix ms of a UTC wall time.
std::int64_t utc(int y, int mo, int d, int h, int mi) {
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

class UtcZone {
public:
    UtcZone() {
        if (const char* old = std::getenv("TZ")) {
            m_old = old;
        }
        setenv("TZ", "UTC", 1);
        tzset();
    }
    ~UtcZone() {
        if (m_old.empty()) {
            unsetenv("TZ");
        } else {
            setenv("TZ", m_old.c_str(), 1);
        }
        tzset();
    }

private:
    std::string m_old;
};

api::Assignment assignment(std::int64_t id, const std::string& team = "fellows", std::int64_t gpu = 0) {
    api::Assignment a;
    a.attempt = AttemptId(id);
    a.job = JobId(id * 10);
    a.spec.name = "job" + std::to_string(id);
    a.spec.image = "localhost/gpupool/busybox:latest";
    a.spec.command = {"sh", "-c", "sleep 100"};
    a.spec.resources.gpus = 1;
    a.spec.resources.gpu_milli = 500;
    a.spec.resources.cpu_milli = 100;
    a.spec.resources.memory_mib = 64;
    a.spec.resources.max_runtime_s = 600;
    a.gpu_index = gpu;
    a.gpu_milli = 500;
    a.team = TeamId(1);
    a.team_name = team;
    return a;
}

struct OwnerBench {
    UtcZone zone;
    test::TempDir work;
    test::FakeCoordinator coordinator;
    test::FakeRuntime engine;
    worker::StaticGpuProbe probe{{{0, "GPU-0", "NVIDIA L4", "L4", 24576}, {1, "GPU-1", "NVIDIA L4", "L4", 24576}}};
    util::ManualClock wall{utc(2026, 12, 1, 20, 0)}; // Tuesday 20:00 UTC
    std::mutex mu;
    std::vector<std::string> events;
    std::unique_ptr<worker::Agent> agent;
    std::thread thread;
    Status result;

    worker::AgentOptions options() {
        worker::AgentOptions o;
        o.coordinator_url = "http://fake";
        o.token = "enroll";
        o.name = "owner-box";
        o.work_dir = work.path() / "w";
        o.cpu_milli = 8000;
        o.memory_mib = 16384;
        o.heartbeat = 100ms;
        o.poll_wait = 50ms;
        o.stop_grace = 300ms;
        o.tick = 20ms;
        o.give_up_after_drain = 2s;
        o.on_event = [this](const std::string& line) {
            std::lock_guard lock(mu);
            events.push_back(line);
        };
        return o;
    }
    void start(worker::AgentOptions o) {
        agent = std::make_unique<worker::Agent>(std::move(o), engine, probe,
                                                worker::AgentDeps{nullptr, coordinator.links(), &wall});
        thread = std::thread([this] { result = agent->run(); });
        REQUIRE(eventually([&] { return !coordinator.beats().empty(); }));
    }
    ~OwnerBench() {
        if (agent) {
            agent->stop();
            thread.join();
        }
    }
    bool said(const std::string& part) {
        std::lock_guard lock(mu);
        return std::any_of(events.begin(), events.end(),
                           [&](const std::string& e) { return e.find(part) != std::string::npos; });
    }
    api::Heartbeat last_beat() { return coordinator.beats().back(); }
    // A heartbeat sent from now on that satisfies `ok`.
    bool beat_says(const std::function<bool(const api::Heartbeat&)>& ok) {
        const auto from = coordinator.beats().size();
        return eventually([&] {
            const auto beats = coordinator.beats();
            return beats.size() > from && ok(beats.back());
        });
    }
    json ask(const json& req) {
        auto r = worker::control_request(work.path() / "w", req);
        REQUIRE(r.has_value());
        return *r;
    }
};

worker::ShareSettings nights(std::int64_t grace_s) {
    worker::ShareSettings s;
    s.windows = std::vector<worker::ShareWindow>{{0x7f, 19 * 60, 8 * 60, false, 1}}; // every night 19:00-08:00
    s.drain_grace_s = grace_s;
    return s;
}

} // namespace

TEST_CASE(
    "agent owner: outside its window the worker takes no work, and a window's end hands jobs back after the grace",
    "[agent][owner]") {
    OwnerBench b;
    auto o = b.options();
    o.share = nights(60);
    b.start(o);
    CHECK(b.last_beat().sharing == api::SharingState::sharing);
    CHECK(b.last_beat().sharing_changes_at_ms == utc(2026, 12, 2, 8, 0));
    b.coordinator.assign(assignment(1));
    REQUIRE(eventually([&] { return b.engine.started().size() == 1; }));
    const std::string running = b.engine.started()[0];

    b.wall.set_ms(utc(2026, 12, 2, 8, 0)); // Wednesday 08:00: the window ends
    REQUIRE(b.beat_says([](const api::Heartbeat& h) { return h.sharing == api::SharingState::outside_window; }));
    CHECK(b.last_beat().sharing_changes_at_ms == utc(2026, 12, 2, 19, 0));
    CHECK(b.said("outside the sharing window: no new jobs; 1 running job(s) have 1m to finish"));
    // Work placed meanwhile (a coordinator that had not heard yet) goes back unstarted, uncharged.
    b.coordinator.assign(assignment(2));
    REQUIRE(eventually([&] { return b.coordinator.completion(AttemptId(2)).has_value(); }));
    CHECK(b.coordinator.completion(AttemptId(2))->outcome == api::Outcome::owner_preempted);
    CHECK_THAT(b.coordinator.completion(AttemptId(2))->reason, Catch::Contains("the owner stopped sharing"));
    CHECK(b.engine.started().size() == 1);
    // Within the grace the running job goes on.
    b.wall.advance_ms(59'000);
    std::this_thread::sleep_for(200ms);
    CHECK(b.engine.get(running)->signals.empty());
    // After it, it is stopped and handed back.
    b.wall.advance_ms(2'000);
    REQUIRE(eventually([&] { return b.coordinator.completion(AttemptId(1)).has_value(); }));
    CHECK(b.coordinator.completion(AttemptId(1))->outcome == api::Outcome::owner_preempted);
    CHECK_THAT(b.coordinator.completion(AttemptId(1))->reason, Catch::Contains("sharing window ended"));
    CHECK(b.engine.get(running)->signals.front() == SIGTERM);

    b.wall.set_ms(utc(2026, 12, 2, 19, 0)); // the next night
    REQUIRE(b.beat_says([](const api::Heartbeat& h) { return h.sharing == api::SharingState::sharing; }));
    CHECK(b.said("sharing again: the sharing window opened"));
    b.coordinator.assign(assignment(3));
    REQUIRE(eventually([&] { return b.engine.started().size() == 2; }));
}

TEST_CASE("agent owner: a window that opens again within the grace lets the running job go on", "[agent][owner]") {
    OwnerBench b;
    auto o = b.options();
    o.share = nights(60);
    o.share.windows->push_back({0x7f, 8 * 60 + 1, 9 * 60, false, 2}); // 08:01-09:00 too
    b.start(o);
    b.coordinator.assign(assignment(1));
    REQUIRE(eventually([&] { return b.engine.started().size() == 1; }));
    b.wall.set_ms(utc(2026, 12, 2, 8, 0));
    REQUIRE(b.beat_says([](const api::Heartbeat& h) { return h.sharing == api::SharingState::outside_window; }));
    b.wall.set_ms(utc(2026, 12, 2, 8, 1));
    REQUIRE(b.beat_says([](const api::Heartbeat& h) { return h.sharing == api::SharingState::sharing; }));
    b.wall.advance_ms(120'000);
    std::this_thread::sleep_for(300ms);
    CHECK(b.engine.get(b.engine.started()[0])->signals.empty());
    CHECK_FALSE(b.coordinator.completion(AttemptId(1)));
}

TEST_CASE(
    "agent owner: the terms go to the coordinator, GPUs not shared are not offered, jobs outside the terms go back",
    "[agent][owner]") {
    OwnerBench b;
    auto o = b.options();
    o.share.teams = std::vector<std::string>{"fellows"};
    o.share.registries = std::vector<std::string>{"localhost/"};
    o.share.max_runtime_s = 3600;
    o.share.max_jobs = 3;
    o.share.gpus = {{0, true, 4096}, {1, false, 0}};
    b.start(o);
    const auto first = b.coordinator.beats().front();
    REQUIRE(first.inventory);
    REQUIRE(first.inventory->gpus.size() == 1); // GPU 1 is the owner's alone
    CHECK(first.inventory->gpus[0].index == 0);
    CHECK(first.inventory->gpus[0].memory_mib == 24576 - 4096);
    CHECK(first.inventory->slots == 3);
    REQUIRE(first.terms);
    CHECK(first.terms->teams == std::vector<std::string>{"fellows"});
    CHECK(first.terms->max_runtime_s == 3600);

    auto other_team = assignment(1, "strangers");
    auto other_gpu = assignment(2, "fellows", 1);
    auto far_image = assignment(3);
    far_image.spec.image = "ghcr.io/someone/x:1";
    auto too_long = assignment(4);
    too_long.spec.resources.max_runtime_s = 7200;
    for (const auto& a : {other_team, other_gpu, far_image, too_long}) {
        b.coordinator.assign(a);
    }
    REQUIRE(eventually([&] {
        for (int id = 1; id <= 4; ++id) {
            if (!b.coordinator.completion(AttemptId(id))) {
                return false;
            }
        }
        return true;
    }));
    CHECK_THAT(b.coordinator.completion(AttemptId(1))->reason, Catch::Contains("team `strangers`"));
    CHECK_THAT(b.coordinator.completion(AttemptId(2))->reason, Catch::Contains("GPU 1 is not shared"));
    CHECK_THAT(b.coordinator.completion(AttemptId(3))->reason, Catch::Contains("ghcr.io/someone/x:1"));
    CHECK_THAT(b.coordinator.completion(AttemptId(4))->reason, Catch::Contains("at most 1h"));
    for (int id = 1; id <= 4; ++id) {
        CHECK(b.coordinator.completion(AttemptId(id))->outcome == api::Outcome::owner_preempted);
    }
    CHECK(b.engine.started().empty());
    // One within the terms runs, with the GPU's memory as offered (half of 20 GiB).
    b.coordinator.assign(assignment(5));
    REQUIRE(eventually([&] { return b.engine.started().size() == 1; }));
    CHECK(b.engine.get(b.engine.started()[0])->spec.env.at("GPUPOOL_GPU_MEMORY_MB") ==
          std::to_string((24576 - 4096) / 2));
}

TEST_CASE("agent owner: status, pause --for and --now, resume and reload over the real control socket",
          "[agent][owner]") {
    OwnerBench b;
    const auto config = b.work.write("worker.toml", "[share]\nmax_jobs = 2\n");
    auto o = b.options();
    o.config_file = config;
    o.share.max_jobs = 2;
    o.share_flags.cpu_milli = 3000; // a flag: wins over the file on reload too
    o.share.cpu_milli = 3000;
    b.start(o);
    // The socket: 0600, in a 0700 dir.
    struct stat st {};
    REQUIRE(::stat((b.work.path() / "w" / "control.sock").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat((b.work.path() / "w").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);

    b.coordinator.assign(assignment(1));
    REQUIRE(eventually([&] { return b.engine.started().size() == 1; }));
    REQUIRE(eventually([&] { return !b.ask({{"op", "status"}})["jobs"].empty(); }));
    json s = b.ask({{"op", "status"}});
    CHECK(s["ok"] == true);
    CHECK(s["state"] == "sharing");
    CHECK(s["jobs"][0]["team"] == "fellows");
    CHECK(s["jobs"][0]["gpu_index"] == 0);
    CHECK(s["jobs"][0]["image"] == "localhost/gpupool/busybox:latest");
    CHECK(s["last_contact_ms"].is_number_integer());
    CHECK(s["offer"]["max_jobs"] == 2);
    CHECK(s["offer"]["cpu_milli"] == 3000);

    // A timed pause: no new work, the running job goes on; the file keeps the end.
    json p = b.ask({{"op", "pause"}, {"for_s", 7200}, {"why", "my training"}});
    CHECK(p["ok"] == true);
    CHECK(p["until_ms"] == b.wall.now_ms() + 7'200'000);
    REQUIRE(b.beat_says([](const api::Heartbeat& h) { return h.sharing == api::SharingState::paused; }));
    CHECK(b.last_beat().sharing_changes_at_ms == b.wall.now_ms() + 7'200'000);
    REQUIRE(worker::read_pause(b.work.path() / "w"));
    CHECK(worker::read_pause(b.work.path() / "w")->until_ms == b.wall.now_ms() + 7'200'000);
    s = b.ask({{"op", "status"}});
    CHECK(s["state"] == "paused");
    CHECK_THAT(s["description"].get<std::string>(), Catch::Contains("until") && Catch::Contains("my training"));
    CHECK(b.engine.get(b.engine.started()[0])->signals.empty());
    // It ends by itself.
    b.wall.advance_ms(7'200'000);
    REQUIRE(b.beat_says([](const api::Heartbeat& h) { return h.sharing == api::SharingState::sharing; }));
    CHECK_FALSE(worker::read_pause(b.work.path() / "w"));

    // pause --now hands the running job back at once.
    p = b.ask({{"op", "pause"}, {"now", true}});
    CHECK(p["stopped"] == 1);
    REQUIRE(eventually([&] { return b.coordinator.completion(AttemptId(1)).has_value(); }));
    CHECK(b.coordinator.completion(AttemptId(1))->outcome == api::Outcome::owner_preempted);
    CHECK_THAT(b.coordinator.completion(AttemptId(1))->reason, Catch::Contains("paused by the owner"));
    CHECK(b.ask({{"op", "resume"}})["state"] == "sharing");

    // reload: the file's new terms, the flag still over them; a broken file changes nothing.
    test::write_file(config, "[share]\nmax_jobs = 1\ncpus = 2\nteams = [\"vision\"]\n");
    json r = b.ask({{"op", "reload"}});
    CHECK(r["ok"] == true);
    REQUIRE(b.beat_says(
        [](const api::Heartbeat& h) { return h.terms && h.terms->teams == std::vector<std::string>{"vision"}; }));
    REQUIRE(eventually([&] { return b.ask({{"op", "status"}})["offer"]["max_jobs"] == 1; }));
    CHECK(b.ask({{"op", "status"}})["offer"]["cpu_milli"] == 3000);
    CHECK(eventually([&] {
        const auto beats = b.coordinator.beats();
        return std::any_of(beats.begin(), beats.end(),
                           [](const api::Heartbeat& h) { return h.inventory && h.inventory->slots == 1; });
    }));
    test::write_file(config, "[share]\nmax_jobs = \"many\"\n");
    r = b.ask({{"op", "reload"}});
    CHECK(r["ok"] == false);
    CHECK_THAT(r["error"].get<std::string>(), Catch::Contains("worker.toml:2") && Catch::Contains("share.max_jobs"));
    CHECK(b.ask({{"op", "status"}})["offer"]["max_jobs"] == 1);
    // Agent::reload (SIGHUP's path) re-reads too.
    test::write_file(config, "[share]\nmax_jobs = 4\n");
    b.agent->reload();
    REQUIRE(eventually([&] { return b.ask({{"op", "status"}})["offer"]["max_jobs"] == 4; }));
    CHECK(b.said("reload: applied"));

    // Bad requests are refused with the field.
    CHECK_THAT(b.ask({{"op", "explode"}})["error"].get<std::string>(), Catch::Contains("expected status, pause"));
    CHECK_THAT(b.ask({{"op", "pause"}, {"for_s", -3}})["error"].get<std::string>(), Catch::Contains("for_s"));
    CHECK_THAT(b.ask(json{{"nothing", 1}})["error"].get<std::string>(), Catch::Contains("op"));
}

TEST_CASE("agent owner: a worker started while paused starts paused, and a second worker on the work dir is refused",
          "[agent][owner]") {
    OwnerBench b;
    REQUIRE(worker::pause_sharing(b.work.path() / "w", "away"));
    b.start(b.options());
    REQUIRE(b.beat_says([](const api::Heartbeat& h) { return h.sharing == api::SharingState::paused; }));
    CHECK(b.said("paused by the owner"));
    b.coordinator.assign(assignment(1));
    REQUIRE(eventually([&] { return b.coordinator.completion(AttemptId(1)).has_value(); }));
    CHECK(b.engine.started().empty());

    test::FakeCoordinator other;
    test::FakeRuntime engine;
    worker::Agent second(b.options(), engine, b.probe, worker::AgentDeps{nullptr, other.links(), &b.wall});
    auto st = second.run();
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().code == ErrorCode::conflict);
    CHECK_THAT(st.error().message, Catch::Contains("another worker is running"));
}

} // namespace test_agent_owner
} // namespace
