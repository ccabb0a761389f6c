// The ops team's commands against a real `gpupool coordinator` process: `pool` (the pool at a glance),
// `admin audit`, `admin backup`, and `coordinator --restore` onto a new machine's path.
#include "tests/cli/cli_calls.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/store/sqlite_store.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_ops_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Jobs in a stopped pool's database.
std::size_t store_jobs(const fs::path& db) {
    store::SqliteOptions o;
    o.create = false;
    auto s = store::SqliteStore::open(db, o);
    REQUIRE(s);
    return (*s)->load().value().jobs.size();
}

recipe::JobSpec quarter(const std::string& name) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"true"};
    s.resources.gpus = 1;
    s.resources.gpu_milli = 250;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    return s;
}

} // namespace

TEST_CASE("coordinator process: pool overview, audit log, backup and restore through the CLI",
          "[coordinator-cli][ops]") {
    test::TempDir dir;
    const fs::path first = dir.path() / "first";
    fs::create_directories(first);
    auto coord = std::make_unique<test::CoordinatorProcess>(first);
    const std::string url = coord->url();
    const std::string admin = coord->admin();
    const std::vector<std::string> as_admin{"--url", url, "--token", admin};
    auto gp = [](std::vector<std::string> who, std::vector<std::string> args) {
        who.insert(who.end(), args.begin(), args.end());
        return test::run_gpupool(who);
    };
    for (const char* team : {"fellows", "others", "owners"}) {
        REQUIRE(gp(as_admin, {"admin", "team", "create", team}).exit_code == 0);
    }
    REQUIRE(gp(as_admin, {"admin", "grant", "fellows", "100", "--note", "cohort 3"}).exit_code == 0);
    const std::string member =
        test::ok_json(gp(as_admin, {"--json", "admin", "token", "create", "--team", "fellows", "--label", "alice"}))["token"];
    const std::string other =
        test::ok_json(gp(as_admin, {"--json", "admin", "token", "create", "--team", "others"}))["token"];
    const std::string enroll = test::ok_json(gp(as_admin, {"--json", "admin", "enroll", "owners"}))["token"];

    // A worker with one GPU takes four quarter-GPU jobs; the fifth waits.
    auto e = test::http_client(url, enroll);
    const json inventory = {{"cpu_milli", 16000},
                            {"memory_mib", 65536},
                            {"gpus", json::array({{{"index", 0}, {"model", "L4"}, {"memory_mib", 24576}}})}};
    auto reg = e.request("POST", "/v1/workers/register", json{{"name", "lab-box"}, {"inventory", inventory}}.dump());
    REQUIRE(reg);
    REQUIRE(reg->status == 201);
    auto w = test::http_client(url, json::parse(reg->body)["token"]);
    std::vector<recipe::JobSpec> specs;
    for (int i = 1; i <= 5; ++i) {
        specs.push_back(quarter("eval-" + std::to_string(i)));
    }
    auto m = test::http_client(url, member);
    auto sub = m.request("POST", "/v1/jobs",
                         json{{"source", "eval.toml"}, {"jobs", json::parse(recipe::to_json(specs).dump())}}.dump());
    REQUIRE(sub);
    REQUIRE(sub->status == 201);
    REQUIRE(w.request("POST", "/v1/workers/heartbeat", R"({"running":[]})"));
    auto polled = w.request("POST", "/v1/workers/poll?wait_ms=3000", "{}");
    REQUIRE(polled);
    REQUIRE(json::parse(polled->body)["assignments"].size() == 4);

    // The pool at a glance: admins see everything.
    auto text = gp(as_admin, {"pool"});
    INFO(text.out << text.err);
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.out,
               Catch::Contains("1 of 1 workers online") && Catch::Contains("1.00 of 1.00 GPUs given out (100%)") &&
                   Catch::Contains("1 GPUs shared by several jobs") && Catch::Contains("4 running, 1 queued"));
    CHECK_THAT(text.out, Catch::Contains("lab-box") && Catch::Contains("L4") && Catch::Contains("eval-5") &&
                             Catch::Contains("WHY IT WAITS") && Catch::Contains("alice"));
    const json all = test::ok_json(gp(as_admin, {"--json", "pool"}));
    CHECK(all["running"].size() == 4);
    CHECK(all["running"][0]["worker_name"] == "lab-box");
    CHECK(all["running"][0]["gpu_milli"] == 250);
    REQUIRE(all["queued"].size() == 1);
    CHECK_FALSE(all["queued"][0]["why"].get<std::string>().empty());
    CHECK(all["workers"][0]["gpus"][0]["allocated_milli"] == 1000);
    CHECK(all["workers"][0]["gpus"][0]["jobs"] == 4);
    CHECK(all["credits"].size() == 3);
    // A member of another team sees the pool's capacity, not fellows' work or credits.
    const json theirs = test::ok_json(gp({"--url", url, "--token", other}, {"--json", "pool"}));
    CHECK(theirs["running"].empty());
    CHECK(theirs["queued"].empty());
    CHECK(theirs["totals"]["gpu_milli_allocated"] == 1000);
    REQUIRE(theirs["credits"].size() == 1);
    CHECK(theirs["credits"][0]["team"] == "others");
    auto worker_view = gp({"--url", url, "--token", json::parse(reg->body)["token"]}, {"pool"});
    CHECK(worker_view.exit_code == 1);

    // The audit log: each admin action, who did it, newest first.
    auto audit = gp(as_admin, {"admin", "audit"});
    REQUIRE(audit.exit_code == 0);
    CHECK_THAT(audit.out, Catch::Contains("credits.grant") && Catch::Contains("team `fellows`") &&
                              Catch::Contains("first admin (token 1)") && Catch::Contains("cohort 3") &&
                              Catch::Contains("this machine"));
    const json grants = test::ok_json(gp(as_admin, {"--json", "admin", "audit", "--action", "credits."}));
    REQUIRE(grants.size() == 1);
    CHECK(grants[0]["detail"]["amount_micro"] == 100'000'000);
    CHECK(gp({"--url", url, "--token", member}, {"admin", "audit"}).exit_code == 1);

    // A backup while it serves; never over a file without --force; not for members.
    const fs::path backup = dir.path() / "pool-backup.db";
    auto taken = gp(as_admin, {"admin", "backup", backup.string()});
    INFO(taken.err);
    REQUIRE(taken.exit_code == 0);
    CHECK_THAT(taken.out, Catch::Contains("integrity checked"));
    CHECK((fs::status(backup).permissions() & fs::perms::group_read) == fs::perms::none);
    auto again = gp(as_admin, {"admin", "backup", backup.string()});
    CHECK(again.exit_code == 2);
    CHECK_THAT(again.err, Catch::Contains("--force"));
    CHECK(gp(as_admin, {"admin", "backup", "--force", backup.string()}).exit_code == 0);
    const fs::path stolen = dir.path() / "stolen.db";
    CHECK(gp({"--url", url, "--token", member}, {"admin", "backup", stolen.string()}).exit_code == 1);
    CHECK_FALSE(fs::exists(stolen));
    CHECK_FALSE(fs::exists(stolen.string() + ".partial"));

    // The first pool goes on after the backup; restoring the backup over it is refused.
    REQUIRE(gp(as_admin, {"admin", "grant", "others", "5"}).exit_code == 0);
    CHECK(coord->terminate_and_wait() == 0);
    coord.reset();
    auto refused = test::run_gpupool(
        {"coordinator", "--listen", "127.0.0.1:0", "--db", (first / "pool.db").string(), "--restore", backup.string()});
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("changed after the backup") && Catch::Contains("--force-restore"));

    // --restore-only puts it in place and exits (a service restores while stopped).
    const fs::path third = dir.path() / "third";
    fs::create_directories(third);
    auto only = test::run_gpupool(
        {"coordinator", "--db", (third / "pool.db").string(), "--restore", backup.string(), "--restore-only"});
    CHECK(only.exit_code == 0);
    CHECK(store_jobs(third / "pool.db") == 5);
    CHECK(test::run_gpupool({"coordinator", "--db", (third / "x.db").string(), "--restore-only"}).exit_code == 2);

    // On a new machine's path it restores: the same tokens, teams, jobs and credits.
    const fs::path second = dir.path() / "second";
    fs::create_directories(second);
    test::CoordinatorProcess restored(second, {"--restore", backup.string()});
    CHECK(restored.admin().empty()); // the pool has its admin already: no new token printed
    const json jobs = test::ok_json(test::run_gpupool({"--url", restored.url(), "--token", member, "--json", "jobs"}));
    CHECK(jobs["jobs"].size() == 5);
    const json credits = test::ok_json(test::run_gpupool({"--url", restored.url(), "--token", admin, "--json", "pool"}));
    CHECK(credits["credits"].size() == 3);
    const json audit_after = test::ok_json(test::run_gpupool(
        {"--url", restored.url(), "--token", admin, "--json", "admin", "audit", "--action", "credits."}));
    CHECK(audit_after.size() == 1); // the grant to `others` came after the backup
}

} // namespace test_ops_cli
} // namespace
