// A pool restored from a backup, through the real binary: its workers are offline and their
// attempts unconfirmed until each worker reports in (the restore is recorded in the copy, so a
// coordinator that starts on it later, after --restore-only, knows it too); and a pool held by a
// running coordinator is one exit code, 1, for every command that needs it (CONTRIBUTING.md).
#include "tests/cli/cli_calls.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/funded_pool.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_restore_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json worker_row(const std::string& url, const std::string& admin, std::int64_t id) {
    const json all = test::ok_json(test::run_gpupool({"--url", url, "--token", admin, "--json", "admin", "workers"}));
    for (const auto& w : all["workers"]) {
        if (w["id"] == id) {
            return w;
        }
    }
    FAIL("no worker " << id);
    return {};
}

json attempt_of(const std::string& url, const std::string& token, std::int64_t job) {
    const json v =
        test::ok_json(test::run_gpupool({"--url", url, "--token", token, "--json", "status", std::to_string(job)}));
    REQUIRE(v["attempt_history"].size() == 1);
    return v["attempt_history"][0];
}

} // namespace

TEST_CASE("coordinator --restore: workers offline and attempts unconfirmed until each worker reports in",
          "[coordinator-cli][ops][restore]") {
    test::TempDir dir;
    const fs::path first = dir.path() / "first";
    fs::create_directories(first);
    std::string admin;
    std::string worker_token;
    std::int64_t worker_id = 0;
    std::int64_t job = 0;
    std::string fellow;
    const fs::path backup = dir.path() / "pool-backup.db";
    {
        test::FundedPool p(first);
        admin = p.coord.admin();
        fellow = p.fellow;
        auto e = test::http_client(p.url, p.enroll);
        const json inventory = {{"cpu_milli", 4000},
                                {"memory_mib", 8192},
                                {"gpus", json::array({{{"index", 0}, {"model", "L4"}, {"memory_mib", 24576}}})}};
        auto reg =
            e.request("POST", "/v1/workers/register", json{{"name", "lab-box"}, {"inventory", inventory}}.dump());
        REQUIRE(reg);
        REQUIRE(reg->status == 201);
        worker_token = json::parse(reg->body)["token"];
        worker_id = json::parse(reg->body)["worker_id"];
        recipe::JobSpec spec;
        spec.name = "eval";
        spec.image = "busybox";
        spec.command = {"true"};
        spec.resources.gpus = 1;
        spec.resources.gpu_milli = 1000;
        spec.resources.cpu_milli = 100;
        spec.resources.memory_mib = 64;
        auto m = test::http_client(p.url, p.fellow);
        auto sub = m.request("POST", "/v1/jobs",
                             json{{"source", "eval.toml"},
                                  {"jobs", json::parse(recipe::to_json(std::vector<recipe::JobSpec>{spec}).dump())}}
                                 .dump());
        REQUIRE(sub);
        INFO(sub->body);
        REQUIRE(sub->status == 201);
        job = json::parse(sub->body)["jobs"][0];
        auto w = test::http_client(p.url, worker_token);
        REQUIRE(w.request("POST", "/v1/workers/heartbeat", R"({"running":[]})"));
        auto polled = w.request("POST", "/v1/workers/poll?wait_ms=3000", "{}");
        REQUIRE(polled);
        REQUIRE(json::parse(polled->body)["assignments"].size() == 1);
        const std::int64_t attempt = json::parse(polled->body)["assignments"][0]["attempt"];
        REQUIRE(w.request("POST", "/v1/attempts/" + std::to_string(attempt) + "/start", "{}")->status == 200);
        // The live pool: online, its attempt confirmed.
        CHECK(worker_row(p.url, admin, worker_id)["presence"] == "online");
        CHECK(attempt_of(p.url, p.fellow, job)["unconfirmed"] == false);
        REQUIRE(p.as(admin, {"admin", "backup", backup.string()}).exit_code == 0);
        CHECK(p.coord.terminate_and_wait() == 0);
    }

    // Restored (a service's way: --restore-only, then a plain start): as of the backup, unconfirmed.
    const fs::path second = dir.path() / "second";
    fs::create_directories(second);
    REQUIRE(test::run_gpupool(
                {"coordinator", "--db", (second / "pool.db").string(), "--restore", backup.string(), "--restore-only"})
                .exit_code == 0);
    test::CoordinatorProcess restored(second);
    const std::string url = restored.url();
    const json row = worker_row(url, admin, worker_id);
    CHECK(row["presence"] == "offline");
    auto text = test::run_gpupool({"--url", url, "--token", admin, "admin", "workers"});
    CHECK_THAT(text.out, Catch::Contains("lab-box") && Catch::Contains("offline since"));
    const json attempt = attempt_of(url, fellow, job);
    CHECK(attempt["state"] == "running");
    CHECK(attempt["unconfirmed"] == true);
    auto status = test::run_gpupool({"--url", url, "--token", fellow, "status", std::to_string(job)});
    CHECK_THAT(status.out, Catch::Contains("running (unconfirmed)") &&
                               Catch::Contains("restored from a backup and worker " + std::to_string(worker_id)));
    const json pool = test::ok_json(test::run_gpupool({"--url", url, "--token", admin, "--json", "pool"}));
    CHECK(pool["totals"]["workers_online"] == 0);
    const json audit =
        test::ok_json(test::run_gpupool({"--url", url, "--token", admin, "--json", "admin", "audit", "--action", "pool."}));
    REQUIRE(audit.size() >= 1);
    CHECK(audit[0]["action"] == "pool.restore");

    // The worker reports in (its token came back with the pool): online, its attempt confirmed.
    auto w = test::http_client(url, worker_token);
    const std::int64_t attempt_id = attempt["id"];
    auto beat = w.request("POST", "/v1/workers/heartbeat", json{{"running", {attempt_id}}}.dump());
    REQUIRE(beat);
    REQUIRE(beat->status == 200);
    CHECK(worker_row(url, admin, worker_id)["presence"] == "online");
    CHECK(attempt_of(url, fellow, job)["unconfirmed"] == false);
    CHECK_THAT(test::run_gpupool({"--url", url, "--token", fellow, "status", std::to_string(job)}).out,
               !Catch::Contains("unconfirmed"));
}

TEST_CASE("a pool held by a running coordinator: every command that needs it exits 1", "[coordinator-cli][ops]") {
    test::TempDir dir;
    test::CoordinatorProcess coord(dir.path());
    const std::string db = (dir.path() / "pool.db").string();
    const fs::path backup = dir.path() / "backup.db";
    REQUIRE(test::run_gpupool({"--url", coord.url(), "--token", coord.admin(), "admin", "backup", backup.string()})
                .exit_code == 0);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"coordinator", "--db", db, "--restore", backup.string(), "--restore-only"},
          std::vector<std::string>{"coordinator", "--db", db, "--restore", backup.string(), "--force-restore",
                                   "--restore-only"},
          std::vector<std::string>{"coordinator", "--db", db, "--new-admin-token"},
          std::vector<std::string>{"coordinator", "--listen", "127.0.0.1:0", "--db", db},
          std::vector<std::string>{"admin", "migrate", "--from", db, "--to", (dir.path() / "copy.db").string()}}) {
        auto r = test::run_gpupool(args);
        INFO(args[0] << " " << args[1] << " ... " << args.back() << ": " << r.err);
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains("another gpupool coordinator is using") && Catch::Contains("stop it first"));
    }
    CHECK(coord.running());
}

} // namespace test_restore_cli
} // namespace
