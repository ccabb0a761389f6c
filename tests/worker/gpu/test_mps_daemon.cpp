// The worker's MPS control daemon, against a stand-in `nvidia-cuda-mps-control` first on PATH. The
// stand-in behaves as NVIDIA documents the real one: `-d` starts a background daemon that writes its
// pid to `$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid`, makes its `control` pipe there (a fifo,
// 0666: the real one's is a socket its clients connect to) and returns 0; without arguments it
// reads commands on stdin: `get_server_list` succeeds only while that daemon runs, `quit` stops it.
// It records its argv, the MPS variables and every stdin line in calls.log. Files in its directory
// change its behaviour: `fail-start` (`-d` exits 3 with a message), `ignore-quit` (a wedged daemon),
// `hang` (every call sleeps 30 s).
#include "tests/path_first.hpp"
#include "tests/support.hpp"
#include "worker/gpu/mps_daemon.hpp"
#include "worker/runtime/bounded_run.hpp"

#include <boost/process/search_path.hpp>
#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_mps_daemon {

using namespace gpupool::worker;
using gpupool::test::PathFirst;
using gpupool::test::slurp;
using gpupool::test::TempDir;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

const char* const k_stand_in = R"SH(#!/bin/bash
here=$(dirname "$0")
log="$here/calls.log"
pidfile="$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
echo "argv:[$*] pipe:[$CUDA_MPS_PIPE_DIRECTORY] log:[$CUDA_MPS_LOG_DIRECTORY] visible:[$CUDA_VISIBLE_DEVICES]" >> "$log"
echo "token:[${GPUPOOL_TOKEN:-}]" >> "$log"
if [ -e "$here/hang" ]; then
    echo $$ > "$here/hung.pid"
    exec sleep 30
fi
alive() { [ -n "$1" ] && [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"; }
daemon_pid() { cat "$pidfile" 2> /dev/null; }
if [ "$1" = -d ]; then
    if [ -e "$here/fail-start" ]; then
        echo "stand-in: no CUDA-capable device is detected" >&2
        exit 3
    fi
    if alive "$(daemon_pid)"; then
        echo "An instance of this daemon is already running" >&2
        exit 1
    fi
    (trap 'exit 0' TERM; while :; do sleep 0.1; done) < /dev/null > /dev/null 2>&1 &
    echo $! > "$pidfile"
    [ -p "$CUDA_MPS_PIPE_DIRECTORY/control" ] || mkfifo -m 0666 "$CUDA_MPS_PIPE_DIRECTORY/control"
    exit 0
fi
while IFS= read -r line; do
    echo "stdin:$line" >> "$log"
    alive "$(daemon_pid)" || { echo "Cannot find MPS control daemon process"; exit 1; }
    case "$line" in
        get_server_list) ;;
        quit) [ -e "$here/ignore-quit" ] || kill -TERM "$(daemon_pid)" ;;
    esac
done
exit 0
)SH";

struct StandIn {
    TempDir bin;
    TempDir work;
    TempDir run; // stands for /run (0755, as the temp dir is made)
    PathFirst path{bin.path()};
    MpsDirs dirs = mps_dirs(work.path(), ::geteuid(), run.path());

    StandIn() { fs::permissions(bin.write("nvidia-cuda-mps-control", k_stand_in), fs::perms::owner_all); }
    ~StandIn() { // whatever a failed test left running
        if (auto pid = daemon_pid()) {
            ::kill(*pid, SIGKILL);
        }
    }
    StandIn(const StandIn&) = delete;
    StandIn& operator=(const StandIn&) = delete;
    std::string calls() const { return slurp(bin.path() / "calls.log"); }
    void touch(const std::string& name) const { bin.write(name, ""); }
    std::optional<pid_t> daemon_pid() const {
        std::ifstream in(dirs.pipe / "nvidia-cuda-mps-control.pid");
        pid_t pid = 0;
        return (in >> pid) && pid > 1 ? std::optional<pid_t>(pid) : std::nullopt;
    }
};

