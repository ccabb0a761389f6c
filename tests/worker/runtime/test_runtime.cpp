// One table of behaviours run against every runtime this machine has: process always, podman when
// `podman image exists localhost/gpupool/busybox:latest`, docker when GPUPOOL_TEST_DOCKER_HOST is set
// and that daemon answers. A missing engine is a WARN and a skip (`.ci/setup-containers` installs
// them), or a failure when GPUPOOL_REQUIRE_CONTAINERS=1 (CI).
#include "core/api/run_report.hpp"
#include "core/util/strings.hpp"
#include "tests/support.hpp"
#include "tests/worker/runtime/runtimes_under_test.hpp"
#include "worker/agent/process_owner.hpp"
#include "worker/runtime/oci_runtime.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <boost/process.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <mutex>
#include <signal.h>
#include <sstream>
#include <thread>
#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_runtime {

namespace fs = std::filesystem;
namespace bp = boost::process;
using namespace gpupool;
using namespace gpupool::worker;
using namespace std::chrono_literals;

namespace {

using test::slurp;

using test::env_or;
using Candidate = test::RuntimeUnderTest;
constexpr const char* k_image = test::k_test_image;

const std::vector<Candidate>& candidates() { return test::runtimes_under_test(); }

// A job's directories and spec, laid out like the agent does: /work read-only, /outputs writable.
struct Sandbox {
    test::TempDir dir;
    fs::path work = dir.path() / "work";
    fs::path outputs = dir.path() / "outputs";
    bool in_container = false;

    explicit Sandbox(const Candidate& c) : in_container(c.isolates) {
        fs::create_directories(work);
        fs::create_directories(outputs);
        // The job runs as 65534 in containers: the agent makes its output directory writable.
        fs::permissions(outputs, fs::perms::all);
    }

    std::string work_dir() const { return in_container ? "/work" : work.string(); }
    std::string output_dir() const { return in_container ? "/outputs" : outputs.string(); }

    ContainerSpec spec(const std::string& script) const {
        static int counter = 0;
        ContainerSpec s;
        s.name = "gpupool-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
        s.image = k_image;
        s.argv = {"sh", "-c", script};
        s.env = {{"GPUPOOL_JOB_ID", "job-42"}, {"GPUPOOL_WORK_DIR", work_dir()}, {"GPUPOOL_OUTPUT_DIR", output_dir()}};
        s.mounts = {{work, "/work", true}, {outputs, "/outputs", false}};
        s.labels = {{"gpupool.worker", worker_label()}, {"gpupool.job", "42"}, {"gpupool.attempt", "7"}};
        s.log_path = dir.path() / "job.log";
        s.workdir = work_dir(); // as the job sees it, as the agent sets it
        s.cpu_milli = 500;
        s.memory_mib = 256;
        s.pids_limit = 100;
        return s;
    }

    static std::string worker_label() { return "test-" + std::to_string(::getpid()); }
    std::string log(const ContainerSpec& s) const { return slurp(s.log_path); }
};

// Removes the job however the test ends.
struct Removed {
    ContainerRuntime& rt;
    std::string name;
    ~Removed() { (void)rt.remove(name); }
};

std::optional<ExitStatus> wait_exit(ContainerRuntime& rt, const std::string& name, std::chrono::seconds bound = 20s) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < deadline) {
        auto r = rt.poll(name);
        REQUIRE(r);
        if (*r) {
            return **r;
        }
        std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
}

bool wait_log(const fs::path& log, const std::string& needle, std::chrono::seconds bound = 20s) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < deadline) {
        if (slurp(log).find(needle) != std::string::npos) {
            return true;
        }
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

// Starts `script`, waits for its exit and returns it with the log.
struct Ran {
    int exit_code = -1;
    std::string log;
};

Ran run_to_end(ContainerRuntime& rt, const Sandbox& box, ContainerSpec spec) {
    REQUIRE(rt.start(spec));
    Removed guard{rt, spec.name};
    auto status = wait_exit(rt, spec.name);
    REQUIRE(status);
    return {status->exit_code, box.log(spec)};
}

#define FOR_EACH_RUNTIME(c, rt)                                                                                        \
    for (const Candidate& c : candidates())                                                                            \
        DYNAMIC_SECTION(c.kind)                                                                                        \
    if (auto rt = runtime_or_skip(c))

} // namespace

