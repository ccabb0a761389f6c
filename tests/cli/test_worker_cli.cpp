// Real `gpupool worker` and `gpupool run` processes, faults included: a worker killed with -9 mid-job,
// a coordinator gone for 30 s while a job runs, a SIGTERM drain, and the one-command local mode.
// Jobs use the process runtime (always available); tests/worker/runtime covers podman and docker.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/cli_calls.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"
#include "core/archive/archive.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_worker_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::CoordinatorProcess;
using test::WorkerProcess;

using test::submit_shell;

namespace {

using test::eventually;

struct Tokens {
    std::string member;
    std::string enroll;
};

Tokens setup_team(const std::string& url, const std::string& admin) {
    auto a = test::http_client(url, admin);
    auto t = a.request("POST", "/v1/admin/teams", R"({"name": "fellows"})");
    REQUIRE(t);
    REQUIRE(t->status == 201);
    auto g = a.request("POST", "/v1/admin/grants", R"({"team": "fellows", "amount_micro": 1000000000})");
    REQUIRE(g);
    REQUIRE(g->status == 201);
    auto m = a.request("POST", "/v1/admin/tokens", R"({"role": "member", "team": "fellows"})");
    auto e = a.request("POST", "/v1/admin/tokens", R"({"role": "enroll", "team": "fellows", "uses": 100})");
    REQUIRE(m);
    REQUIRE(e);
    return {json::parse(m->body)["token"], json::parse(e->body)["token"]};
}

json get_job(const std::string& url, const std::string& member, std::int64_t id) {
    auto c = test::http_client(url, member);
    auto r = c.request("GET", "/v1/jobs/" + std::to_string(id));
    if (!r || r->status != 200) {
        return json::object();
    }
    return json::parse(r->body);
}

std::string job_state(const std::string& url, const std::string& member, std::int64_t id) {
    return get_job(url, member, id).value("state", "");
}

std::string job_logs(const std::string& url, const std::string& member, std::int64_t id) {
    auto c = test::http_client(url, member);
    auto r = c.request("GET", "/v1/jobs/" + std::to_string(id) + "/logs?offset=0");
    if (!r || r->status != 200) {
        return {};
    }
    return json::parse(r->body)["data"].get<std::string>();
}

} // namespace

TEST_CASE("worker process: without --share it only shows what it would offer, the process runtime needs consent",
          "[worker-cli]") {
    auto look = test::run_gpupool({"worker", "--runtime", "process"});
    CHECK(look.exit_code == 0);
    CHECK_THAT(look.out, Catch::Contains("Nothing is shared yet"));
    auto refused = test::run_gpupool({"--url", "http://127.0.0.1:1", "--token", "gpp_x", "worker", "--share", "--runtime",
                                      "process"});
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("isolates nothing") && Catch::Contains("--unsafe-process-runtime"));
    auto no_token = test::run_gpupool({"--url", "http://127.0.0.1:1", "worker", "--share", "--runtime", "process",
                                       "--unsafe-process-runtime", "--work-dir", "/tmp/gpupool-test-none"});
    CHECK(no_token.exit_code == 2);
    CHECK_THAT(no_token.err, Catch::Contains("--token"));
    auto bad_quiet = test::run_gpupool({"--url", "http://127.0.0.1:1", "--token", "gpp_x", "worker", "--share",
                                        "--runtime", "process", "--unsafe-process-runtime", "--reclaim-quiet", "soon"});
    CHECK(bad_quiet.exit_code == 2);
    CHECK_THAT(bad_quiet.err, Catch::Contains("--reclaim-quiet"));
    auto bad_compute = test::run_gpupool({"--url", "http://127.0.0.1:1", "--token", "gpp_x", "worker", "--share",
                                          "--runtime", "process", "--unsafe-process-runtime", "--mps", "--mps-compute",
                                          "fast"});
    CHECK(bad_compute.exit_code == 2);
    CHECK_THAT(bad_compute.err, Catch::Contains("--mps-compute") && Catch::Contains("throughput"));
    auto help = test::run_gpupool({"worker", "--help"});
    CHECK_THAT(help.out, Catch::Contains("--mps-compute"));
}