// Gone, or a zombie nobody has reaped yet.
bool process_gone(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("State:", 0) == 0) {
            return line.find('Z') != std::string::npos;
        }
    }
    return true;
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) {
        ++n;
    }
    return n;
}

// `env` with another pipe directory.
std::map<std::string, std::string> quarter_with_pipe(std::map<std::string, std::string> env, const std::string& pipe) {
    env["CUDA_MPS_PIPE_DIRECTORY"] = pipe;
    return env;
}

mode_t mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

} // namespace

TEST_CASE("mps: a root worker's pipes are in /run, one folder per work dir - anyone else's under the work dir",
          "[mps]") {
    auto root = mps_dirs("/var/lib/gpupool/worker", 0);
    CHECK(root.pipe.parent_path() == "/run");
    CHECK(root.pipe.filename().string().rfind("gpupool-mps-", 0) == 0);
    CHECK(root.pipe.filename().string().size() == std::string("gpupool-mps-").size() + 16);
    CHECK(root.log == "/var/lib/gpupool/worker/mps/log"); // the logs stay the worker's
    // The same work dir, however spelled, finds the same daemon again; another work dir has its own.
    CHECK(mps_dirs("/var/lib/gpupool/worker/", 0).pipe == root.pipe);
    CHECK(mps_dirs("/var/lib/gpupool/./worker", 0).pipe == root.pipe);
    CHECK(mps_dirs("/var/lib/gpupool/other", 0).pipe != root.pipe);
    CHECK(mps_dirs("/var/lib/gpupool/worker", 0, "/tmp/r").pipe == "/tmp/r" / root.pipe.filename());

    auto user = mps_dirs("/home/ada/.local/share/gpupool/worker", 1000);
    CHECK(user.pipe == "/home/ada/.local/share/gpupool/worker/mps/pipe");
    CHECK(user.log == "/home/ada/.local/share/gpupool/worker/mps/log");
    CHECK(mps_dirs("rel/work", 1000).pipe.is_absolute());
}

TEST_CASE("mps: start runs `-d` with the pipe and log directories and the GPUs by UUID, and waits until it answers",
          "[mps]") {
    StandIn s;
    ::setenv("GPUPOOL_TOKEN", "the-workers-secret", 1); // the daemon's servers run as the jobs' user
    auto mps = make_mps_control(milliseconds(3000));
    CHECK_FALSE(mps->running());
    auto started = mps->start(s.dirs, {"GPU-aaaa", "GPU-bbbb"});
    ::unsetenv("GPUPOOL_TOKEN");
    REQUIRE(started);
    CHECK(mps->running());
    CHECK(mode_of(s.dirs.pipe) == 0755);
    CHECK(mode_of(s.dirs.log) == 0700);
    const std::string env =
        " pipe:[" + s.dirs.pipe.string() + "] log:[" + s.dirs.log.string() + "] visible:[GPU-aaaa,GPU-bbbb]";
    const std::string calls = s.calls();
    CHECK_THAT(calls, Catch::Contains("argv:[-d]" + env));
    CHECK(count(calls, "argv:[-d]") == 1);
    CHECK_THAT(calls, Catch::Contains("argv:[]" + env + "\ntoken:[]\nstdin:get_server_list"));
    CHECK_THAT(calls, !Catch::Contains("the-workers-secret"));
    REQUIRE(s.daemon_pid());
    CHECK_FALSE(process_gone(*s.daemon_pid()));
    REQUIRE(mps->stop());
    CHECK_FALSE(fs::exists(s.dirs.pipe)); // its pipes went with it
    CHECK(fs::exists(s.dirs.log));
}

