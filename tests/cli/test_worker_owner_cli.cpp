// The owner's controls end to end: a real `gpupool worker --share --config worker.toml` process and
// the real `gpupool worker status | pause | resume | reload` commands talking to it over its control
// socket, SIGHUP re-reading the file, and the same commands once the worker has stopped.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"
#include "worker/owner/control_socket.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_worker_owner_cli {

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;
using test::eventually;

namespace {

std::pair<std::string, std::string> member_and_enroll(const std::string& url, const std::string& admin) {
    auto a = test::http_client(url, admin);
    REQUIRE(a.request("POST", "/v1/admin/teams", R"({"name": "fellows"})"));
    REQUIRE(a.request("POST", "/v1/admin/grants", R"({"team": "fellows", "amount_micro": 1000000000})"));
    auto m = a.request("POST", "/v1/admin/tokens", R"({"role": "member", "team": "fellows"})");
    auto e = a.request("POST", "/v1/admin/tokens", R"({"role": "enroll", "team": "fellows", "uses": 10})");
    REQUIRE(m);
    REQUIRE(e);
    return {json::parse(m->body)["token"], json::parse(e->body)["token"]};
}

std::int64_t submit(const std::string& url, const std::string& member, const std::string& script) {
    recipe::JobSpec s;
    s.name = "long";
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {script};
    s.shell = true;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 600;
    auto c = test::http_client(url, member);
    json body = {
        {"source", "t.toml"}, {"max_parallel", 0}, {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}};
    auto r = c.request("POST", "/v1/jobs", body.dump());
    REQUIRE(r);
    REQUIRE(r->status == 201);
    return json::parse(r->body)["jobs"][0].get<std::int64_t>();
}

std::string state_of(const std::string& url, const std::string& member, std::int64_t id) {
    auto c = test::http_client(url, member);
    auto r = c.request("GET", "/v1/jobs/" + std::to_string(id));
    return r && r->status == 200 ? json::parse(r->body)["state"].get<std::string>() : "";
}

} // namespace

TEST_CASE("worker owner process: with the coordinator down, status still shows the machine's own state, in one "
          "JSON document that names the error, and exits 1",
          "[worker-cli][owner]") {
    // The soak (tests/soak, PostgreSQL variant) read two JSON documents from `--json worker status`
    // while no coordinator answered: the status, then the error.
    test::TempDir dir;
    auto coord = std::make_unique<test::CoordinatorProcess>(dir.path());
    const auto url = coord->url();
    const auto [member, enroll] = member_and_enroll(url, coord->admin());
    const auto work = dir.path() / "w";
    const std::string wd = work.string();
    test::WorkerProcess w(work, url, enroll);
    REQUIRE(eventually([&] { return test::run_gpupool({"worker", "status", "--work-dir", wd}).exit_code == 0; },
                       15s));
    coord->kill9();

    auto js = test::run_gpupool({"--json", "worker", "status", "--work-dir", wd});
    INFO(js.out << js.err);
    CHECK(js.exit_code == 1);
    json j;
    REQUIRE_NOTHROW(j = json::parse(js.out)); // one document, nothing after it
    CHECK(j["error"]["code"] == "unavailable");
    CHECK_THAT(j["error"]["message"].get<std::string>(), Catch::Contains("/v1/credits"));
    CHECK(j["worker"].contains("last_contact_ms")); // the running worker answered, not the offline state
    CHECK(j["state"] == "sharing");
    CHECK(j["earnings"].is_null());
    CHECK(j["credits"].is_null());

    auto human = test::run_gpupool({"worker", "status", "--work-dir", wd});
    INFO(human.out << human.err);
    CHECK(human.exit_code == 1);
    CHECK_THAT(human.out, Catch::Contains("state       sharing") && Catch::Contains("terms       hours:"));
    CHECK_THAT(human.out, !Catch::Contains("of team")); // the team comes from the coordinator
    CHECK_THAT(human.err, Catch::Contains("error: could not connect"));
}