TEST_CASE("worker process: kill -9 mid-job, the job reruns elsewhere and the first attempt's late messages are refused",
          "[worker-cli]") {
    test::TempDir dir;
    CoordinatorProcess coord(dir.path(), {"--lease", "2s"});
    const auto url = coord.url();
    const auto tokens = setup_team(url, coord.admin());
    auto a = std::make_unique<WorkerProcess>(dir.path() / "a", url, tokens.enroll);
    const auto id = submit_shell(url, tokens.member, "survivor",
                                 "echo attempt $GPUPOOL_ATTEMPT; sleep 3; echo ok > $GPUPOOL_OUTPUT_DIR/r.txt");
    REQUIRE(eventually([&] { return job_state(url, tokens.member, id) == "running"; }, 15s));
    a->kill9();
    WorkerProcess b(dir.path() / "b", url, tokens.enroll);
    REQUIRE(eventually([&] { return job_state(url, tokens.member, id) == "succeeded"; }, 30s));
    auto j = get_job(url, tokens.member, id);
    CHECK(j["attempts"] == 2);
    const json history = j["attempt_history"];
    REQUIRE(history.size() == 2);
    CHECK(history[0]["state"] == "lost");
    CHECK(history[1]["state"] == "succeeded");
    CHECK(job_logs(url, tokens.member, id) == "attempt 2\n");
    auto fetched = test::run_gpupool({"--url", url, "--token", tokens.member, "fetch", std::to_string(id),
                                      (dir.path() / "fetched").string()});
    CHECK(fetched.exit_code == 0);
    CHECK(test::slurp(dir.path() / "fetched" / "survivor" / "r.txt") == "ok\n");

    // Worker a comes back: its spooled first attempt is refused (409) and dropped; nothing changes.
    a = std::make_unique<WorkerProcess>(dir.path() / "a", url, tokens.enroll);
    REQUIRE(eventually([&] { return !fs::exists(dir.path() / "a" / "attempts") ||
                                    fs::is_empty(dir.path() / "a" / "attempts"); },
                       15s));
    // Said in its log (a line that may land a moment after the spool is emptied on a loaded machine).
    const bool said = eventually([&] { return a->stderr_text().find("no longer current") != std::string::npos; }, 10s);
    INFO(a->stderr_text());
    CHECK(said);
    auto after = get_job(url, tokens.member, id);
    CHECK(after["state"] == "succeeded");
    CHECK(after["attempts"] == 2);
}

TEST_CASE("worker process: the coordinator is gone for 30 s mid-job, logs and result arrive complete afterwards",
          "[worker-cli][slow]") {
    test::TempDir dir;
    auto coord = std::make_unique<CoordinatorProcess>(dir.path());
    const auto url = coord->url();
    const auto port = coord->port();
    const auto tokens = setup_team(url, coord->admin());
    WorkerProcess w(dir.path() / "w", url, tokens.enroll);
    const auto id = submit_shell(url, tokens.member, "patient",
                                 "i=1; while [ $i -le 24 ]; do echo line $i; i=$((i+1)); sleep 0.5; done; "
                                 "echo ok > $GPUPOOL_OUTPUT_DIR/r.txt");
    REQUIRE(eventually([&] { return job_logs(url, tokens.member, id).find("line 2\n") != std::string::npos; }, 15s));
    coord->kill9();
    std::this_thread::sleep_for(30s); // the job (12 s) ends while nobody listens
    coord = std::make_unique<CoordinatorProcess>(dir.path(), std::vector<std::string>{}, port);
    REQUIRE(eventually([&] { return job_state(url, tokens.member, id) == "succeeded"; }, 30s));
    std::string expected;
    for (int i = 1; i <= 24; ++i) {
        expected += "line " + std::to_string(i) + "\n";
    }
    CHECK(job_logs(url, tokens.member, id) == expected); // complete, in order, nothing twice
    auto j = get_job(url, tokens.member, id);
    CHECK(j["attempts"] == 1);
    auto c = test::http_client(url, tokens.member);
    auto tar = c.request("GET", "/v1/jobs/" + std::to_string(id) + "/outputs");
    REQUIRE(tar);
    REQUIRE(tar->status == 200);
    test::TempDir out;
    auto files = archive::unpack_archive(tar->body, out.path());
    REQUIRE(files);
    CHECK(files->written == std::vector<std::string>{"r.txt"});
}