TEST_CASE("runtime: a job's exit code is reported (0 and 3)", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        CHECK(run_to_end(*rt, box, box.spec("exit 0")).exit_code == 0);
        CHECK(run_to_end(*rt, box, box.spec("echo failing; exit 3")).exit_code == 3);
    }
}

// 125, 126 and 127 are also what podman and docker exit with when they fail themselves: a job that
// exits with them is still the job, and so are 137 and 143 it exits with (no signal, no OOM).
TEST_CASE("runtime: the job's own exit codes 125 126 127 137 143 are reported as they are", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        for (int code : {125, 126, 127, 137, 143}) {
            INFO("exit " << code);
            Ran r = run_to_end(*rt, box, box.spec("echo before-" + std::to_string(code) + "; exit " + std::to_string(code)));
            CHECK(r.exit_code == code);
            CHECK(r.log.find("before-" + std::to_string(code) + "\n") != std::string::npos);
        }
    }
}

// The engine's own failure is no exit of the job's: poll() says the container is not there (the
// agent reports a worker fault, as when `run -d` failed), with the engine's words. A command missing
// in the image is the job's failure: the container's init ran and could not exec it (docker-init
// exits 127, podman's catatonit 1), and says so in the log.
TEST_CASE("container runtime: a missing image is an engine failure (not_found), a missing command the job's",
          "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        if (!c.isolates) {
            continue; // the process runtime refuses a missing command in start()
        }
        Sandbox box(c);
        ContainerSpec spec = box.spec("true");
        spec.image = "localhost/gpupool/no-such-image:latest";
        REQUIRE(rt->start(spec));
        Removed guard{*rt, spec.name};
        Result<std::optional<ExitStatus>> r = std::optional<ExitStatus>{};
        REQUIRE(test::eventually([&] { return !(r = rt->poll(spec.name)) || r->has_value(); }, 30s));
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::not_found);
        CHECK(r.error().message.find("never ran") != std::string::npos);
        CHECK(r.error().message.find("rror") != std::string::npos); // the engine's error line

        ContainerSpec missing = box.spec("");
        missing.argv = {"gpupool-no-such-program"};
        Ran m = run_to_end(*rt, box, missing);
        CHECK((m.exit_code == 127 || m.exit_code == 1));
        CHECK_FALSE(m.log.empty());
    }
}

TEST_CASE("runtime: the job sees its environment", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        ::setenv("GPUPOOL_TEST_WORKER_SECRET", "leaked", 1); // the worker's own environment stays out
        Ran r = run_to_end(*rt, box,
                           box.spec("echo \"job=$GPUPOOL_JOB_ID\"; echo \"path=${PATH:+set}\"; "
                                    "echo \"secret=${GPUPOOL_TEST_WORKER_SECRET:-unset}\""));
        ::unsetenv("GPUPOOL_TEST_WORKER_SECRET");
        CHECK(r.exit_code == 0);
        CHECK(r.log.find("job=job-42\n") != std::string::npos);
        CHECK(r.log.find("path=set\n") != std::string::npos);
        CHECK(r.log.find("secret=unset\n") != std::string::npos);
    }
}

