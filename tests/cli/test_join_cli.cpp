// The owner's first minute (issue 45), on real processes over real HTTPS on loopback: a coordinator
// handing out the binary (`--dist`, a copy of build/gpupool named as the static file would be, and
// the pool's self-signed certificate as ca.pem), `admin enroll` printing the one command, and that
// command run by /bin/sh in an empty HOME, from nothing to a worker that ran a job. Every program
// the command starts goes through a PATH of logging shims and /proc is watched while it runs: the
// token is in no process's argv. A wrong pinned SHA-256 stops it before anything is installed.
#include "core/net/http_client.hpp"
#include "tests/cli/cli_calls.hpp"
#include "tests/cli/processes.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>
#include <sys/utsname.h>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_join_cli {

using namespace gpupool;
namespace fs = std::filesystem;
namespace bp = boost::process;
using json = nlohmann::json;

namespace {

// The programs the command and the script may start, each behind a shim that logs its argv.
const std::vector<std::string> k_programs{"curl", "wget", "sha256sum", "cut",   "mktemp", "mkdir", "cp",    "chmod",
                                          "mv",   "rm",   "id",        "nohup", "cat",    "stty",  "uname", "grep"};

struct Pool {
    test::TempDir dir;
    test::TlsFiles certs = test::make_self_signed(dir.path(), "join");
    fs::path dist = dir.path() / "dist";
    std::string binary_name;
    std::unique_ptr<test::CoordinatorProcess> coord;
    std::string url;
    std::string member;

    Pool() {
        struct utsname m {};
        ::uname(&m);
        binary_name = std::string("gpupool-") + GPUPOOL_VERSION + "-linux-" + m.machine;
        fs::create_directories(dist);
        fs::copy_file(GPUPOOL_BINARY, dist / binary_name);
        fs::copy_file(certs.cert, dist / "ca.pem");
        fs::create_directories(dir.path() / "coord");
        coord = std::make_unique<test::CoordinatorProcess>(
            dir.path() / "coord", std::vector<std::string>{"--tls-cert", certs.cert.string(), "--tls-key",
                                                           certs.key.string(), "--dist", dist.string()});
        url = coord->url("https");
        REQUIRE(admin({"admin", "team", "create", "owners"}).exit_code == 0);
        REQUIRE(admin({"admin", "team", "create", "fellows"}).exit_code == 0);
        REQUIRE(admin({"admin", "grant", "fellows", "100"}).exit_code == 0);
        auto made = admin({"admin", "token", "create", "--team", "fellows"});
        REQUIRE(made.exit_code == 0);
        member = made.out.substr(0, made.out.find('\n'));
    }

    test::CliResult admin(std::vector<std::string> args) const {
        args.insert(args.begin(), {"--url", url, "--token", coord->admin(), "--ca-cert", certs.cert.string()});
        return test::run_gpupool(args);
    }