TEST_CASE("mps: start adopts a daemon a previous worker left answering on the same directories", "[mps]") {
    StandIn s;
    fs::create_directories(s.dirs.pipe);
    // The previous worker's daemon, started as it would have been, then the worker was killed.
    BoundedRunOptions as_before;
    as_before.env = {{"CUDA_MPS_PIPE_DIRECTORY", s.dirs.pipe.string()}};
    auto prev = run_bounded(boost::process::search_path("nvidia-cuda-mps-control").string(), {"-d"}, as_before);
    REQUIRE(prev);
    REQUIRE(prev->exit_code == 0);
    const auto pid = s.daemon_pid();
    REQUIRE(pid);

    auto mps = make_mps_control(milliseconds(3000));
    REQUIRE(mps->start(s.dirs, {"GPU-aaaa"}));
    CHECK(mps->running());
    CHECK(count(s.calls(), "argv:[-d]") == 1); // only the previous worker's
    CHECK(s.daemon_pid() == pid);
    REQUIRE(mps->stop()); // adopted means owned: this worker stops it
    CHECK(process_gone(*pid));
}

TEST_CASE("mps: stop sends quit, waits until the daemon is gone, and running() is false after it", "[mps]") {
    StandIn s;
    auto mps = make_mps_control(milliseconds(3000));
    REQUIRE(mps->start(s.dirs, {"GPU-aaaa"}));
    const auto pid = s.daemon_pid();
    REQUIRE(pid);
    REQUIRE(mps->stop());
    CHECK_THAT(s.calls(), Catch::Contains("stdin:quit"));
    CHECK(process_gone(*pid)); // stop returned only once it was gone
    CHECK_FALSE(mps->running());
    CHECK(mps->stop()); // idempotent
    CHECK(count(s.calls(), "stdin:quit") == 1);
}

TEST_CASE("mps: destroying a started control stops its daemon", "[mps]") {
    StandIn s;
    std::optional<pid_t> pid;
    {
        auto mps = make_mps_control(milliseconds(3000));
        REQUIRE(mps->start(s.dirs, {"GPU-aaaa"}));
        pid = s.daemon_pid();
    }
    REQUIRE(pid);
    CHECK_THAT(s.calls(), Catch::Contains("stdin:quit"));
    CHECK(process_gone(*pid));
}

TEST_CASE("mps: start fails with a clear error when the program is missing or exits non-zero", "[mps]") {
    SECTION("missing") {
        if (!boost::process::search_path("nvidia-cuda-mps-control").empty()) {
            WARN("nvidia-cuda-mps-control is installed here: the missing-program case cannot be shown");
            return;
        }
        TempDir work;
        TempDir run;
        const auto dirs = mps_dirs(work.path(), ::geteuid(), run.path());
        auto mps = make_mps_control(milliseconds(1000));
        auto st = mps->start(dirs, {"GPU-aaaa"});
        REQUIRE_FALSE(st);
        CHECK_THAT(st.error().message, Catch::Contains("nvidia-cuda-mps-control is not on PATH"));
        CHECK_FALSE(fs::exists(dirs.pipe)); // not left behind
        CHECK_FALSE(mps->running());
        CHECK(mps->stop());
        CHECK_FALSE(mps_available());
    }
    SECTION("exits non-zero") {
        StandIn s;
        s.touch("fail-start");
        auto mps = make_mps_control(milliseconds(1000));
        auto st = mps->start(s.dirs, {"GPU-aaaa"});
        REQUIRE_FALSE(st);
        CHECK_THAT(st.error().message, Catch::Contains("nvidia-cuda-mps-control -d exited with status 3") &&
                                           Catch::Contains("no CUDA-capable device is detected"));
        CHECK_FALSE(mps->running());
        CHECK_FALSE(fs::exists(s.dirs.pipe));
    }
    SECTION("no GPU to serve") {
        StandIn s;
        auto st = make_mps_control(milliseconds(1000))->start(s.dirs, {});
        REQUIRE_FALSE(st);
        CHECK_THAT(st.error().message, Catch::Contains("at least one GPU"));
        CHECK(s.calls().empty());
    }
}