TEST_CASE("runtime: inputs are readable, outputs reach the host, /work is read-only in containers", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        std::ofstream(box.work / "input.txt") << "the input\n";
        Ran r = run_to_end(*rt, box,
                           box.spec("cat \"$GPUPOOL_WORK_DIR/input.txt\" && "
                                    "echo result > \"$GPUPOOL_OUTPUT_DIR/result.txt\" && echo wrote"));
        CHECK(r.exit_code == 0);
        CHECK(r.log.find("the input\n") != std::string::npos);
        CHECK(slurp(box.outputs / "result.txt") == "result\n");
        if (c.isolates) {
            Ran w = run_to_end(*rt, box, box.spec("echo x > /work/new.txt"));
            CHECK(w.exit_code != 0);
            CHECK_FALSE(fs::exists(box.work / "new.txt"));
        }
    }
}

TEST_CASE("runtime: containers run as a non-root user on a read-only root", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        if (!c.isolates) {
            continue; // the process runtime isolates nothing, by design
        }
        Sandbox box(c);
        Ran r = run_to_end(*rt, box,
                           box.spec("echo uid=$(id -u); if echo x > /etc/x; then echo etc-writable; fi; "
                                    "echo t > /tmp/t && echo tmp-writable"));
        CHECK(r.exit_code == 0);
        CHECK(r.log.find("uid=65534\n") != std::string::npos);
        CHECK(r.log.find("etc-writable") == std::string::npos);
        CHECK(r.log.find("tmp-writable\n") != std::string::npos);
    }
}

// cgroup v2 files first, then v1 (this host is hybrid: v1 controllers).
TEST_CASE("runtime: containers see their pids memory and cpu limits and ulimits", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        if (!c.isolates) {
            continue;
        }
        Sandbox box(c);
        Ran r =
            run_to_end(*rt, box,
                       box.spec("cg=/sys/fs/cgroup; "
                                "echo pids=$(cat $cg/pids.max 2>/dev/null || cat $cg/pids/pids.max); "
                                "echo mem=$(cat $cg/memory.max 2>/dev/null || cat $cg/memory/memory.limit_in_bytes); "
                                "echo cpu=$(cut -d' ' -f1 $cg/cpu.max 2>/dev/null || cat $cg/cpu/cpu.cfs_quota_us); "
                                "echo nofile=$(ulimit -n)"));
        CHECK(r.exit_code == 0);
        CHECK(r.log.find("pids=100\n") != std::string::npos);
        CHECK(r.log.find("mem=268435456\n") != std::string::npos); // 256 MiB
        CHECK(r.log.find("cpu=50000\n") != std::string::npos);     // half of a 100 ms period
        CHECK(r.log.find("nofile=4096\n") != std::string::npos);
    }
}

TEST_CASE("runtime: a container over its memory limit is killed (137)", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        if (!c.isolates) {
            continue; // the process runtime has no limits
        }
        Sandbox box(c);
        ContainerSpec spec = box.spec("dd if=/dev/zero of=/dev/null bs=128M count=1 && echo survived");
        spec.memory_mib = 32;
        Ran r = run_to_end(*rt, box, spec);
        CHECK(r.exit_code == 137);
        CHECK(r.log.find("survived") == std::string::npos);
    }
}

TEST_CASE("runtime: SIGTERM ends a job with 143 and SIGKILL one that ignores TERM with 137", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        {
            ContainerSpec spec = box.spec("echo ready; exec sleep 30");
            REQUIRE(rt->start(spec));
            Removed guard{*rt, spec.name};
            REQUIRE(wait_log(spec.log_path, "ready\n"));
            std::this_thread::sleep_for(100ms); // let `exec sleep` happen
            REQUIRE(rt->signal(spec.name, SIGTERM));
            auto status = wait_exit(*rt, spec.name);
            REQUIRE(status);
            CHECK(status->exit_code == 143);
        }
        {
            ContainerSpec spec = box.spec("trap '' TERM; echo ignoring; while true; do sleep 0.05; done");
            REQUIRE(rt->start(spec));
            Removed guard{*rt, spec.name};
            REQUIRE(wait_log(spec.log_path, "ignoring\n"));
            REQUIRE(rt->signal(spec.name, SIGTERM));
            std::this_thread::sleep_for(300ms);
            auto still = rt->poll(spec.name);
            REQUIRE(still);
            CHECK_FALSE(*still); // TERM was ignored
            REQUIRE(rt->signal(spec.name, SIGKILL));
            auto status = wait_exit(*rt, spec.name);
            REQUIRE(status);
            CHECK(status->exit_code == 137);
        }
    }
}