TEST_CASE("worker process: SIGTERM drains — the running job finishes, nothing new starts, exit 0", "[worker-cli]") {
    test::TempDir dir;
    CoordinatorProcess coord(dir.path());
    const auto url = coord.url();
    const auto tokens = setup_team(url, coord.admin());
    WorkerProcess w(dir.path() / "w", url, tokens.enroll, {"--drain-grace", "30s"});
    const auto id = submit_shell(url, tokens.member, "finishing", "sleep 2; echo finished");
    REQUIRE(eventually([&] { return job_state(url, tokens.member, id) == "running"; }, 15s));
    w.signal(SIGTERM);
    std::this_thread::sleep_for(500ms);
    const auto later = submit_shell(url, tokens.member, "later", "echo later");
    CHECK(w.wait_exit(20s) == 0);
    CHECK(job_state(url, tokens.member, id) == "succeeded");
    CHECK(job_logs(url, tokens.member, id) == "finished\n");
    CHECK(job_state(url, tokens.member, later) == "queued");
    CHECK_THAT(w.stderr_text(), Catch::Contains("draining"));
}

TEST_CASE("worker process: the first start reads its token from a file, a restart needs none", "[worker-cli]") {
    test::TempDir dir;
    CoordinatorProcess coord(dir.path());
    const auto url = coord.url();
    const auto tokens = setup_team(url, coord.admin());
    // As the README says: `admin enroll TEAM > enroll.token` (the secret alone on stdout).
    auto enroll = test::run_gpupool({"--url", url, "--token", coord.admin(), "admin", "enroll", "fellows"});
    REQUIRE(enroll.exit_code == 0);
    CHECK_THAT(enroll.err, Catch::Contains("enroll token") && Catch::Contains("for team fellows (shown once)"));
    CHECK(enroll.out.starts_with("gpp_"));
    const auto token_file = dir.write("enroll.token", enroll.out);
    std::int64_t first_worker = 0;
    {
        WorkerProcess w(dir.path() / "w", url, "", {"--token-file", token_file.string()});
        const auto id = submit_shell(url, tokens.member, "first", "echo one");
        REQUIRE(eventually([&] { return job_state(url, tokens.member, id) == "succeeded"; }, 15s));
        first_worker = get_job(url, tokens.member, id)["attempt_history"][0]["worker"];
        w.signal(SIGTERM);
        REQUIRE(w.wait_exit(15s) == 0);
        // The owner sees what is offered and one line per job start and end, at the default level.
        const std::string told = w.stderr_text();
        CHECK_THAT(told, Catch::Contains("sharing with " + url + " as worker " + std::to_string(first_worker) +
                                         ": 4 CPUs, 4GiB memory, "));
        CHECK_THAT(told, Catch::Contains("job " + std::to_string(id) + " `first` (team fellows) started: no GPU, "
                                                                           "0.1 CPU, 64MiB memory"));
        CHECK_THAT(told, Catch::Contains("job " + std::to_string(id) + " `first` (team fellows) ended after ") &&
                             Catch::Contains(": exited with status 0"));
    }
    // No token at all: the identity in worker.json is reused.
    WorkerProcess again(dir.path() / "w", url, "");
    const auto id = submit_shell(url, tokens.member, "second", "echo two");
    REQUIRE(eventually([&] { return job_state(url, tokens.member, id) == "succeeded"; }, 15s));
    CHECK(get_job(url, tokens.member, id)["attempt_history"][0]["worker"] == first_worker);
    // The owner reads the team's credits with the worker's own identity: no second token.
    auto status = test::run_gpupool({"worker", "status", "--work-dir", (dir.path() / "w").string()});
    INFO(status.out << status.err);
    CHECK(status.exit_code == 0);
    CHECK_THAT(status.out, Catch::Contains("worker " + std::to_string(first_worker) + " of team fellows on " + url) &&
                               Catch::Contains("available") && Catch::Contains("settling"));
    auto no_identity = test::run_gpupool({"worker", "status", "--work-dir", (dir.path() / "none").string()});
    CHECK(no_identity.exit_code == 1);
    CHECK_THAT(no_identity.err, Catch::Contains("no worker identity"));
    // The coordinator's log says what happened, one line each, at its default level.
    const std::string log = coord.stderr_text();
    CHECK_THAT(log, Catch::Contains("coordinator started: " + url));
    CHECK_THAT(log, Catch::Contains("team 1 `fellows` created"));
    CHECK_THAT(log, Catch::Contains("grant ") && Catch::Contains("to team `fellows`"));
    CHECK_THAT(log, Catch::Contains("enroll token ") && Catch::Contains("for team `fellows`"));
    CHECK_THAT(log, Catch::Contains("worker " + std::to_string(first_worker) + " `") &&
                        Catch::Contains("registered for team `fellows`"));
    // Another work dir has no identity: it asks for a token, naming the ways to give one.
    auto fresh = test::run_gpupool({"--url", url, "worker", "--share", "--runtime", "process",
                                    "--unsafe-process-runtime", "--work-dir", (dir.path() / "other").string()});
    CHECK(fresh.exit_code == 2);
    CHECK_THAT(fresh.err, Catch::Contains("--token-file") && Catch::Contains("GPUPOOL_TOKEN"));
}