TEST_CASE("worker owner process: status of a worker too busy to answer says it runs and why, in valid JSON",
          "[worker-cli][owner]") {
    // A worker whose loop waits on the coordinator answers {"ok": false, "error": "... busy ..."}; status
    // read `state` out of that answer as if it were a status (undefined for a missing key: the soak
    // read `<discarded>` in the middle of the JSON, 2026-12-06).
    test::TempDir dir;
    test::CoordinatorProcess coord(dir.path());
    const auto url = coord.url();
    const auto [member, enroll] = member_and_enroll(url, coord.admin());
    const auto work = dir.path() / "w";
    const std::string wd = work.string();
    {
        test::WorkerProcess w(work, url, enroll);
        REQUIRE(eventually(
            [&] {
                return test::run_gpupool({"worker", "status", "--work-dir", wd}).exit_code == 0;
            },
            15s));
        w.signal(SIGTERM);
        REQUIRE(w.wait_exit(20s) == 0);
    }
    const std::string busy =
        "the worker is busy (its loop is waiting on the coordinator): nothing was changed; try again";
    auto server = worker::ControlServer::start(work, [&](const json&) { return json{{"ok", false}, {"error", busy}}; });
    REQUIRE(server.has_value());

    auto js = test::run_gpupool({"--json", "worker", "status", "--work-dir", wd});
    INFO(js.out << js.err);
    CHECK(js.exit_code == 0); // the coordinator answered: the earnings are there
    json j;
    REQUIRE_NOTHROW(j = json::parse(js.out));
    CHECK(j["state"].is_null());
    CHECK(j["worker"]["running"] == true);
    CHECK_THAT(j["worker"]["description"].get<std::string>(), Catch::Contains(busy));
    CHECK(j["earnings"]["worker"] == j["worker_id"]);

    auto human = test::run_gpupool({"worker", "status", "--work-dir", wd});
    INFO(human.out << human.err);
    CHECK(human.exit_code == 0);
    CHECK_THAT(human.out, Catch::Contains("worker      running, did not say more now: " + busy));
    CHECK_THAT(human.out, Catch::Contains("earned      0 today"));
}

