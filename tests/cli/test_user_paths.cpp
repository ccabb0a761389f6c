// One end-to-end test per user of the pool, each driving the real `gpupool` binary against a real
// coordinator process on loopback (a SQLite file) and, where work runs, a real worker process (the
// process runtime): what a person following the README does, start to finish.
#include "tests/cli/funded_pool.hpp"
#include "tests/cli/processes.hpp"
#include "tests/core/catalog/git_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_user_paths {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// The first line of `text`, without its newline: a token printed alone on stdout.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A one-job recipe in `dir`/NAME.toml that runs `before` (a shell command; may be empty), then writes
// `line` to its output file.
fs::path one_job(const test::TempDir& dir, const std::string& name, const std::string& line,
                 const std::string& before = "") {
    return dir.write(name + ".toml", "name = \"" + name + "\"\nimage = \"localhost/gpupool/busybox:latest\"\n"
                                     "command = \"" + before + "echo " + line +
                                     " > \\\"$GPUPOOL_OUTPUT_DIR/out.txt\\\"\"\n"
                                     "[resources]\ncpus = 0.5\nmemory = \"64MiB\"\nmax_runtime = \"2m\"\n"
                                     "[outputs]\npaths = [\"out.txt\"]\n");
}

} // namespace

TEST_CASE("user path, researcher: a sweep from a recipe file with a failing job, retried, then fetched",
          "[user-path][cli]") {
    test::TempDir dir;
    test::FundedPool pool(dir.path());
    const fs::path flag = dir.path() / "flag";
    // Three jobs; `n = 2` fails (exit 3) until the flag file exists. Each writes its output file.
    const fs::path recipe = dir.write(
        "project/eval.toml",
        "name = \"eval-{n}\"\nimage = \"localhost/gpupool/busybox:latest\"\n"
        "command = \"if [ {n} = 2 ] && [ ! -e '" + flag.string() + "' ]; then echo no flag; exit 3; fi; "
        "echo \\\"score {n}\\\" > \\\"$GPUPOOL_OUTPUT_DIR/score.txt\\\"; cat data.txt\"\n"
        "[resources]\ncpus = 0.5\nmemory = \"64MiB\"\nmax_runtime = \"2m\"\n"
        "[inputs]\npaths = [\"data.txt\"]\n[outputs]\npaths = [\"score.txt\"]\n"
        "[retry]\nmax_attempts = 1\n"
        "[sweep]\nn = [1, 2, 3]\n");
    dir.write("project/data.txt", "the shared inputs\n");
    test::WorkerProcess worker(dir.path() / "w", pool.url, pool.enroll);

    // Submitted and waited for: one job failed, named with its reason; exit 1.
    auto sub = pool.as(pool.fellow, {"submit", recipe.string(), "--wait"});
    INFO(sub.out << sub.err);
    REQUIRE(sub.exit_code == 1);
    CHECK_THAT(sub.out, Catch::Contains("2 succeeded, 1 did not") && Catch::Contains(" eval-2: failed (exit 3)"));
    auto listed = pool.as(pool.fellow, {"--json", "jobs"});
    REQUIRE(listed.exit_code == 0);
    const json jobs = json::parse(listed.out)["jobs"];
    REQUIRE(jobs.size() == 3);
    const std::string sweep = std::to_string(jobs[0]["sweep_id"].get<std::int64_t>());
    CHECK_THAT(pool.as(pool.fellow, {"logs", "--sweep", sweep}).out, Catch::Contains("no flag"));

    // Fixed (the flag), retried as the same job: the sweep ends all succeeded.
    std::ofstream(flag) << "x";
    auto retried = pool.as(pool.fellow, {"retry", "--sweep", sweep, "--failed", "--wait"});
    INFO(retried.out << retried.err);
    CHECK(retried.exit_code == 0);
    CHECK_THAT(retried.out, Catch::Contains("queued again (retry 1)") && Catch::Contains("1 succeeded, 0 did not"));
    auto waited = pool.as(pool.fellow, {"wait", "--sweep", sweep});
    CHECK(waited.exit_code == 0);

    // Every job's outputs come back under results/<job name>/.
    const fs::path results = dir.path() / "results";
    auto fetched = pool.as(pool.fellow, {"fetch", "--sweep", sweep, results.string()});
    INFO(fetched.out << fetched.err);
    REQUIRE(fetched.exit_code == 0);
    for (const char* n : {"1", "2", "3"}) {
        CHECK(test::slurp(results / ("eval-" + std::string(n)) / "score.txt") == "score " + std::string(n) + "\n");
    }
    // A second fetch keeps what is there.
    std::ofstream(results / "eval-1" / "score.txt") << "edited by hand\n";
    auto again = pool.as(pool.fellow, {"fetch", "--sweep", sweep, results.string()});
    CHECK(again.exit_code == 1);
    CHECK_THAT(again.err, Catch::Contains("exists: --force replaces it"));
    CHECK(test::slurp(results / "eval-1" / "score.txt") == "edited by hand\n");
    // What it cost: one row per job, the retried one included.
    auto credits = pool.as(pool.fellow, {"credits"});
    CHECK(credits.exit_code == 0);
    CHECK_THAT(credits.out, Catch::Contains("eval-1") && Catch::Contains("eval-2") && Catch::Contains("eval-3"));
}