TEST_CASE("worker process: docker without a daemon says what to fix and does not join the pool", "[worker-cli]") {
    test::TempDir dir;
    CoordinatorProcess coord(dir.path());
    const auto url = coord.url();
    const auto tokens = setup_team(url, coord.admin());
    const auto token_file = dir.write("enroll.token", tokens.enroll);
    auto r = test::run_gpupool({"--url", url, "--token-file", token_file.string(), "worker", "--share", "--runtime",
                                "docker", "--runtime-arg=-H=unix://" + (dir.path() / "no-daemon.sock").string(),
                                "--work-dir", (dir.path() / "w").string()});
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("docker"));
    auto admin = test::http_client(url, coord.admin());
    auto workers = admin.request("GET", "/v1/workers");
    REQUIRE(workers);
    CHECK(json::parse(workers->body)["workers"].empty()); // not registered as active
}

TEST_CASE("worker process: a second SIGINT stops the running job now and hands it back, then exits",
          "[worker-cli]") {
    test::TempDir dir;
    CoordinatorProcess coord(dir.path());
    const auto url = coord.url();
    const auto tokens = setup_team(url, coord.admin());
    WorkerProcess w(dir.path() / "w", url, tokens.enroll); // the default drain grace: 5 minutes
    const auto pid_file = dir.path() / "job.pid";
    const auto id = submit_shell(url, tokens.member, "long", "echo $$ > " + pid_file.string() + "; exec sleep 120");
    REQUIRE(eventually([&] { return fs::exists(pid_file) && !test::slurp(pid_file).empty(); }, 15s));
    const pid_t job_pid = std::stoi(test::slurp(pid_file));
    REQUIRE(::kill(job_pid, 0) == 0);
    w.signal(SIGINT);
    std::this_thread::sleep_for(500ms);
    CHECK(::kill(job_pid, 0) == 0); // the first one lets it finish
    w.signal(SIGINT);
    CHECK(w.wait_exit(15s) == 0);
    CHECK(::kill(job_pid, 0) != 0); // stopped, not left running on the owner's machine
    const auto j = get_job(url, tokens.member, id);
    CHECK(j["state"] == "queued"); // handed back at once, not lost 30 s later
    CHECK(j["attempt_history"][0]["state"] == "preempted");
    CHECK_THAT(w.stderr_text(), Catch::Contains("stopping the running jobs now"));
}

TEST_CASE("gpupool run: the demo sweep runs end to end and its outputs land in ./gpupool-out", "[worker-cli]") {
    test::TempDir dir;
    const auto recipe = (test::source_dir() / "recipes/hello-sweep/recipe.toml").string();
    auto r = test::run_gpupool({"run", "--runtime", "process", recipe, "--data-dir", (dir.path() / "state").string()},
                               dir.path());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("6 of 6 succeeded"));
    for (const std::string greeting : {"hello", "bonjour", "hola"}) {
        for (int n : {1, 2}) {
            const std::string name = "hello-" + greeting + "-" + std::to_string(n);
            const auto file = dir.path() / "gpupool-out" / name / "hello.txt";
            REQUIRE(fs::exists(file));
            const std::string text = test::slurp(file);
            CHECK_THAT(text, Catch::StartsWith(greeting + " from job ") &&
                                 Catch::EndsWith("(n=" + std::to_string(n) + ")\n"));
            CHECK(test::slurp(dir.path() / "gpupool-out" / (name + ".log")) == text); // tee: log = file
        }
    }

    // Inputs travel with the job: packed, uploaded, unpacked at /work (here: GPUPOOL_WORK_DIR).
    fs::create_directories(dir.path() / "data");
    dir.write("data/prompts.txt", "What is 2+2?\n");
    const auto with_inputs = dir.write(
        "inputs.toml", "format = 1\nname = \"reader\"\nimage = \"x\"\n"
                       "command = \"wc -l < $GPUPOOL_WORK_DIR/data/prompts.txt > $GPUPOOL_OUTPUT_DIR/count.txt\"\n"
                       "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n[inputs]\npaths = [\"data\"]\n");
    auto in = test::run_gpupool(
        {"run", "--runtime", "process", with_inputs.string(), "--data-dir", (dir.path() / "state").string()},
        dir.path());
    INFO(in.out << in.err);
    REQUIRE(in.exit_code == 0);
    CHECK(test::slurp(dir.path() / "gpupool-out" / "reader" / "count.txt") == "1\n");
    // Progress while the inputs are packed and uploaded.
    CHECK_THAT(in.err, Catch::Contains("inputs of `reader`: packing 1 path") &&
                           Catch::Contains("inputs of `reader`: 1 file, ") && Catch::Contains("uploaded in "));

    // A failing job: exit 1 and the reason in the summary; the state persists across runs.
    const auto bad = dir.write("bad.toml", "format = 1\nname = \"bad\"\nimage = \"x\"\ncommand = \"echo oops; exit 3\"\n"
                                           "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n[retry]\nmax_attempts = 1\n");
    auto f = test::run_gpupool(
        {"run", "--runtime", "process", bad.string(), "--data-dir", (dir.path() / "state").string()}, dir.path());
    INFO(f.out << f.err);
    CHECK(f.exit_code == 1);
    CHECK_THAT(f.out, Catch::Contains("0 of 1 succeeded") && Catch::Contains("exited with status 3"));
    CHECK_THAT(f.out, Catch::Contains("oops")); // a single job's logs stream live
}