TEST_CASE("mps: a control program that hangs is killed and reported, in bounded time", "[mps]") {
    StandIn s;
    s.touch("hang");
    auto mps = make_mps_control(milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    auto st = mps->start(s.dirs, {"GPU-aaaa"});
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains("nvidia-cuda-mps-control -d did not return within 300 ms"));
    CHECK(took < std::chrono::seconds(5)); // get_server_list (300 ms) and -d (300 ms), each cut off
    const std::string hung = gpupool::test::slurp(s.bin.path() / "hung.pid");
    REQUIRE_FALSE(hung.empty());
    CHECK(process_gone(std::stoi(hung))); // killed, not left sleeping
}

TEST_CASE("mps: a wedged daemon that ignores quit is killed by its pid, so stop stays bounded", "[mps]") {
    StandIn s;
    auto mps = make_mps_control(milliseconds(500), milliseconds(300));
    REQUIRE(mps->start(s.dirs, {"GPU-aaaa"}));
    const auto pid = s.daemon_pid();
    REQUIRE(pid);

    SECTION("quit is taken but ignored") {
        s.touch("ignore-quit");
    }
    SECTION("the control program itself hangs on quit") {
        s.touch("hang");
    }
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(mps->stop());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(6));
    CHECK(process_gone(*pid));
    fs::remove(s.bin.path() / "hang");
    CHECK_FALSE(mps->running());
    CHECK_FALSE(fs::exists(s.dirs.pipe / "nvidia-cuda-mps-control.pid"));
}

TEST_CASE("mps: available only with the control program and a GPU nvidia-smi lists", "[mps]") {
    StandIn s;
    if (!boost::process::search_path("nvidia-smi").empty()) {
        WARN("nvidia-smi is installed here: only the case with a GPU is shown");
    } else {
        CHECK_FALSE(mps_available()); // the control program, but no GPU
    }
    auto smi = s.bin.write("nvidia-smi", "#!/bin/sh\necho '0, GPU-aaaa, NVIDIA L4, 23034'\n");
    fs::permissions(smi, fs::perms::owner_all);
    CHECK(mps_available());
}

// Whether `uid` (with that gid, no other groups) can reach `p`: every directory above it passable.
// Asked in a child that becomes that user, so it is the kernel's answer, not ours. Needs root.
bool reachable_as(uid_t uid, const fs::path& p) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        struct stat st {};
        const bool ok =
            ::setgroups(0, nullptr) == 0 && ::setgid(uid) == 0 && ::setuid(uid) == 0 && ::stat(p.c_str(), &st) == 0;
        ::_exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST_CASE("mps: a root worker's container jobs (uid 65534) reach the pipes past its 0700 work dir", "[mps]") {
    if (::geteuid() != 0) {
        WARN("not root: a worker that is not root keeps its pipes in its work dir, its jobs run as itself");
        CHECK(mps_dirs("/w", ::geteuid()).pipe == "/w/mps/pipe");
        return;
    }
    StandIn s;
    fs::permissions(s.work.path(), fs::perms::owner_all); // the worker's work dir: 0700
    auto mps = make_mps_control(milliseconds(3000));
    REQUIRE(mps->start(s.dirs, {"GPU-aaaa"}));
    CHECK(mode_of(s.dirs.pipe) == 0755);
    CHECK(mode_of(s.work.path()) == 0700); // never opened to reach the pipes
    const fs::path control = s.dirs.pipe / "control";
    REQUIRE(fs::exists(control));
    CHECK(reachable_as(65534, control));
    CHECK_FALSE(reachable_as(65534, s.dirs.log)); // the logs are the worker's
    // Where the pipes were before (under the work dir), that user could not reach them: the test
    // tells the two apart.
    const auto before = mps_dirs(s.work.path(), 1000).pipe / "control";
    fs::create_directories(before.parent_path());
    gpupool::test::write_file(before, "");
    CHECK_FALSE(reachable_as(65534, before));
    REQUIRE(mps->stop());
}