TEST_CASE("user path, ops: a pool set up as the README's quick start says, a worker named, drained, backed up",
          "[user-path][cli]") {
    test::TempDir dir;
    test::CoordinatorProcess coord(dir.path());
    const std::string url = coord.url();
    auto admin = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"--url", url, "--token", coord.admin(), "admin"});
        return test::run_gpupool(args);
    };
    REQUIRE(admin({"team", "create", "fellows"}).exit_code == 0);
    REQUIRE(admin({"team", "create", "owners"}).exit_code == 0);
    auto alice = admin({"token", "create", "--team", "fellows", "--label", "alice"});
    REQUIRE(alice.exit_code == 0);
    const std::string member = first_line(alice.out);
    auto enroll = admin({"enroll", "owners", "--label", "rack-7"});
    REQUIRE(enroll.exit_code == 0);
    const fs::path enroll_file = dir.write("enroll.token", enroll.out);
    REQUIRE(admin({"grant", "fellows", "100", "--note", "fellowship"}).exit_code == 0);
    // A misspelt team is not created by accident, and the error says which one was meant.
    auto typo = admin({"grant", "felows", "5"});
    CHECK(typo.exit_code == 1);
    CHECK_THAT(typo.err, Catch::Contains("did you mean") && Catch::Contains("fellows"));
    auto tokens = admin({"token", "list"});
    CHECK_THAT(tokens.out, Catch::Contains("alice") && Catch::Contains("rack-7"));

    // An owner's worker joins with the enrollment token (read from a file); ops name it.
    test::WorkerProcess worker(dir.path() / "w", url, "", {"--token-file", enroll_file.string(), "--name", "lab-box"});
    REQUIRE(test::eventually([&] { return admin({"workers"}).out.find("lab-box") != std::string::npos; }, 15s));
    // A member cannot list the pool's workers as an admin, and is told why.
    auto as_member = test::run_gpupool({"--url", url, "--token", member, "admin", "workers"});
    CHECK(as_member.exit_code == 1);
    CHECK_THAT(as_member.err, Catch::Contains("needs an admin token"));

    // The member's job runs on it.
    test::TempDir project;
    auto ran = test::run_gpupool({"--url", url, "--token", member, "submit",
                                  one_job(project, "first-job", "hello").string(), "--wait"});
    INFO(ran.out << ran.err);
    CHECK(ran.exit_code == 0);

    // Drained and activated by name; the pool view shows it; a backup; alice's token revoked by label.
    REQUIRE(admin({"drain", "lab-box"}).exit_code == 0);
    CHECK_THAT(admin({"workers"}).out, Catch::Contains("drained"));
    REQUIRE(admin({"activate", "lab-box"}).exit_code == 0);
    CHECK_THAT(test::run_gpupool({"--url", url, "--token", coord.admin(), "pool"}).out, Catch::Contains("lab-box"));
    const fs::path backup = dir.path() / "pool-backup.db";
    REQUIRE(admin({"backup", backup.string()}).exit_code == 0);
    CHECK(fs::file_size(backup) > 0);
    REQUIRE(admin({"token", "revoke", "alice"}).exit_code == 0);
    CHECK_THAT(admin({"token", "list"}).out, !Catch::Contains("alice"));
    CHECK_THAT(admin({"token", "list", "--all"}).out, Catch::Contains("alice"));
    auto revoked = test::run_gpupool({"--url", url, "--token", member, "jobs"});
    CHECK(revoked.exit_code == 1);
    // Every step is in the audit log.
    const std::string audit = admin({"audit"}).out;
    for (const char* action : {"team.create", "token.create", "credits.grant", "worker.drain", "worker.activate",
                               "pool.backup", "token.revoke"}) {
        CHECK_THAT(audit, Catch::Contains(action));
    }
}