TEST_CASE("gpupool run: Ctrl-C cancels the run's jobs, still prints the summary and exits 1", "[worker-cli]") {
    namespace bp = boost::process;
    test::TempDir dir;
    const auto recipe = dir.write("long.toml", "format = 1\nname = \"long\"\nimage = \"x\"\n"
                                               "command = \"echo started; sleep 60\"\n"
                                               "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n");
    bp::ipstream out;
    bp::child run(bp::exe = GPUPOOL_BINARY,
                  bp::args = std::vector<std::string>{"run", "--runtime", "process", recipe.string(), "--data-dir",
                                                      (dir.path() / "state").string()},
                  bp::start_dir = dir.path().string(), bp::std_out > out, bp::std_err > bp::null,
                  bp::std_in < bp::null);
    std::string line;
    REQUIRE(std::getline(out, line)); // the job's first log line, streamed live
    CHECK(line == "started");
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(run.id(), SIGINT);
    std::string rest((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    run.wait();
    CHECK(run.exit_code() == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
    CHECK_THAT(rest, Catch::Contains("long") && Catch::Contains("cancelled") && Catch::Contains("(interrupted)"));
}

namespace {

// Alive and not a zombie (a zombie's parent may be an init that does not reap, as in some CI containers).
bool running_process(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!in || !std::getline(in, text)) {
        return false;
    }
    const auto close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

} // namespace

TEST_CASE("gpupool run: a run killed with -9 leaves its job running, the next run kills what is left",
          "[worker-cli]") {
    namespace bp = boost::process;
    test::TempDir dir;
    const auto pids = dir.path() / "pids";
    // The job's shell and a background child: both must go, not only the session leader.
    const auto recipe = dir.write("orphan.toml", "format = 1\nname = \"orphan\"\nimage = \"x\"\n"
                                                 "command = \"sleep 300 & echo $$ $! > " +
                                                     pids.string() + "; echo started; wait\"\n"
                                                                     "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n");
    const auto state = (dir.path() / "state").string();
    bp::ipstream out;
    bp::child run(
        bp::exe = GPUPOOL_BINARY,
        bp::args = std::vector<std::string>{"run", "--runtime", "process", recipe.string(), "--data-dir", state},
        bp::start_dir = dir.path().string(), bp::std_out > out, bp::std_err > bp::null, bp::std_in < bp::null);
    std::string line;
    REQUIRE(std::getline(out, line));
    REQUIRE(line == "started");
    ::kill(run.id(), SIGKILL);
    run.wait();
    pid_t shell = 0;
    pid_t child = 0;
    std::ifstream(pids) >> shell >> child;
    REQUIRE(shell > 0);
    REQUIRE(child > 0);
    CHECK(running_process(shell)); // no destructor ran: the job outlived its worker
    CHECK(running_process(child));

    const auto quick = dir.write("quick.toml", "format = 1\nname = \"quick\"\nimage = \"x\"\ncommand = \"true\"\n"
                                               "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n");
    auto again = test::run_gpupool({"run", "--runtime", "process", quick.string(), "--data-dir", state}, dir.path());
    INFO(again.out << again.err);
    CHECK(again.exit_code == 0);
    CHECK(eventually([&] { return !running_process(shell) && !running_process(child); }, 5s));
    CHECK_THAT(again.err, Catch::Contains("killed 2 process(es) left running by job"));
}

} // namespace test_worker_cli
} // namespace
