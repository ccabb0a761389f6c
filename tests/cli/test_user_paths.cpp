// One end-to-end test per user of the pool, each driving the real `gpupool` binary against a real
// coordinator process on loopback (a SQLite file) and, where work runs, a real worker process (the
// process runtime): what a person following the README does, start to finish.
#include "tests/cli/funded_pool.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

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
