// `gpupool fetch` against a hostile worker: a real coordinator process, a "worker" that is this test
// speaking the worker API and uploading a hand-made outputs archive, and the real gpupool binary
// fetching it into DIR/<job name>/ next to a canary directory that must not change.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/processes.hpp"
#include "tests/security/tar_builder.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_fetch_hostile {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {


// A pool with one member and one registered worker whose uploads the test writes itself.
struct HostilePool {
    test::TempDir dir;
    test::CoordinatorProcess coord{dir.path()};
    std::string url = coord.url();
    std::string member;
    std::string worker;

    HostilePool() {
        auto admin = test::http_client(url, coord.admin());
        test::expect_call(admin, "POST", "/v1/admin/teams", R"({"name": "fellows"})", 201);
        test::expect_call(admin, "POST", "/v1/admin/grants", R"({"team": "fellows", "amount_micro": 1000000000})", 201);
        member = test::expect_call(admin, "POST", "/v1/admin/tokens", R"({"role": "member", "team": "fellows"})", 201)["token"];
        const std::string enroll =
            test::expect_call(admin, "POST", "/v1/admin/tokens", R"({"role": "enroll", "team": "fellows"})", 201)["token"];
        auto e = test::http_client(url, enroll);
        const json inventory = {{"cpu_milli", 4000}, {"memory_mib", 8192}, {"gpus", json::array()}};
        worker = test::expect_call(e, "POST", "/v1/workers/register", json{{"name", "hostile"}, {"inventory", inventory}}.dump(),
                      201)["token"];
        auto w = test::http_client(url, worker);
        test::expect_call(w, "POST", "/v1/workers/heartbeat", R"({"running": []})", 200);
    }

    // Submits one sweep of jobs with these names; returns the answer ({sweep_id, jobs}).
    json submit_sweep(const std::vector<std::string>& names) {
        std::vector<recipe::JobSpec> specs;
        for (const auto& name : names) {
            recipe::JobSpec s;
            s.name = name;
            s.image = "busybox";
            s.command = {"true"};
            s.resources.cpu_milli = 100;
            s.resources.memory_mib = 64;
            s.sweep_index = static_cast<std::int64_t>(specs.size());
            specs.push_back(s);
        }
        auto m = test::http_client(url, member);
        const json body = {{"source", "t.toml"}, {"max_parallel", 0}, {"jobs", json::parse(recipe::to_json(specs).dump())}};
        return test::expect_call(m, "POST", "/v1/jobs", body.dump(), 201);
    }

    // Submits a job; returns its id.
    std::int64_t submit() { return submit_sweep({"victim"})["jobs"][0]; }

    // Takes every submitted job as the worker and completes those `outputs` has an archive for (by
    // job id) after uploading it; the others stay running.
    void deliver_each(const std::map<std::int64_t, std::string>& outputs, std::size_t expected) {
        auto w = test::http_client(url, worker);
        const json polled = test::expect_call(w, "POST", "/v1/workers/poll?wait_ms=3000", "{}", 200);
        REQUIRE(polled["assignments"].size() == expected);
        for (const auto& a : polled["assignments"]) {
            const std::string attempt = std::to_string(a["attempt"].get<std::int64_t>());
            test::expect_call(w, "POST", "/v1/attempts/" + attempt + "/start", "{}", 200);
            auto it = outputs.find(a["job"].get<std::int64_t>());
            if (it != outputs.end()) {
                test::expect_call(w, "PUT", "/v1/attempts/" + attempt + "/outputs", it->second, 200);
                test::expect_call(w, "POST", "/v1/attempts/" + attempt + "/complete", R"({"exit_code": 0})", 200);
            }
        }
    }

    // Takes the submitted job as the worker, uploads `outputs` and completes it.
    void deliver(const std::string& outputs) {
        auto w = test::http_client(url, worker);
        const json polled = test::expect_call(w, "POST", "/v1/workers/poll?wait_ms=3000", "{}", 200);
        REQUIRE(polled["assignments"].size() == 1);
        const std::string attempt = std::to_string(polled["assignments"][0]["attempt"].get<std::int64_t>());
        test::expect_call(w, "POST", "/v1/attempts/" + attempt + "/start", "{}", 200);
        test::expect_call(w, "PUT", "/v1/attempts/" + attempt + "/outputs", outputs, 200);
        test::expect_call(w, "POST", "/v1/attempts/" + attempt + "/complete", R"({"exit_code": 0})", 200);
    }
};

// Everything under `root` that is not under `skip`, with file contents and link targets.
std::map<std::string, std::string> listing(const fs::path& root, const fs::path& skip) {
    std::map<std::string, std::string> out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
        if (it->path() == skip) {
            it.disable_recursion_pending();
            continue;
        }
        const auto rel = it->path().lexically_relative(root).string();
        out[rel] = it->is_symlink() ? "link " + fs::read_symlink(it->path()).string()
                   : it->is_directory() ? "dir"
                                        : "file " + test::slurp(it->path());
    }
    return out;
}

} // namespace

