// `gpupool submit` of a sweep on real processes: --follow streams every job's log (as `logs --sweep
// ID -f`), sweep values keep their TOML spelling, the end names the jobs that did not succeed (as
// `gpupool wait` does), and a pool with no worker refuses a job before its inputs are uploaded.
#include "tests/cli/funded_pool.hpp"
#include "tests/cli/processes.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_submit_cli {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

// A CPU sweep over `lr` whose jobs print two lines each; the job whose lr is `fails` exits 3.
std::string sweep_recipe(const std::string& lrs, const std::string& fails) {
    return "name = \"follow-{lr}\"\n"
           "image = \"localhost/gpupool/busybox:latest\"\n"
           "command = \"echo lr={lr} from job $GPUPOOL_JOB_ID; sleep 1; echo done {lr}; test {lr} != " +
           fails +
           " || exit 3\"\n"
           "[resources]\ngpus = 0\ncpus = 0.1\nmemory = \"64MiB\"\nmax_runtime = \"1m\"\n"
           "[retry]\nmax_attempts = 1\n"
           "[sweep]\nlr = " +
           lrs + "\n";
}

} // namespace

TEST_CASE("submit --follow of a sweep streams every job's log, keeps the values' spelling and names failures",
          "[submit-cli][sweep-cli][worker-cli]") {
    test::TempDir dir;
    test::FundedPool pool(dir.path());
    const std::string& url = pool.url;
    const std::string& fellow = pool.fellow;
    const std::string& enroll = pool.enroll;
    test::WorkerProcess worker(dir.path() / "w", url, enroll);
    auto as_fellow = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"--url", url, "--token", fellow});
        return test::run_gpupool(args);
    };

    // The values as written, in the names the dry run lists.
    const fs::path ok = dir.write("ok.toml", sweep_recipe("[1.0, 0.10]", "none"));
    auto dry = as_fellow({"submit", ok.string(), "--dry-run"});
    INFO(dry.out << dry.err);
    CHECK(dry.exit_code == 0);
    CHECK_THAT(dry.out, Catch::Contains("follow-1.0") && Catch::Contains("follow-0.10"));

    // Both jobs' lines, each under its job's name, then how each ended and the sweep's summary.
    auto followed = as_fellow({"submit", ok.string(), "--follow"});
    INFO(followed.out << followed.err);
    CHECK(followed.exit_code == 0);
    CHECK_THAT(followed.out,
               Catch::Contains("follow-1.0  | lr=1.0 from job") && Catch::Contains("follow-1.0  | done 1.0") &&
                   Catch::Contains("follow-0.10 | lr=0.10 from job") && Catch::Contains("follow-0.10 | done 0.10"));
    CHECK_THAT(followed.err, Catch::Contains("-- follow-1.0 (job ") && Catch::Contains("-- follow-0.10 (job ") &&
                                 Catch::Contains(") succeeded --"));
    CHECK_THAT(followed.out, Catch::Contains("2 succeeded, 0 did not"));

    // One job fails: --follow still shows both, ends with the failed job by id and name and how it
    // ended, and exits 1.
    const fs::path bad = dir.write("bad.toml", sweep_recipe("[2.0, 1e-3]", "1e-3"));
    auto failing = as_fellow({"submit", bad.string(), "--follow"});
    INFO(failing.out << failing.err);
    CHECK(failing.exit_code == 1);
    CHECK_THAT(failing.out, Catch::Contains("follow-2.0  | done 2.0") && Catch::Contains("follow-1e-3 | done 1e-3"));
    CHECK_THAT(failing.out, Catch::Contains("1 succeeded, 1 did not:\n  job ") &&
                                Catch::Contains(" follow-1e-3: failed (exit 3): "));

    // `gpupool wait` says the same of that sweep: the failed job by id and name, with its reason.
    const std::string said = "submitted sweep ";
    const auto at = failing.out.find(said);
    REQUIRE(at != std::string::npos);
    const std::string sweep = failing.out.substr(at + said.size(), failing.out.find(':', at) - at - said.size());
    auto waited = as_fellow({"wait", "--sweep", sweep});
    INFO(waited.out << waited.err);
    CHECK(waited.exit_code == 1);
    CHECK_THAT(waited.out, Catch::Contains("follow-2.0: succeeded"));
    CHECK_THAT(waited.out, Catch::Contains("1 succeeded, 1 did not:\n  job ") &&
                               Catch::Contains(" follow-1e-3: failed (exit 3): "));
}