// The process runtime shares one file descriptor between stdout and stderr, so their interleaving is
// exact. An engine reads a container's stdout and stderr from two pipes and stores what it reads, so
// across the two streams order is only as good as its reads; each stream keeps its own order, and
// nothing is missing once the exit is reported.
TEST_CASE("runtime: stdout and stderr are complete and in order when the exit is reported", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        Ran r = run_to_end(*rt, box,
                           box.spec("i=1; while [ $i -le 200 ]; do if [ $((i % 2)) -eq 0 ]; then echo $i >&2; "
                                    "else echo $i; fi; i=$((i + 1)); done"));
        CHECK(r.exit_code == 0);
        std::string all;
        std::string odd;
        std::string even;
        for (int i = 1; i <= 200; ++i) {
            all += std::to_string(i) + "\n";
            (i % 2 == 1 ? odd : even) += std::to_string(i) + "\n";
        }
        if (!c.isolates) {
            CHECK(r.log == all);
            continue;
        }
        std::string got_odd;
        std::string got_even;
        std::istringstream lines(r.log);
        for (std::string line; std::getline(lines, line);) {
            (std::stoi(line) % 2 == 1 ? got_odd : got_even) += line + "\n";
        }
        CHECK(r.log.size() == all.size());
        CHECK(got_odd == odd);   // stdout, in order
        CHECK(got_even == even); // stderr, in order
    }
}

// Removes the job through whichever runtime object `rt` holds when the test ends.
struct RemovedVia {
    std::unique_ptr<ContainerRuntime>& rt;
    std::string name;
    ~RemovedVia() {
        if (rt) {
            (void)rt->remove(name);
        }
    }
};

TEST_CASE("runtime: list finds running labelled jobs and reattach resumes their log", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        ContainerSpec spec = box.spec("echo first; sleep 0.5; echo second; exec sleep 30");
        REQUIRE(rt->start(spec));
        RemovedVia guard{rt, spec.name};
        REQUIRE(wait_log(spec.log_path, "first\n"));
        auto found = rt->list(Sandbox::worker_label());
        REQUIRE(found);
        if (!c.isolates) {
            CHECK(found->empty());
            CHECK_FALSE(rt->reattach(spec.name, spec.log_path));
            continue;
        }
        auto it =
            std::find_if(found->begin(), found->end(), [&](const FoundContainer& f) { return f.name == spec.name; });
        REQUIRE(it != found->end());
        CHECK(it->running);
        CHECK(it->labels.at("gpupool.job") == "42");
        CHECK(it->labels.at("gpupool.attempt") == "7");
        auto other = rt->list("no-such-worker-" + std::to_string(::getpid()));
        REQUIRE(other);
        CHECK(other->empty());

        // The worker restarts: the old runtime (and its log follower) goes, a fresh one re-attaches,
        // and the log is complete from the start, once.
        auto again = c.make();
        REQUIRE(again);
        rt = std::move(*again);
        REQUIRE(rt->reattach(spec.name, spec.log_path));
        REQUIRE(wait_log(spec.log_path, "second\n"));
        std::this_thread::sleep_for(100ms);
        CHECK(box.log(spec) == "first\nsecond\n");
        auto running = rt->poll(spec.name);
        REQUIRE(running);
        CHECK_FALSE(*running);
        REQUIRE(rt->signal(spec.name, SIGKILL));
        auto status = wait_exit(*rt, spec.name);
        REQUIRE(status);
        CHECK(status->exit_code == 137);
        CHECK(rt->remove(spec.name));
        CHECK_FALSE(rt->reattach("gpupool-test-never-started", spec.log_path));
    }
}

