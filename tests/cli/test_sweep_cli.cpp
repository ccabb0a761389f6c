// A whole sweep through the CLI on real processes (coordinator, worker with the process runtime):
// `wait`, `logs` and `fetch` with --sweep, and the credit history in the team's words.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/funded_pool.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_sweep_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Submits one sweep of shell jobs (name -> script) as `member`; returns {sweep_id, jobs}.
json submit_scripts(const std::string& url, const std::string& member,
                    const std::vector<std::pair<std::string, std::string>>& scripts) {
    std::vector<recipe::JobSpec> specs;
    for (const auto& [name, script] : scripts) {
        recipe::JobSpec s;
        s.name = name;
        s.image = "localhost/gpupool/busybox:latest";
        s.command = {script};
        s.shell = true;
        s.resources.cpu_milli = 2000; // two cores for a second or two: a charge of some micro-credits
        s.resources.memory_mib = 64;
        s.resources.max_runtime_s = 60;
        s.sweep_index = static_cast<std::int64_t>(specs.size());
        specs.push_back(s);
    }
    auto c = test::http_client(url, member);
    const json body = {{"source", "t.toml"}, {"max_parallel", 0}, {"jobs", json::parse(recipe::to_json(specs).dump())}};
    auto r = c.request("POST", "/v1/jobs", body.dump());
    REQUIRE(r);
    REQUIRE(r->status == 201);
    return json::parse(r->body);
}

} // namespace

TEST_CASE("sweep CLI: wait, logs and fetch take --sweep, and credits show one row per job with earnings as earnings",
          "[sweep-cli][worker-cli]") {
    test::TempDir dir;
    test::FundedPool pool(dir.path());
    const std::string& url = pool.url;
    auto& admin = pool.admin;
    const std::string& fellow = pool.fellow;
    const std::string& owner = pool.owner;
    const std::string& enroll = pool.enroll;
    auto as = [&](const std::string& who, std::vector<std::string> args) { return pool.as(who, std::move(args)); };

    auto submitted =
        as(fellow, {"--json", "submit", (test::source_dir() / "recipes/hello-sweep/recipe.toml").string()});
    REQUIRE(submitted.exit_code == 0);
    const std::string sweep = std::to_string(json::parse(submitted.out)["sweep_id"].get<std::int64_t>());
    test::WorkerProcess worker(dir.path() / "w", url, enroll);

    // How many times the coordinator was asked for one job (its request counter on /metrics).
    auto single_job_reads = [&] {
        auto m = admin.request("GET", "/metrics", "");
        REQUIRE(m);
        REQUIRE(m->status == 200);
        const std::string key = R"(gpupool_http_requests_total{code="200",method="GET",route="/v1/jobs/{id}"} )";
        const auto at = m->body.find(key);
        return at == std::string::npos ? 0LL : std::stoll(m->body.substr(at + key.size()));
    };
    const auto reads_before = single_job_reads();
    auto waited = as(fellow, {"wait", "--sweep", sweep});
    INFO(waited.err);
    CHECK(waited.exit_code == 0);
    CHECK_THAT(waited.out, Catch::Contains("hello-hola-2: succeeded") && Catch::Contains("hello-hello-1: succeeded"));
    // The lines come from the sweep's listing and the coordinator's wait answer: no request per job.
    CHECK(single_job_reads() == reads_before);

    auto logs = as(fellow, {"logs", "--sweep", sweep});
    CHECK(logs.exit_code == 0);
    CHECK_THAT(logs.out, Catch::Contains("==> hello-bonjour-1 (job ") && Catch::Contains("bonjour from job"));
    auto followed = as(fellow, {"logs", "--sweep", sweep, "-f"});
    CHECK(followed.exit_code == 0);
    CHECK_THAT(followed.out, Catch::Contains("hello-bonjour-2 | bonjour from job") &&
                                 Catch::Contains("hello-hello-1   | hello from job"));
    CHECK_THAT(followed.err, Catch::Contains("-- hello-hola-1 (job ") && Catch::Contains(") succeeded --"));

    const fs::path out = dir.path() / "results";
    auto fetched = as(fellow, {"fetch", "--sweep", sweep, out.string()});
    CHECK(fetched.exit_code == 0);
    CHECK_THAT(test::slurp(out / "hello-hola-2" / "hello.txt"), Catch::Contains("hola from job"));
    CHECK_THAT(fetched.out, Catch::Contains("fetched 6 of 6 jobs"));
    CHECK(as(fellow, {"fetch", "--sweep", "999"}).exit_code == 1);
    CHECK(as(fellow, {"wait", "12", "--sweep", sweep}).exit_code == 2);

    // A sweep with a failing job, followed while it runs: each line under its job's name, exit 1.
    const json second =
        submit_scripts(url, fellow, {{"ok", "sleep 1; echo fine"}, {"bad", "sleep 1; echo broken; exit 3"}});
    auto live = as(fellow, {"logs", "--sweep", std::to_string(second["sweep_id"].get<std::int64_t>()), "-f"});
    CHECK(live.exit_code == 1);
    CHECK_THAT(live.out, Catch::Contains("ok  | fine") && Catch::Contains("bad | broken"));
    CHECK_THAT(live.err, Catch::Contains("-- bad (job ") && Catch::Contains(") failed --"));

    // Credits: the paying team sees one charged row per job; the owners see earnings (settling).
    auto paid = as(fellow, {"credits", "--limit", "100"});
    CHECK(paid.exit_code == 0);
    CHECK_THAT(paid.out, Catch::Contains("hello-hola-2: charged") && Catch::Contains("+1000") &&
                             !Catch::Contains("hold") && !Catch::Contains("release"));
    auto ledger = as(fellow, {"credits", "--ledger", "--limit", "100"});
    CHECK_THAT(ledger.out, Catch::Contains("hold") && Catch::Contains("release") && Catch::Contains("escrow"));
    auto earned = as(owner, {"credits", "--limit", "100"});
    CHECK(earned.exit_code == 0);
    CHECK_THAT(earned.out, Catch::Contains("earned from team fellows's job") && Catch::Contains("(settling") &&
                               !Catch::Contains("hello-")); // another team's job names are not shown
}

} // namespace test_sweep_cli
} // namespace