    net::HttpClient client(const std::string& token) const {
        return net::HttpClient(test::client_options(url, token, certs.cert.string()));
    }
};

struct Enrolled {
    std::string token;
    std::string command;
};

Enrolled enroll(const Pool& p) {
    auto r = p.admin({"admin", "enroll", "owners"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    Enrolled e;
    e.token = r.out.substr(0, r.out.find('\n'));
    REQUIRE(e.token.starts_with("gpp_"));
    std::istringstream lines(r.err);
    for (std::string line; std::getline(lines, line);) {
        if (line.starts_with("d=$(mktemp -d)")) {
            e.command = line;
        }
    }
    REQUIRE(!e.command.empty());
    CHECK(e.command.find(e.token) == std::string::npos);
    return e;
}

// A PATH whose every program logs its argv (one line per call) to `log`, then runs the real one.
fs::path make_shims(const fs::path& dir, const fs::path& log) {
    fs::create_directories(dir);
    for (const auto& name : k_programs) {
        const fs::path real = bp::search_path(name);
        if (real.empty()) {
            continue; // wget, say: the script uses curl then
        }
        test::write_file(dir / name, "#!/bin/sh\nprintf '%s\\n' \"" + name + " $*\" >> '" + log.string() + "'\nexec '" +
                                         real.string() + "' \"$@\"\n");
        fs::permissions(dir / name, fs::perms::owner_all);
    }
    return dir;
}

// Every process's argv now, each as one line.
std::vector<std::string> all_cmdlines() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
        std::string text = test::slurp(e.path() / "cmdline");
        std::replace(text.begin(), text.end(), '\0', ' ');
        if (!text.empty()) {
            out.push_back(text);
        }
    }
    return out;
}

// The script's --prefix and --data under `home`.
std::string in_home(const fs::path& home) {
    return "--prefix '" + (home / ".local").string() + "' --data '" + (home / ".local/share/gpupool").string() + "'";
}

struct ScriptRun {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// `command` by /bin/sh in `home`, the token on its stdin, the shims first on PATH.
ScriptRun run_command(const std::string& command, const fs::path& home, const fs::path& token_file,
                      const fs::path& shims) {
    auto env = boost::this_process::environment();
    bp::environment e = env;
    e["HOME"] = home.string();
    e["PATH"] = shims.string() + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    e.erase("GPUPOOL_URL");
    e.erase("GPUPOOL_TOKEN");
    e.erase("GPUPOOL_TOKEN_FILE");
    bp::ipstream out;
    bp::ipstream err;
    bp::child c("/bin/sh", bp::args = {"-c", command}, e, bp::std_in<token_file.string(), bp::std_out> out,
                bp::std_err > err);
    std::string o((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    std::string r((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    c.wait();
    return {c.exit_code(), o, r};
}

} // namespace

TEST_CASE("join: the command enroll prints takes an empty machine to a worker that ran a job, the token in no argv",
          "[dist][cli]") {
    Pool p;
    const auto started = std::chrono::steady_clock::now();
    const Enrolled e = enroll(p);
    // Pinned in the command: the script's SHA-256, the binary's and the CA's.
    CHECK_THAT(e.command, Catch::Contains("--binary " + p.binary_name + " --sha256 "));
    CHECK_THAT(e.command, Catch::Contains("--ca-sha256 "));
    CHECK_THAT(e.command, Catch::Contains("wget"));

    const fs::path home = p.dir.path() / "home";
    fs::create_directories(home);
    const fs::path token_file = p.dir.path() / "typed-token"; // what the owner types, on the script's stdin
    test::write_file(token_file, e.token + "\n");
    const fs::path log = p.dir.path() / "argv.log";
    const fs::path shims = make_shims(p.dir.path() / "shims", log);

    // Watches every process's argv until the job has run.
    std::atomic<bool> watching{true};
    std::atomic<int> seen_with_token{0};
    std::string offender;
    std::thread watcher([&] {
        while (watching) {
            for (const auto& line : all_cmdlines()) {
                if (line.find(e.token) != std::string::npos) {
                    seen_with_token++;
                    offender = line;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
    // Under the temp HOME also as root (the script's defaults for root are /usr/local and /var/lib).
    const std::string command = e.command + " " + in_home(home) +
                                " --runtime process --unsafe-process-runtime --name joined-box "
                                "-- --heartbeat-ms 300 --poll-wait-ms 1000 --cpus-milli 2000 --memory-mib 1024";
    const ScriptRun run = run_command(command, home, token_file, shims);
    const fs::path data = home / ".local/share/gpupool";
    std::int64_t pid = 0;
    std::istringstream(test::slurp(data / "worker.pid")) >> pid;
    struct StopWorker {
        std::int64_t& pid;
        ~StopWorker() {
            if (pid > 0) {
                ::kill(static_cast<pid_t>(pid), SIGKILL);
            }
        }
    } stop_worker{pid};
    INFO("exit " << run.exit_code << "\nstdout: " << run.out << "\nstderr: " << run.err
                 << "\nworker log: " << test::slurp(data / "worker.log"));
    REQUIRE(run.exit_code == 0);
    REQUIRE(pid > 0);
    CHECK_THAT(run.err, Catch::Contains("the worker runs in the background"));
    CHECK(fs::exists(home / ".local/bin/gpupool"));
    CHECK((fs::status(data / "enroll.token").permissions() & fs::perms::group_all) == fs::perms::none);

    // A job for the member's team, to the new worker.
    auto m = p.client(p.member);
    const auto id = test::submit_shell(m, "first-job", "echo joined-and-ran");
    std::string state;
    REQUIRE(test::eventually(
        [&] {
            auto v = m.request("GET", "/v1/jobs/" + std::to_string(id));
            state = v && v->status == 200 ? json::parse(v->body).value("state", std::string()) : "";
            return state == "succeeded" || state == "failed";
        },
        std::chrono::seconds(90), std::chrono::milliseconds(100)));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    watching = false;
    watcher.join();
    CHECK(state == "succeeded");
    std::cout << "join: from `admin enroll` to a job run on the new worker: " << seconds << " s" << std::endl;
    auto logs = m.request("GET", "/v1/jobs/" + std::to_string(id) + "/logs");
    REQUIRE(logs);
    CHECK_THAT(logs->body, Catch::Contains("joined-and-ran"));

    // The token was in no process's argv: not in the shims' log of every program the command ran,
    // not in any /proc/*/cmdline while it ran (nor in the worker's, which is still running).
    const std::string calls = test::slurp(log);
    INFO("calls: " << calls);
    CHECK_THAT(calls, Catch::Contains("sha256sum"));
    CHECK_THAT(calls, Catch::Contains("curl"));
    CHECK(calls.find(e.token) == std::string::npos);
    CHECK(seen_with_token == 0);
    INFO("offender: " << offender);
    CHECK(test::slurp("/proc/" + std::to_string(pid) + "/cmdline").find(e.token) == std::string::npos);
}

TEST_CASE("join: a wrong pinned SHA-256 stops the command before anything is installed", "[dist][cli]") {
    Pool p;
    const Enrolled e = enroll(p);
    const fs::path token_file = p.dir.path() / "typed-token";
    test::write_file(token_file, e.token + "\n");
    const fs::path shims = make_shims(p.dir.path() / "shims", p.dir.path() / "argv.log");
    const std::regex binary_pin("--sha256 [0-9a-f]{64}");
    const std::string zeros(64, '0');
    struct Case {
        const char* what;
        std::string command;
        const char* says;
    };
    std::string wrong_script = e.command;
    const auto at = wrong_script.find("\" = ");
    REQUIRE(at != std::string::npos);
    wrong_script.replace(at + 4, 64, zeros);
    const std::vector<Case> cases{
        {"the binary's pin", std::regex_replace(e.command, binary_pin, "--sha256 " + zeros),
         "does not match the SHA-256"},
        {"the script's pin", wrong_script, "install.sh does not match its pinned SHA-256"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        const fs::path home = p.dir.path() / (std::string("home-") + (c.what[4] == 'b' ? "b" : "s"));
        fs::create_directories(home);
        const ScriptRun run = run_command(
            c.command + " " + in_home(home) + " --runtime process --unsafe-process-runtime", home, token_file, shims);
        INFO("stderr: " << run.err);
        CHECK(run.exit_code != 0);
        CHECK_THAT(run.err, Catch::Contains(c.says));
        CHECK_FALSE(fs::exists(home / ".local/bin/gpupool"));
        CHECK_FALSE(fs::exists(home / ".local/share/gpupool"));
    }
}

} // namespace test_join_cli
} // namespace