TEST_CASE(
    "worker owner process: status, pause --for and --now, SIGHUP and reload, then the same with the worker stopped",
    "[worker-cli][owner]") {
    test::TempDir dir;
    test::CoordinatorProcess coord(dir.path());
    const auto url = coord.url();
    const auto [member, enroll] = member_and_enroll(url, coord.admin());
    const auto config = dir.write("worker.toml", "[share]\nmax_jobs = 2\nmax_runtime = \"1h\"\n"
                                                 "[[share.window]]\nfrom = \"00:00\"\nto = \"24:00\"\n");
    const auto work = dir.path() / "w";
    const std::string wd = work.string();
    test::WorkerProcess w(work, url, enroll, {"--config", config.string()});
    const auto id = submit(url, member, "sleep 60");
    REQUIRE(eventually([&] { return state_of(url, member, id) == "running"; }, 15s));

    auto status = test::run_gpupool({"worker", "status", "--work-dir", wd});
    INFO(status.out << status.err);
    REQUIRE(status.exit_code == 0);
    CHECK_THAT(status.out, Catch::Contains("state       sharing"));
    CHECK_THAT(status.out, Catch::Contains("job " + std::to_string(id) + " `long` (team fellows"));
    CHECK_THAT(status.out, Catch::Contains("the coordinator answered"));
    // This worker's own earnings, summed by the coordinator, with the UTC periods said; and its terms.
    CHECK_THAT(status.out, Catch::Contains("earned      0 today, 0 this week, 0 all time (this worker; days from "
                                           "00:00 UTC, weeks from Monday 00:00 UTC)"));
    CHECK_THAT(status.out, !Catch::Contains("recent earnings"));
    CHECK_THAT(status.out, Catch::Contains("terms       hours: every day 00:00-24:00") &&
                               Catch::Contains("teams: every team") && Catch::Contains("registries: any") &&
                               Catch::Contains("max jobs: 2") && Catch::Contains("max runtime: 1h"));
    auto admin_workers = test::run_gpupool({"--url", url, "--token", coord.admin(), "admin", "workers"});
    INFO(admin_workers.out << admin_workers.err);
    REQUIRE(admin_workers.exit_code == 0);
    CHECK_THAT(admin_workers.out, Catch::Contains("terms: hours: every day 00:00-24:00") &&
                                      Catch::Contains("teams: every team; registries: any; max jobs: 2; max "
                                                      "runtime: 1h"));

    auto pause = test::run_gpupool({"worker", "pause", "--work-dir", wd, "--for", "1h", "--why", "my run"});
    INFO(pause.out << pause.err);
    CHECK(pause.exit_code == 0);
    CHECK_THAT(pause.out, Catch::Contains("paused") && Catch::Contains("sharing again at"));
    auto js = test::run_gpupool({"--json", "worker", "status", "--work-dir", wd});
    REQUIRE(js.exit_code == 0);
    json j = json::parse(js.out);
    CHECK(j["state"] == "paused");
    CHECK(j["worker"]["pause"]["why"] == "my run");
    CHECK(j["worker"]["terms"]["max_runtime_s"] == 3600);
    CHECK(j["terms"]["max_jobs"] == 2);
    CHECK(j["earnings"]["worker"] == j["worker_id"]);
    CHECK(j["earnings"]["total_micro"] == 0);
    CHECK(state_of(url, member, id) == "running"); // a pause leaves the running job alone

    // SIGHUP re-reads the file.
    test::write_file(config, "[share]\nmax_jobs = 2\nteams = [\"fellows\", \"vision\"]\n");
    w.signal(SIGHUP);
    REQUIRE(eventually([&] { return w.stderr_text().find("reload: applied") != std::string::npos; }, 10s));
    j = json::parse(test::run_gpupool({"--json", "worker", "status", "--work-dir", wd}).out);
    CHECK(j["worker"]["terms"]["teams"] == json{"fellows", "vision"});
    CHECK(j["worker"]["terms"]["max_runtime_s"] == 0);
    // `worker reload` with a broken file says where, and changes nothing.
    test::write_file(config, "[share]\nmax_jobs = 2\nteams = \"fellows\"\n");
    auto bad = test::run_gpupool({"worker", "reload", "--work-dir", wd, "--config", config.string()});
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.err, Catch::Contains("worker.toml:3") && Catch::Contains("share.teams"));

    // pause --now hands the running job back: it queues again, and waits while paused.
    auto now = test::run_gpupool({"worker", "pause", "--work-dir", wd, "--now"});
    INFO(now.out << now.err);
    CHECK(now.exit_code == 0);
    CHECK_THAT(now.out, Catch::Contains("1 running job(s) are being handed back"));
    REQUIRE(eventually([&] { return state_of(url, member, id) == "queued"; }, 15s));
    std::this_thread::sleep_for(1s);
    CHECK(state_of(url, member, id) == "queued");

    w.signal(SIGTERM);
    REQUIRE(w.wait_exit(20s) == 0);
    // No worker: status says so and shows the pause kept in the file; resume still works for the next start.
    status = test::run_gpupool({"worker", "status", "--work-dir", wd});
    CHECK(status.exit_code == 0);
    CHECK_THAT(status.out, Catch::Contains("not running") && Catch::Contains("state       paused"));
    auto resume = test::run_gpupool({"worker", "resume", "--work-dir", wd});
    CHECK(resume.exit_code == 0);
    CHECK_THAT(resume.out, Catch::Contains("no worker is running") && Catch::Contains("it shares when it starts"));
    auto reload = test::run_gpupool({"worker", "reload", "--work-dir", wd});
    CHECK(reload.exit_code == 1);
    CHECK_THAT(reload.err, Catch::Contains("worker.toml is read when the worker starts"));
    // A start with a broken worker.toml stops at once, naming the line.
    auto broken = test::run_gpupool({"--url", url, "worker", "--share", "--runtime", "process",
                                     "--unsafe-process-runtime", "--work-dir", wd, "--config", config.string()});
    CHECK(broken.exit_code == 2);
    CHECK_THAT(broken.err, Catch::Contains("worker.toml:3"));
}

} // namespace test_worker_owner_cli
} // namespace
