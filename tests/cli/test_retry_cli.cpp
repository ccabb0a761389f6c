// `gpupool retry` on real processes (a coordinator on a SQLite file, a worker with the process
// runtime): a sweep with a job that fails until a file exists, retried with --sweep ID --failed,
// then succeeds; `status` shows both attempts; and the refusals, each with its reason.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/funded_pool.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_retry_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

recipe::JobSpec script_job(const std::string& name, const std::string& script, std::int64_t index) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {script};
    s.shell = true;
    s.resources.cpu_milli = 1000;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 600;
    s.sweep_index = index;
    return s;
}

json submit(const std::string& url, const std::string& member, const std::vector<recipe::JobSpec>& specs) {
    auto c = test::http_client(url, member);
    const json body = {{"source", "retry.toml"}, {"jobs", json::parse(recipe::to_json(specs).dump())}};
    auto r = c.request("POST", "/v1/jobs", body.dump());
    REQUIRE(r);
    REQUIRE(r->status == 201);
    return json::parse(r->body);
}

} // namespace

TEST_CASE("retry CLI: a sweep's failed job runs again and succeeds, both attempts in status, and refusals say why",
          "[retry-cli][worker-cli]") {
    test::TempDir dir;
    test::FundedPool pool(dir.path());
    const std::string& url = pool.url;
    const std::string& fellow = pool.fellow;
    const std::string& owner = pool.owner;
    const std::string& enroll = pool.enroll;
    auto as = [&](const std::string& who, std::vector<std::string> args) { return pool.as(who, std::move(args)); };

    // The second job fails (exit 4) until the flag file exists.
    const fs::path flag = dir.path() / "flag";
    const json sweep =
        submit(url, fellow,
               {script_job("fine", "sleep 1; echo fine", 0),
                script_job("needs-flag",
                           "if [ -e '" + flag.string() + "' ]; then echo found; else echo missing; exit 4; fi", 1)});
    const std::string sweep_id = std::to_string(sweep["sweep_id"].get<std::int64_t>());
    const std::string fine = std::to_string(sweep["jobs"][0].get<std::int64_t>());
    const std::string flaky = std::to_string(sweep["jobs"][1].get<std::int64_t>());
    test::WorkerProcess worker(dir.path() / "w", url, enroll);
    auto waited = as(fellow, {"wait", "--sweep", sweep_id});
    INFO(waited.out << waited.err);
    REQUIRE(waited.exit_code == 1);

    // Refused: a job that succeeded, another team's sweep, a job still running; usage errors.
    auto done = as(fellow, {"retry", fine});
    CHECK(done.exit_code == 1);
    CHECK_THAT(done.err, Catch::Contains("job " + fine + " succeeded: only failed or cancelled jobs are retried"));
    auto theirs = as(owner, {"retry", "--sweep", sweep_id, "--failed"});
    CHECK(theirs.exit_code == 1);
    CHECK_THAT(theirs.err, Catch::Contains("no sweep " + sweep_id));
    CHECK(as(fellow, {"retry"}).exit_code == 2);
    CHECK(as(fellow, {"retry", flaky, "--sweep", sweep_id}).exit_code == 2);
    CHECK(as(fellow, {"retry", flaky, "--failed"}).exit_code == 2);
    const json slow = submit(url, fellow, {script_job("slow", "sleep 60", 0)});
    const std::string slow_id = std::to_string(slow["jobs"][0].get<std::int64_t>());
    std::string state;
    for (int i = 0; i < 200 && state != "running"; ++i) {
        auto s = as(fellow, {"--json", "status", slow_id});
        REQUIRE(s.exit_code == 0);
        state = json::parse(s.out)["state"];
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    REQUIRE(state == "running");
    auto running = as(fellow, {"retry", slow_id});
    CHECK(running.exit_code == 1);
    CHECK_THAT(running.err,
               Catch::Contains("job " + slow_id + " is running: only failed or cancelled jobs are retried"));
    REQUIRE(as(fellow, {"cancel", slow_id}).exit_code == 0);

    // Over the team's budget: refused as a submission would be, nothing queued.
    REQUIRE(as(pool.coord.admin(), {"admin", "budget", "fellows", "--day", "0.000001"}).exit_code == 0);
    auto poor = as(fellow, {"retry", "--sweep", sweep_id, "--failed"});
    CHECK(poor.exit_code == 1);
    CHECK_THAT(poor.err,
               Catch::Contains("this retry (1 job) is estimated at") && Catch::Contains("`fellows`'s budget allows"));
    auto still = as(fellow, {"--json", "status", flaky});
    CHECK(json::parse(still.out)["state"] == "failed");
    REQUIRE(as(pool.coord.admin(), {"admin", "budget", "fellows", "--day", "none"}).exit_code == 0);

    // The flag now exists: the retry succeeds.
    std::ofstream(flag) << "x";
    auto retried = as(fellow, {"retry", "--sweep", sweep_id, "--failed", "--wait"});
    INFO(retried.out << retried.err);
    CHECK(retried.exit_code == 0);
    CHECK_THAT(retried.out, Catch::Contains("job " + flaky + " queued again (retry 1)") &&
                                Catch::Contains("1 succeeded, 0 did not"));

    auto status = as(fellow, {"status", flaky});
    CHECK(status.exit_code == 0);
    CHECK_THAT(status.out, Catch::Contains("): succeeded") && Catch::Contains("retried 1 time") &&
                               Catch::Contains("succeeded (retry 1)") && Catch::Contains("failed"));
    auto shown = json::parse(as(fellow, {"--json", "status", flaky}).out);
    REQUIRE(shown["attempt_history"].size() == 2);
    CHECK(shown["attempt_history"][0]["state"] == "failed");
    CHECK(shown["attempt_history"][0]["exit_code"] == 4);
    CHECK(shown["attempt_history"][0]["retry"] == 0);
    CHECK(shown["attempt_history"][1]["state"] == "succeeded");
    CHECK(shown["attempt_history"][1]["retry"] == 1);
    CHECK(shown["retries"] == 1);
    CHECK_THAT(as(fellow, {"logs", flaky}).out, Catch::Contains("found"));
    // The first job was left alone: one attempt.
    CHECK(json::parse(as(fellow, {"--json", "status", fine}).out)["attempt_history"].size() == 1);
    // Nothing failed is left in the sweep.
    auto none_left = as(fellow, {"retry", "--sweep", sweep_id});
    CHECK(none_left.exit_code == 1);
    CHECK_THAT(none_left.err, Catch::Contains("sweep " + sweep_id + " has no failed jobs to retry"));
}

} // namespace test_retry_cli
} // namespace