TEST_CASE("gpupool fetch: a hostile worker's outputs cannot write outside DIR/<job name>", "[archive][security][cli]") {
    HostilePool pool;
    test::TempDir sandbox;
    const fs::path fetched = sandbox.path() / "fetched";
    fs::create_directories(sandbox.path() / "canary");
    std::ofstream(sandbox.path() / "canary" / "victim") << "canary\n";
    const auto fetch = [&](std::int64_t id) {
        return test::run_gpupool({"--url", pool.url, "--token", pool.member, "fetch", std::to_string(id),
                                  fetched.string()});
    };

    SECTION("the link chain from the report: its links are skipped with a warning, the file stays inside") {
        const auto id = pool.submit();
        const fs::path dest = fetched / "victim";
        const auto depth = static_cast<std::size_t>(std::distance(dest.begin(), dest.end()));
        std::string chain;
        std::string up;
        for (std::size_t i = 0; i < depth; ++i) {
            chain += "a/b/";
            up += "../";
        }
        const auto before = listing(sandbox.path(), fetched);
        pool.deliver(test::make_tar({test::tar_symlink("a/b", ".."), test::tar_symlink(chain + "L", up),
                                     test::tar_file("L" + (sandbox.path() / "canary" / "pwned").string(), "pwned\n")}));
        auto r = fetch(id);
        INFO(r.err);
        CHECK(r.exit_code == 0);
        CHECK_THAT(r.err, Catch::Contains("warning: skipped a/b: link to `..`"));
        CHECK_THAT(r.err, Catch::Contains("warning: skipped " + chain + "L: "));
        CHECK(listing(sandbox.path(), fetched) == before);
        CHECK_FALSE(fs::exists(sandbox.path() / "canary" / "pwned"));
    }
    SECTION("a file below a link is refused: exit 1, the entry named") {
        const auto before = listing(sandbox.path(), fetched);
        const auto id = pool.submit();
        pool.deliver(test::make_tar({test::tar_dir("d"), test::tar_symlink("l", "d"), test::tar_file("l/f", "x")}));
        auto r = fetch(id);
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains("`l/f`"));
        CHECK(listing(sandbox.path(), fetched) == before);
    }
    SECTION("a name with .. is refused: exit 1, the entry named") {
        const auto before = listing(sandbox.path(), fetched);
        const auto id = pool.submit();
        pool.deliver(test::make_tar({test::tar_file("../canary/pwned", "pwned\n")}));
        auto r = fetch(id);
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains("`../canary/pwned`"));
        CHECK(listing(sandbox.path(), fetched) == before);
        CHECK(test::slurp(sandbox.path() / "canary" / "victim") == "canary\n");
    }
}

TEST_CASE("gpupool fetch --sweep: each job into DIR/<its name>/, hostile names kept inside, the missing ones named",
          "[archive][security][cli]") {
    HostilePool pool;
    test::TempDir sandbox;
    const fs::path fetched = sandbox.path() / "fetched";
    const json sweep = pool.submit_sweep({"../escape", "eval-n0", "eval-n0", "slow"});
    const std::vector<std::int64_t> ids = sweep["jobs"];
    const std::string id = std::to_string(sweep["sweep_id"].get<std::int64_t>());
    pool.deliver_each({{ids[0], test::make_tar({test::tar_file("f", "0")})},
                       {ids[1], test::make_tar({test::tar_file("f", "1")})},
                       {ids[2], test::make_tar({test::tar_file("f", "2")})}},
                      4);
    auto fetch = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"--url", pool.url, "--token", pool.member, "fetch", "--sweep", id, fetched.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return test::run_gpupool(args);
    };
    auto r = fetch({});
    INFO(r.err);
    CHECK(r.exit_code == 1); // one job has no outputs yet
    CHECK(test::slurp(fetched / ".._escape" / "f") == "0");
    CHECK(test::slurp(fetched / "eval-n0-1" / "f") == "1");
    CHECK(test::slurp(fetched / "eval-n0-2" / "f") == "2");
    CHECK_FALSE(fs::exists(sandbox.path() / "escape"));
    CHECK_THAT(r.err, Catch::Contains("error: slow: job " + std::to_string(ids[3]) + " is running"));
    CHECK_THAT(r.out, Catch::Contains("fetched 3 of 4 jobs"));

    // Fetched again: what is there is kept unless --force replaces it.
    test::write_file(fetched / "eval-n0-1" / "f", "mine");
    auto again = fetch({});
    CHECK_THAT(again.err, Catch::Contains("eval-n0-1 exists: --force replaces it"));
    CHECK(test::slurp(fetched / "eval-n0-1" / "f") == "mine");
    auto forced = fetch({"--force", "--json"});
    CHECK(test::slurp(fetched / "eval-n0-1" / "f") == "1");
    const json out = json::parse(forced.out); // one document: what was fetched, and why not the rest
    REQUIRE(out.size() == 4);
    CHECK(out[1]["name"] == "eval-n0");
    CHECK(out[1]["files"] == json::array({"f"}));
    CHECK_THAT(out[3]["error"].get<std::string>(), Catch::Contains("is running"));

    // Usage: a job id and --sweep together, or neither.
    CHECK(test::run_gpupool({"--url", pool.url, "--token", pool.member, "fetch"}).exit_code == 2);
    CHECK(test::run_gpupool({"--url", pool.url, "--token", pool.member, "fetch", "abc"}).exit_code == 2);
}

} // namespace test_fetch_hostile
} // namespace