TEST_CASE("runtime: a running job's processes carry the marks its runtime reports", "[runtime][reclaim]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        const std::string token = "gpupool-mark-" + std::to_string(::getpid()) + "-" + c.kind;
        ContainerSpec spec = box.spec("sleep 30; echo " + token);
        REQUIRE(rt->start(spec));
        RemovedVia guard{rt, spec.name};
        auto marks = rt->process_marks(spec.name);
        REQUIRE(marks.has_value());
        if (c.isolates) {
            CHECK(marks->container_id.size() == 64); // the engine's id: it names the container's cgroup
        } else {
            CHECK(marks->session > 0);
        }
        // The job's processes as the host sees them (the shell, and a container's init), by command line.
        std::vector<std::int64_t> pids;
        REQUIRE(test::eventually([&] {
            for (const auto& e : fs::directory_iterator("/proc")) {
                const auto name = e.path().filename().string();
                const std::string cmdline = slurp(e.path() / "cmdline");
                // Not the engine's `run` CLI, whose arguments hold the job's command: it is the worker's.
                if (name.find_first_not_of("0123456789") == std::string::npos &&
                    cmdline.find(token) != std::string::npos &&
                    cmdline.find(std::string("run") + '\0' + "--name" + '\0') == std::string::npos) {
                    pids.push_back(std::stoll(name));
                }
            }
            return !pids.empty();
        }));
        const std::vector<worker::JobMark> jobs{{7, 0, marks->container_id, marks->session}};
        for (auto pid : pids) {
            INFO("pid " << pid << " cgroup " << slurp("/proc/" + std::to_string(pid) + "/cgroup"));
            CHECK(worker::owner_of_process("/proc", pid, jobs) == worker::ProcessOwner::job);
            CHECK(worker::owner_of_process("/proc", pid, {}) == worker::ProcessOwner::foreign);
        }
        CHECK(worker::owner_of_process("/proc", ::getpid(), jobs) == worker::ProcessOwner::foreign);
        if (c.isolates) {
            // After a worker restart the id comes from the engine.
            auto again = c.make();
            REQUIRE(again);
            rt = std::move(*again);
            CHECK_FALSE(rt->process_marks(spec.name).has_value()); // not re-attached yet
            REQUIRE(rt->reattach(spec.name, spec.log_path));
            auto after = rt->process_marks(spec.name);
            REQUIRE(after.has_value());
            CHECK(after->container_id == marks->container_id);
        }
    }
}

TEST_CASE("runtime: remove stops a running job and is idempotent", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        ContainerSpec spec = box.spec("echo started; exec sleep 30");
        REQUIRE(rt->start(spec));
        REQUIRE(wait_log(spec.log_path, "started\n"));
        auto t0 = std::chrono::steady_clock::now();
        CHECK(rt->remove(spec.name));
        CHECK(std::chrono::steady_clock::now() - t0 < 10s);
        CHECK(rt->remove(spec.name));
        CHECK(rt->remove("gpupool-test-never-started"));
        auto found = rt->list(Sandbox::worker_label());
        REQUIRE(found);
        for (const auto& f : *found) {
            CHECK(f.name != spec.name);
        }
        CHECK_FALSE(rt->poll(spec.name));
    }
}

TEST_CASE("runtime: starting a name twice is refused", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        ContainerSpec spec = box.spec("sleep 30");
        REQUIRE(rt->start(spec));
        Removed guard{*rt, spec.name};
        CHECK_FALSE(rt->start(spec));
    }
}

