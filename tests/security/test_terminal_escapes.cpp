// Text that comes from the coordinator or a worker (job and worker names, reasons, notes, logs,
// server errors) cannot drive the terminal of the person running gpupool: the real binary prints
// its control characters escaped. A fake worker (plain HTTP) runs one job against a real
// coordinator service, with a clear-screen sequence and a newline in everything it controls.
#include "cmd/remote.hpp"
#include "core/coordinator/service.hpp"
#include "core/store/open_store.hpp"
#include "core/net/http_client.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <memory>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_terminal_escapes {

using namespace gpupool;
using json = nlohmann::json;

namespace {

const std::string k_evil = "\x1b[2J\nforged";           // clears the screen, starts a fake line
const std::string k_evil_escaped = "\\x1b[2J\\nforged"; // what must be printed instead

net::HttpClient client(const std::string& url, const std::string& token) {
    net::ClientOptions o;
    o.base_url = url;
    o.token = token;
    o.timeout = std::chrono::milliseconds(10'000);
    return net::HttpClient(o);
}


struct EvilPool {
    test::TempDir dir;
    std::unique_ptr<coordinator::CoordinatorService> service;
    std::string admin;
    std::string member;
    std::string url;
    std::int64_t job = 0;
    std::string log_bytes = "hello " + k_evil + "\nbye\n";

    EvilPool() {
        coordinator::ServiceOptions o;
        o.http.host = "127.0.0.1";
        o.http.port = 0;
        o.tick = std::chrono::milliseconds(50);
        auto opened = store::open_store((dir.path() / "pool.db").string());
        REQUIRE(opened);
        service = std::make_unique<coordinator::CoordinatorService>(o, std::move(*opened), coordinator::system_clock());
        REQUIRE(service->start(&admin));
        url = "http://127.0.0.1:" + std::to_string(service->port());
        auto a = client(url, admin);
        test::expect_call(a, "POST", "/v1/admin/teams", json{{"name", "fellows"}}.dump(), 201);
        test::expect_call(a, "POST", "/v1/admin/grants",
             json{{"team", "fellows"}, {"amount_micro", 1'000'000'000}, {"note", "seed" + k_evil}}.dump(), 201);
        member = test::expect_call(a, "POST", "/v1/admin/tokens", json{{"role", "member"}, {"team", "fellows"}}.dump(), 201)["token"]
                     .get<std::string>();
        const std::string enroll =
            test::expect_call(a, "POST", "/v1/admin/tokens", json{{"role", "enroll"}, {"team", "fellows"}}.dump(), 201)["token"];

        // A worker whose owner chose its name.
        auto e = client(url, enroll);
        const json inventory = {{"cpu_milli", 4000}, {"memory_mib", 4096}, {"gpus", json::array()}};
        const std::string worker_token = test::expect_call(e, "POST", "/v1/workers/register",
                                              json{{"name", "box" + k_evil}, {"inventory", inventory}}.dump(), 201)["token"];

        // A job (its name cannot carry control characters: the coordinator refuses them, see
        // test_option_injection.cpp; the reason and the log below can).
        recipe::JobSpec s;
        s.name = "job-plain";
        s.image = "busybox";
        s.command = {"true"};
        s.resources.cpu_milli = 100;
        s.resources.memory_mib = 64;
        auto m = client(url, member);
        json body = {{"source", "t.toml"}, {"max_parallel", 0},
                     {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}};
        job = test::expect_call(m, "POST", "/v1/jobs", body.dump(), 201)["jobs"][0].get<std::int64_t>();

        // The worker runs it: its log and its reason are the worker's words.
        auto w = client(url, worker_token);
        test::expect_call(w, "POST", "/v1/workers/heartbeat", json{{"running", json::array()}}.dump(), 200);
        json assignments;
        REQUIRE(test::eventually([&] {
            assignments = test::expect_call(w, "POST", "/v1/workers/poll?wait_ms=0", "{}", 200)["assignments"];
            return !assignments.empty();
        }));
        const std::string attempt = std::to_string(assignments[0]["attempt"].get<std::int64_t>());
        test::expect_call(w, "POST", "/v1/attempts/" + attempt + "/start", "{}", 200);
        test::expect_call(w, "POST", "/v1/attempts/" + attempt + "/logs?offset=0", log_bytes, 200);
        test::expect_call(w, "POST", "/v1/attempts/" + attempt + "/complete",
             json{{"exit_code", 3}, {"reason", "boom" + k_evil}}.dump(), 200);
    }

    ~EvilPool() { service->stop(); }

    test::CliResult as(const std::string& token, std::vector<std::string> args) const {
        args.insert(args.begin(), {"--url", url, "--token", token});
        return test::run_gpupool(args);
    }
};

void check_escaped(const std::string& text, const std::string& what) {
    INFO(what << " printed: " << text);
    CHECK_THAT(text, Catch::Contains(k_evil_escaped));
    CHECK_THAT(text, !Catch::Contains("\x1b"));
    CHECK_THAT(text, !Catch::Contains("\nforged"));
}

} // namespace

TEST_CASE("terminal escapes: names, reasons and notes from others are printed escaped", "[security][cli]") {
    EvilPool pool;
    const std::string id = std::to_string(pool.job);

    auto jobs = pool.as(pool.member, {"jobs"});
    CHECK(jobs.exit_code == 0);
    check_escaped(jobs.out, "jobs");
    CHECK_THAT(jobs.out, Catch::Contains("job-plain") && Catch::Contains("boom" + k_evil_escaped));

    auto status = pool.as(pool.member, {"status", id});
    CHECK(status.exit_code == 0);
    check_escaped(status.out, "status");
    CHECK_THAT(status.out, Catch::Contains("`job-plain`") && Catch::Contains("boom" + k_evil_escaped));

    auto workers = pool.as(pool.admin, {"admin", "workers"});
    CHECK(workers.exit_code == 0);
    check_escaped(workers.out, "admin workers");
    CHECK_THAT(workers.out, Catch::Contains("box" + k_evil_escaped));

    auto credits = pool.as(pool.member, {"credits"});
    CHECK(credits.exit_code == 0);
    check_escaped(credits.out, "credits");
    CHECK_THAT(credits.out, Catch::Contains("seed" + k_evil_escaped));

    auto wait = pool.as(pool.member, {"wait", id});
    CHECK(wait.exit_code == 1); // the job failed
    CHECK_THAT(wait.out, !Catch::Contains("\x1b"));

    // An error message from the server that echoes someone's words.
    auto grant = pool.as(pool.admin, {"admin", "grant", "no" + k_evil, "1"});
    CHECK(grant.exit_code == 1);
    check_escaped(grant.err, "error");
    CHECK_THAT(grant.err, Catch::Contains("error: ") && Catch::Contains("no" + k_evil_escaped));

    // --json is left to the JSON encoder (which escapes control characters its own way).
    auto as_json = pool.as(pool.member, {"--json", "jobs"});
    REQUIRE(as_json.exit_code == 0);
    CHECK(json::parse(as_json.out)["jobs"][0]["reason"] == "boom" + k_evil); // JSON carries the bytes, encoded
}

TEST_CASE("terminal escapes: logs keep the job's bytes off a terminal and with --raw", "[security][cli]") {
    EvilPool pool;
    const std::string id = std::to_string(pool.job);

    // The test's stdout is a file, not a terminal: the bytes as the job wrote them.
    auto piped = pool.as(pool.member, {"logs", id});
    CHECK(piped.exit_code == 0);
    CHECK(piped.out == pool.log_bytes);
    auto raw = pool.as(pool.member, {"logs", "--raw", id});
    CHECK(raw.exit_code == 0);
    CHECK(raw.out == pool.log_bytes);
}

TEST_CASE("terminal escapes: on a terminal, logs show control characters escaped and keep lines", "[security][cli]") {
    // What stream_logs prints when stdout is a terminal.
    CHECK(cmd::log_text_for_terminal("hello \x1b[2J\nbye\r\x1b[1A\tend\n") == "hello \\x1b[2J\nbye\\r\\x1b[1A\tend\n");

    // And through a real pseudo-terminal, when script(1) is there to make one.
    const auto script = boost::process::search_path("script");
    if (script.empty()) {
        WARN("SKIPPED the pty half: script(1) is not installed (package bsdutils)");
        return;
    }
    EvilPool pool;
    const std::string id = std::to_string(pool.job);
    auto command = [&](const std::string& extra) {
        return std::string(GPUPOOL_BINARY) + " --url " + pool.url + " --token " + pool.member + " logs " + extra + id;
    };
    test::TempDir io;
    auto run_in_pty = [&](const std::string& cmdline) {
        const auto out = io.path() / "typescript";
        boost::process::child c(script, "-q", "-e", "-c", cmdline, out.string(),
                                boost::process::std_out > boost::process::null,
                                boost::process::std_err > boost::process::null,
                                boost::process::std_in < boost::process::null);
        c.wait();
        return std::make_pair(c.exit_code(), test::slurp(out));
    };
    auto [rc, text] = run_in_pty(command(""));
    INFO("on a terminal: " << text);
    CHECK(rc == 0);
    CHECK_THAT(text, Catch::Contains("hello " + std::string("\\x1b[2J")));
    CHECK_THAT(text, !Catch::Contains("\x1b[2J"));
    CHECK_THAT(text, Catch::Contains("bye")); // its lines are kept
    auto [raw_rc, raw_text] = run_in_pty(command("--raw "));
    INFO("--raw on a terminal: " << raw_text);
    CHECK(raw_rc == 0);
    CHECK_THAT(raw_text, Catch::Contains("\x1b[2J"));
}

} // namespace test_terminal_escapes
} // namespace