TEST_CASE("mps: start refuses a pipe directory that is a link or not the worker's", "[mps]") {
    StandIn s;
    TempDir elsewhere;
    fs::create_directory_symlink(elsewhere.path(), s.dirs.pipe);
    auto mps = make_mps_control(milliseconds(1000));
    auto st = mps->start(s.dirs, {"GPU-aaaa"});
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains(s.dirs.pipe.string()) && Catch::Contains("symbolic link"));
    CHECK(s.calls().empty()); // nothing was started on it
    if (::geteuid() == 0) {
        fs::remove(s.dirs.pipe);
        fs::create_directory(s.dirs.pipe);
        REQUIRE(::chown(s.dirs.pipe.c_str(), 65534, 65534) == 0);
        auto theirs = mps->start(s.dirs, {"GPU-aaaa"});
        REQUIRE_FALSE(theirs);
        CHECK_THAT(theirs.error().message, Catch::Contains("belongs to uid 65534"));
    }
}

TEST_CASE("mps: the compute setting reads `throughput` or `isolate`, and throughput is the default", "[mps]") {
    CHECK(parse_mps_compute("throughput").value() == MpsCompute::throughput);
    CHECK(parse_mps_compute("isolate").value() == MpsCompute::isolate);
    auto bad = parse_mps_compute("fair");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message,
               Catch::Contains("`throughput`") && Catch::Contains("`isolate`") && Catch::Contains("got `fair`"));
    CHECK(k_default_mps_compute == MpsCompute::throughput);
    CHECK(std::string(to_string(MpsCompute::isolate)) == "isolate");
}

TEST_CASE("mps: under throughput a client's memory is capped and its compute is not", "[mps]") {
    auto quarter = mps_client_env(250, 6000, 0, k_mps_pipe_in_container, MpsCompute::throughput);
    CHECK(quarter == std::map<std::string, std::string>{{"CUDA_MPS_PIPE_DIRECTORY", "/run/gpupool-mps"},
                                                        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=6000M"}});
    CHECK(mps_client_env(250, 6000, 0, "/p") == quarter_with_pipe(quarter, "/p"));
}

TEST_CASE("mps: under isolate a client's environment holds the pipe dir it sees, its memory cap and its share of "
          "the SMs",
          "[mps]") {
    const auto mps_client_env = [](std::int64_t milli, std::int64_t mib, int device, const std::string& pipe) {
        return gpupool::worker::mps_client_env(milli, mib, device, pipe, MpsCompute::isolate);
    };
    // shares: 250, 500 and 1000 milli-GPU; 6000 MiB each; the job sees its GPU as device 0
    auto quarter = mps_client_env(250, 6000, 0, k_mps_pipe_in_container);
    CHECK(quarter == std::map<std::string, std::string>{{"CUDA_MPS_PIPE_DIRECTORY", "/run/gpupool-mps"},
                                                        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=6000M"},
                                                        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"}});
    CHECK(mps_client_env(500, 6000, 0, "/run/gpupool-mps").at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "50");
    CHECK(mps_client_env(1000, 6000, 0, "/run/gpupool-mps").at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "100");
    // a bare process sees the host's pipe dir and every GPU, its own at its host index
    auto bare = mps_client_env(500, 6000, 2, "/var/lib/gpupool/worker/mps/pipe");
    CHECK(bare.at("CUDA_MPS_PIPE_DIRECTORY") == "/var/lib/gpupool/worker/mps/pipe");
    CHECK(bare.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == "2=6000M");
    // rounded up, within 1..100; no cap without a limit; the log dir is the daemon's business only
    CHECK(mps_client_env(333, 6000, 0, "/p").at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "34");
    CHECK(mps_client_env(1, 6000, 0, "/p").at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "1");
    CHECK(mps_client_env(0, 6000, 0, "/p").at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "1");
    CHECK(mps_client_env(2000, 6000, 0, "/p").at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "100");
    CHECK(mps_client_env(250, 0, 0, "/p").count("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == 0);
    CHECK(quarter.count("CUDA_MPS_LOG_DIRECTORY") == 0);
}

} // namespace test_mps_daemon
} // namespace