TEST_CASE("process runtime: no leaked descriptors, no zombies, a process group per job", "[runtime]") {
    auto rt = make_runtime("process");
    REQUIRE(rt);
    Candidate c{"process", {}, "", false};
    Sandbox box(c);
    // A descriptor the worker opened without O_CLOEXEC must not reach the job.
    int leaky = ::open("/dev/null", O_RDONLY);
    REQUIRE(leaky >= 0);
    ContainerSpec spec = box.spec("echo pid=$$; if [ -e /proc/$$/fd/" + std::to_string(leaky) +
                                  " ]; then echo leaked; fi; sleep 30 & echo child=$!; wait");
    REQUIRE((*rt)->start(spec));
    ::close(leaky);
    Removed guard{**rt, spec.name};
    REQUIRE(wait_log(spec.log_path, "child="));
    std::string log = box.log(spec);
    CHECK(log.find("leaked") == std::string::npos);
    pid_t pid = std::stoi(log.substr(log.find("pid=") + 4));
    pid_t child = std::stoi(log.substr(log.find("child=") + 6));
    CHECK(::getpgid(child) == pid); // same group as the job's main process, which leads it
    CHECK(::getsid(pid) == pid);

    // SIGTERM to the group reaches the background child too.
    REQUIRE((*rt)->signal(spec.name, SIGTERM));
    auto status = wait_exit(**rt, spec.name);
    REQUIRE(status);
    CHECK(status->exit_code == 143);
    CHECK(::kill(pid, 0) != 0); // reaped, not a zombie
    REQUIRE((*rt)->remove(spec.name));
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (::kill(child, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    CHECK(::kill(child, 0) != 0);
}

TEST_CASE("process runtime: a job starts with no signal blocked or ignored, whatever the worker's thread had",
          "[runtime]") {
    auto rt = make_runtime("process");
    REQUIRE(rt);
    Candidate c{"process", {}, "", false};
    Sandbox box(c);
    // What a network daemon's thread typically has: SIGPIPE ignored, a signal it waits for blocked.
    struct sigaction ignore {};
    struct sigaction before {};
    ignore.sa_handler = SIG_IGN;
    ::sigemptyset(&ignore.sa_mask);
    REQUIRE(::sigaction(SIGPIPE, &ignore, &before) == 0);
    sigset_t usr1;
    sigset_t mask_before;
    ::sigemptyset(&usr1);
    ::sigaddset(&usr1, SIGUSR1);
    REQUIRE(::pthread_sigmask(SIG_BLOCK, &usr1, &mask_before) == 0);
    ContainerSpec spec = box.spec("grep -E '^Sig(Blk|Ign):' /proc/self/status");
    auto started = (*rt)->start(spec);
    ::pthread_sigmask(SIG_SETMASK, &mask_before, nullptr);
    ::sigaction(SIGPIPE, &before, nullptr);
    REQUIRE(started);
    Removed guard{**rt, spec.name};
    auto status = wait_exit(**rt, spec.name);
    REQUIRE(status);
    CHECK(status->exit_code == 0);
    // /proc's masks, in hex, bit n - 1 for signal n.
    const std::string log = box.log(spec);
    auto mask = [&log](const std::string& name) {
        const std::size_t at = log.find(name + ":\t");
        REQUIRE(at != std::string::npos);
        return std::stoull(log.substr(at + name.size() + 2, 16), nullptr, 16);
    };
    INFO(log);
    CHECK((mask("SigBlk") & (1ULL << (SIGUSR1 - 1))) == 0);
    CHECK((mask("SigIgn") & (1ULL << (SIGPIPE - 1))) == 0);
    // None of signals 1 to 31 at all (glibc keeps its own 32 and 33 out of posix_spawn's reach).
    CHECK((mask("SigBlk") & 0x7fffffffULL) == 0);
    CHECK((mask("SigIgn") & 0x7fffffffULL) == 0);
}

TEST_CASE("process runtime: a command that does not exist is an error", "[runtime]") {
    auto rt = make_runtime("process");
    REQUIRE(rt);
    Candidate c{"process", {}, "", false};
    Sandbox box(c);
    ContainerSpec spec = box.spec("");
    spec.argv = {"gpupool-no-such-program"};
    auto started = (*rt)->start(spec);
    REQUIRE_FALSE(started);
    CHECK(started.error().message.find("gpupool-no-such-program") != std::string::npos);
    CHECK(make_runtime("lxc").has_error());
}

TEST_CASE("runtime: on_exit wakes the agent when a job ends, not before, and poll then has its status",
          "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        Sandbox box(c);
        std::mutex mu;
        std::condition_variable cv;
        int woken = 0;
        rt->on_exit([&] {
            {
                std::lock_guard lock(mu);
                ++woken;
            }
            cv.notify_all();
        });
        ContainerSpec spec = box.spec("echo up; sleep 1; echo down; exit 7");
        REQUIRE(rt->start(spec));
        Removed guard{*rt, spec.name};
        REQUIRE(wait_log(spec.log_path, "up\n"));
        const auto began = std::chrono::steady_clock::now();
        std::unique_lock lock(mu);
        CHECK_FALSE(cv.wait_for(lock, 300ms, [&] { return woken > 0; })); // still running
        REQUIRE(cv.wait_for(lock, 20s, [&] { return woken > 0; }));
        lock.unlock();
        CHECK(std::chrono::steady_clock::now() - began >= 500ms);
        auto st = rt->poll(spec.name);
        REQUIRE(st.has_value());
        REQUIRE(st->has_value()); // seen at once, with no tick between
        CHECK((*st)->exit_code == 7);
        CHECK(box.log(spec) == "up\ndown\n");
        rt->on_exit(nullptr);
    }
}

// Removing a finished job costs the caller nothing: the container goes soon after, with others in
// one call, and those still waiting when the runtime goes are removed before it has gone.
TEST_CASE("container runtime: finished containers are removed off the caller's thread", "[runtime][slow]") {
    FOR_EACH_RUNTIME(c, rt) {
        if (!c.isolates) {
            continue;
        }
        Sandbox box(c);
        auto present = [&](const std::string& name) {
            auto found = rt->list(Sandbox::worker_label());
            REQUIRE(found);
            return std::any_of(found->begin(), found->end(), [&](const FoundContainer& f) { return f.name == name; });
        };
        std::vector<std::string> names;
        for (int i = 0; i < 3; ++i) {
            ContainerSpec spec = box.spec("exit " + std::to_string(i));
            REQUIRE(rt->start(spec));
            auto status = wait_exit(*rt, spec.name);
            REQUIRE(status);
            CHECK(status->exit_code == i);
            CHECK(present(spec.name)); // exited, not removed yet
            const auto t0 = std::chrono::steady_clock::now();
            REQUIRE(rt->remove(spec.name));
            CHECK(std::chrono::steady_clock::now() - t0 < 100ms);
            CHECK_FALSE(rt->poll(spec.name)); // gone for the runtime at once
            names.push_back(spec.name);
        }
        CHECK(test::eventually([&] { return std::none_of(names.begin(), names.end(), present); }, 20s));

        ContainerSpec last = box.spec("true");
        REQUIRE(rt->start(last));
        REQUIRE(wait_exit(*rt, last.name));
        REQUIRE(rt->remove(last.name));
        auto again = c.make(); // the runtime goes at once: the pending removal is done first
        REQUIRE(again);
        rt = std::move(*again);
        CHECK_FALSE(present(last.name));
    }
}

// A foreground `run` CLI that dies (killed by someone) is no exit of the job's: the runtime follows
// the container to its end as after a restart, and the log is complete (replayed from the start).
TEST_CASE("container runtime: a run child killed under a job leaves the job followed to its end", "[runtime]") {
    FOR_EACH_RUNTIME(c, rt) {
        if (!c.isolates) {
            continue;
        }
        Sandbox box(c);
        ContainerSpec spec = box.spec("echo first; sleep 1; echo second; exit 5");
        REQUIRE(rt->start(spec));
        Removed guard{*rt, spec.name};
        REQUIRE(wait_log(spec.log_path, "first\n"));
        int killed = 0;
        for (const auto& e : fs::directory_iterator("/proc")) {
            const auto pid = e.path().filename().string();
            const std::string cmdline = slurp(e.path() / "cmdline");
            if (pid.find_first_not_of("0123456789") == std::string::npos &&
                cmdline.find(std::string("run") + '\0' + "--name" + '\0' + spec.name) != std::string::npos) {
                killed += ::kill(std::stoi(pid), SIGKILL) == 0 ? 1 : 0;
            }
        }
        REQUIRE(killed == 1);
        auto status = wait_exit(*rt, spec.name);
        REQUIRE(status);
        CHECK(status->exit_code == 5);
        CHECK(box.log(spec) == "first\nsecond\n");
    }
}

namespace {

// What the engine itself answers to `image inspect --format FORMAT image` (the test's own asking).
std::string engine_says(const Candidate& c, const std::string& format, const std::string& image) {
    std::vector<std::string> args;
    if (c.kind == "docker") {
        args = {"-H", env_or("GPUPOOL_TEST_DOCKER_HOST")};
    }
    args.insert(args.end(), {"image", "inspect", "--format", format, image});
    bp::ipstream out;
    bp::child child(bp::search_path(c.kind), bp::args = args, bp::std_out > out, bp::std_err > bp::null,
                    bp::std_in < bp::null);
    std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    child.wait();
    REQUIRE(child.exit_code() == 0);
    return std::string(util::trim(text));
}

} // namespace

// The run report's image (issue 43): the engine's own id for the test image, as `image inspect` says
// it, and a digest only where it is one. The process runtime runs no image and says so.
TEST_CASE("runtime: image_identity is the engine's id of a local image, and nothing the process runtime makes up",
          "[runtime][report]") {
    FOR_EACH_RUNTIME(c, rt) {
        auto identity = rt->image_identity(k_image);
        REQUIRE(identity);
        if (!c.isolates) {
            CHECK(*identity == ImageIdentity{"", "", "the process runtime runs no image"});
            continue;
        }
        const std::string id = engine_says(c, "{{.Id}}", k_image);
        CHECK(identity->id == (id.rfind("sha256:", 0) == 0 ? id : "sha256:" + id));
        CHECK(api::is_sha256_digest(identity->id));
        if (c.kind == "podman") {
            CHECK(identity->digest == engine_says(c, "{{.Digest}}", k_image));
        }
        CHECK((identity->digest.empty() || api::is_sha256_digest(identity->digest)));
        CHECK(identity->unknown.empty());
        INFO(c.kind << " digest " << identity->digest << " id " << identity->id);
        // An image the engine does not have: its error, not a made-up identity.
        auto missing = rt->image_identity("localhost/gpupool/no-such-image:1");
        CHECK_FALSE(missing);
    }
}

// An engine whose answer is hostile (a stand-in program): nothing of it is used.
TEST_CASE("container runtime: an engine's image inspect that is not a digest is not used", "[runtime][report]") {
    test::TempDir dir;
    const auto engine = dir.path() / "podman";
    test::write_file(engine, "#!/bin/sh\n"
                             "echo '[{\"Id\":\"--privileged\",\"Digest\":\"sha256:..\\/..\\/etc\"}]'\n");
    fs::permissions(engine, fs::perms::owner_all);
    OciConfig config;
    config.tool = OciTool::podman;
    config.program = engine.string();
    OciRuntime rt(config);
    REQUIRE_FALSE(rt.missing_tool());
    auto identity = rt.image_identity(k_image);
    REQUIRE(identity);
    CHECK(identity->digest.empty());
    CHECK(identity->id.empty());
    CHECK_THAT(identity->unknown, Catch::Contains("neither a valid digest nor a valid id"));
    // A reference that is not one never reaches the engine.
    auto refused = rt.image_identity("--privileged");
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::invalid_input);
}

} // namespace test_runtime
} // namespace