TEST_CASE("submit to a pool with no worker says so before it uploads any input", "[submit-cli][cli]") {
    using namespace gpupool::test::svc;
    Pool p;
    auto admin = p.server.client(p.server.admin_token);
    call(admin, "POST", "/v1/admin/workers/" + std::to_string(p.worker_id) + "/ban", nlohmann::json::object(), 200);
    test::TempDir dir;
    dir.write("data.txt", "the inputs\n");
    const fs::path recipe = dir.write("gpu.toml", "name = \"gpu-eval\"\nimage = \"localhost/gpupool/busybox:latest\"\n"
                                                  "command = \"cat data.txt\"\n"
                                                  "[resources]\ngpu = 0.5\ncpus = 0.5\n"
                                                  "[inputs]\npaths = [\"data.txt\"]\n");
    auto sub = test::run_gpupool({"--url", p.server.url, "--token", p.member, "submit", recipe.string()});
    INFO(sub.out << sub.err);
    CHECK(sub.exit_code == 1);
    CHECK_THAT(sub.err,
               Catch::Contains("job `gpu-eval` can never run on this pool: no worker is connected to the pool"));
    CHECK_THAT(sub.err, !Catch::Contains("largest worker"));
    // Nothing was packed, nor uploaded.
    CHECK_THAT(sub.err, !Catch::Contains("inputs of `gpu-eval`"));
    auto m = p.server.client(p.server.admin_token).request("GET", "/metrics", "");
    REQUIRE(m);
    CHECK_THAT(m->body, !Catch::Contains("route=\"/v1/inputs/{sha256}\""));
}

TEST_CASE("a job submitted to a pool no worker ever joined waits, and says why in the same words",
          "[submit-cli][cli]") {
    using namespace gpupool::test::svc;
    Server server;
    auto admin = server.client(server.admin_token);
    call(admin, "POST", "/v1/admin/teams", {{"name", "fellows"}}, 201);
    const std::string member =
        call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
    call(admin, "POST", "/v1/admin/grants", {{"team", "fellows"}, {"amount_micro", 1'000'000'000}}, 201);
    test::TempDir dir;
    const fs::path recipe = dir.write("gpu.toml", "name = \"gpu-eval\"\nimage = \"localhost/gpupool/busybox:latest\"\n"
                                                  "command = \"true\"\n[resources]\ngpu = 0.5\ncpus = 0.5\n");
    auto sub = test::run_gpupool({"--url", server.url, "--token", member, "--json", "submit", recipe.string()});
    INFO(sub.out << sub.err);
    REQUIRE(sub.exit_code == 0);
    const std::string job = std::to_string(nlohmann::json::parse(sub.out)["jobs"][0].get<std::int64_t>());
    // Said at once, not only by `status` later.
    CHECK_THAT(sub.err, Catch::Contains("no worker is connected to the pool yet; the jobs wait until one joins"));
    CHECK(test::eventually([&] {
        auto st = test::run_gpupool({"--url", server.url, "--token", member, "status", job});
        return st.out.find("waiting: no worker is connected to the pool") != std::string::npos;
    }));
}

TEST_CASE("submit to a pool whose only worker is offline says its jobs will wait, before the inputs travel",
          "[submit-cli][cli]") {
    using namespace gpupool::test::svc;
    Pool p(1'500); // one worker, registered by hand: it never heartbeats, so it is offline after 1.5 s
    test::TempDir dir;
    dir.write("data.txt", "the inputs\n");
    const fs::path recipe = dir.write("cpu.toml", "name = \"cpu-eval\"\nimage = \"localhost/gpupool/busybox:latest\"\n"
                                                  "command = \"cat data.txt\"\n[resources]\ncpus = 0.5\n"
                                                  "[inputs]\npaths = [\"data.txt\"]\n");
    REQUIRE(test::eventually([&] {
        auto w = test::run_gpupool({"--url", p.server.url, "--token", p.server.admin_token, "admin", "workers"});
        return w.out.find("offline") != std::string::npos;
    }));
    auto sub = test::run_gpupool({"--url", p.server.url, "--token", p.member, "submit", recipe.string()});
    INFO(sub.out << sub.err);
    CHECK(sub.exit_code == 0);
    const auto note = sub.err.find("none of the pool's 1 worker takes work now");
    const auto upload = sub.err.find("inputs of `cpu-eval`");
    CHECK(note != std::string::npos);
    CHECK(upload != std::string::npos);
    CHECK(note < upload);
}

} // namespace test_submit_cli
} // namespace