TEST_CASE("user path, GPU owner: joins with terms of its own, runs a job, sees what it earned, pauses and resumes",
          "[user-path][cli]") {
    test::TempDir dir;
    test::FundedPool pool(dir.path());
    const fs::path enroll_file = dir.write("enroll.token", pool.enroll + "\n");
    const fs::path terms = dir.write("worker.toml", "[share]\nmax_jobs = 1\nmax_runtime = \"30m\"\n");
    const fs::path work = dir.path() / "w";
    test::WorkerProcess worker(work, pool.url, "",
                               {"--token-file", enroll_file.string(), "--config", terms.string(), "--name", "home-box"});
    // `gpupool [--json] worker ARGS... --work-dir W`: the owner's commands, on this machine.
    auto owner = [&](std::vector<std::string> args, bool as_json = false) {
        args.insert(args.begin(), "worker");
        if (as_json) {
            args.insert(args.begin(), "--json");
        }
        args.insert(args.end(), {"--work-dir", work.string()});
        return test::run_gpupool(args);
    };
    REQUIRE(test::eventually([&] { return owner({"status"}).out.find("state       sharing") != std::string::npos; },
                             15s));

    // A researcher's job runs here; the owner's team earns for it once it settles.
    test::TempDir project;
    // (It runs for 3 s, so that what it earns is more than a rounding error.)
    auto ran =
        pool.as(pool.fellow, {"submit", one_job(project, "on-home-box", "hi", "sleep 3; ").string(), "--wait"});
    INFO(ran.out << ran.err);
    REQUIRE(ran.exit_code == 0);
    auto status = owner({"status"}, true);
    INFO(status.out << status.err);
    REQUIRE(status.exit_code == 0);
    const json st = json::parse(status.out);
    CHECK(st["terms"]["max_jobs"] == 1);
    CHECK(st["earnings"]["attempts"] == 1);
    CHECK(st["earnings"]["total_micro"].get<std::int64_t>() > 0);
    CHECK(st["earnings"]["today_micro"] == st["earnings"]["total_micro"]);
    const std::string text = owner({"status"}).out;
    CHECK_THAT(text, Catch::Contains("max jobs: 1") && Catch::Contains("max runtime: 30m"));

    // Paused, a new job waits and says why; resumed, it runs.
    REQUIRE(owner({"pause", "--why", "my own run"}).exit_code == 0);
    REQUIRE(test::eventually([&] {
        return pool.as(pool.coord.admin(), {"admin", "workers"}).out.find("paused") != std::string::npos;
    }, 10s));
    auto queued = pool.as(pool.fellow, {"--json", "submit", one_job(project, "after-pause", "later").string()});
    REQUIRE(queued.exit_code == 0);
    const std::string job = std::to_string(json::parse(queued.out)["jobs"][0].get<std::int64_t>());
    CHECK(test::eventually([&] {
        return pool.as(pool.fellow, {"status", job}).out.find("paused") != std::string::npos;
    }, 10s));
    REQUIRE(owner({"resume"}).exit_code == 0);
    auto waited = pool.as(pool.fellow, {"wait", job});
    INFO(waited.out << waited.err);
    CHECK(waited.exit_code == 0);
    // The owner stops sharing: the worker leaves the pool at once.
    worker.signal(SIGTERM);
    CHECK(worker.wait_exit(10s) == 0);
    CHECK_THAT(pool.as(pool.coord.admin(), {"admin", "workers"}).out, Catch::Contains("offline"));
}

TEST_CASE("user path, fellow: recipes from a project's git repository (under recipes/), tried locally, then on the pool",
          "[user-path][cli]") {
    test::TempDir dir;
    ::setenv("XDG_CACHE_HOME", (dir.path() / "cache").c_str(), 1);
    // The cohort's project: code at the top, recipes under recipes/.
    test::GitRepo project(dir.path() / "cohort");
    project.write("src/README.md", "the cohort's code\n");
    project.recipe("recipes/toy-eval",
                   "format = 1\nname = \"toy-eval-{seed}\"\nimage = \"localhost/gpupool/busybox:latest\"\n"
                   "command = \"echo seed {seed} > \\\"$GPUPOOL_OUTPUT_DIR/score.txt\\\"\"\ntags = [\"eval\"]\n"
                   "[resources]\ncpus = 0.5\nmemory = \"64MiB\"\nmax_runtime = \"1m\"\n"
                   "[outputs]\npaths = [\"score.txt\"]\n[sweep]\nseed = [1, 2]\n",
                   "A tiny evaluation.");
    project.commit("recipes");
    const std::string repo = "file://" + project.dir().string();

    // Found by itself, copied into a folder of the fellow's own (DIR, not a second repository).
    auto listed = test::run_gpupool({"recipe", "list", "--repo", repo, "--tag", "eval"});
    INFO(listed.out << listed.err);
    REQUIRE(listed.exit_code == 0);
    CHECK_THAT(listed.out, Catch::Contains("toy-eval") && Catch::Contains("A tiny evaluation."));
    const fs::path mine = dir.path() / "my-eval";
    auto got = test::run_gpupool({"recipe", "get", "toy-eval", "--repo", repo, mine.string()});
    INFO(got.out << got.err);
    REQUIRE(got.exit_code == 0);
    REQUIRE(fs::exists(mine / "recipe.toml"));

    // Tried locally first (bare processes: the same commands and variables as in a container).
    auto local = test::run_gpupool({"run", (mine / "recipe.toml").string(), "--runtime", "process", "--out",
                                    (dir.path() / "local-out").string(), "--data-dir", (dir.path() / "local").string()});
    INFO(local.out << local.err);
    REQUIRE(local.exit_code == 0);
    CHECK(test::slurp(dir.path() / "local-out" / "toy-eval-2" / "score.txt") == "seed 2\n");

    // Then on the pool, by name from the repository, and the outputs fetched.
    fs::create_directories(dir.path() / "pool");
    test::FundedPool pool(dir.path() / "pool");
    test::WorkerProcess worker(dir.path() / "w", pool.url, pool.enroll);
    auto sub = pool.as(pool.fellow, {"--json", "submit", "toy-eval", "--repo", repo, "--wait"});
    INFO(sub.out << sub.err);
    REQUIRE(sub.exit_code == 0);
    const std::string sweep = std::to_string(json::parse(sub.out)["sweep_id"].get<std::int64_t>());
    const fs::path results = dir.path() / "results";
    REQUIRE(pool.as(pool.fellow, {"fetch", "--sweep", sweep, results.string()}).exit_code == 0);
    CHECK(test::slurp(results / "toy-eval-1" / "score.txt") == "seed 1\n");
    CHECK(test::slurp(results / "toy-eval-2" / "score.txt") == "seed 2\n");
    // The jobs say where their recipe came from.
    auto jobs = json::parse(pool.as(pool.fellow, {"--json", "jobs"}).out)["jobs"];
    REQUIRE(jobs.size() == 2);
    const std::string first = std::to_string(jobs[0]["id"].get<std::int64_t>());
    CHECK_THAT(pool.as(pool.fellow, {"--json", "status", first}).out, Catch::Contains(repo));
}

} // namespace test_user_paths
} // namespace
