// Whose is a GPU process (worker/agent/process_owner.hpp): a fake /proc tree with the cgroup files
// podman and docker really leave (cgroup v2 and the v1 hybrid of this CI host), and then the real
// /proc with a real process-runtime job.
#include "tests/support.hpp"
#include "tests/worker/fake_runtime.hpp"
#include "worker/agent/process_owner.hpp"
#include "worker/runtime/process_runtime.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_process_owner {

using namespace gpupool;
using worker::JobMark;
using worker::ProcessOwner;
namespace fs = std::filesystem;

namespace {

const std::string k_job_id = "3f1c9a7be2d84c6f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5";
const std::string k_other_id = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e";

// A fake /proc: each pid a directory with cgroup, stat and (when given) environ.
struct FakeProc {
    test::TempDir root;

    void add(std::int64_t pid, const std::string& cgroup, const std::string& comm = "python3", std::int64_t session = 0,
             const std::string& environ = "") const {
        const fs::path dir = root.path() / std::to_string(pid);
        fs::create_directories(dir);
        test::write_file(dir / "cgroup", cgroup);
        const std::string sid = std::to_string(session == 0 ? pid : session);
        test::write_file(dir / "stat", std::to_string(pid) + " (" + comm + ") S 1 " + sid + " " + sid +
                                           " 0 -1 4194560 5312 0 0 0 41 7 0 0 20 0 12 0 8841234 9212121088 "
                                           "201833 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 3 "
                                           "0 0 0 0 0\n");
        if (!environ.empty()) {
            test::write_file(dir / "environ", environ);
        }
    }
    ProcessOwner owner(std::int64_t pid, const std::vector<JobMark>& jobs) const {
        return worker::owner_of_process(root.path(), pid, jobs);
    }
};

std::string v1_hybrid(const std::string& path) {
    return "13:misc:/\n12:pids:" + path + "\n11:memory:" + path + "\n10:cpu,cpuacct:" + path + "\n5:devices:" + path +
           "\n1:name=systemd:" + path + "\n0::" + path + "\n";
}

} // namespace

TEST_CASE("process owner: container ids are read from podman and docker cgroup paths v1 and v2", "[reclaim]") {
    using worker::cgroup_container_ids;
    const std::vector<std::string> one{k_job_id};
    CHECK(cgroup_container_ids("0::/machine.slice/libpod-" + k_job_id + ".scope/container\n") == one);
    CHECK(cgroup_container_ids("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + k_job_id +
                               ".scope/container\n") == one);
    CHECK(cgroup_container_ids("0::/libpod_parent/libpod-" + k_job_id + "\n") == one);
    CHECK(cgroup_container_ids("0::/system.slice/docker-" + k_job_id + ".scope\n") == one);
    CHECK(cgroup_container_ids("0::/docker/" + k_job_id + "\n") == one);
    CHECK(cgroup_container_ids(v1_hybrid("/machine.slice/libpod-" + k_job_id + ".scope")).size() == 6);
    // No id: a desktop session's app scope, the root cgroup, a short or over-long hex run, garbage.
    CHECK(cgroup_container_ids("0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                               "app-gnome-code-4711.scope\n")
              .empty());
    CHECK(cgroup_container_ids("0::/\n").empty());
    CHECK(cgroup_container_ids("0::/docker/" + k_job_id.substr(1) + "\n").empty());
    CHECK(cgroup_container_ids("0::/docker/" + k_job_id + "0\n").empty());
    CHECK(cgroup_container_ids(std::string("\0\xff garbage", 10)).empty());
}

TEST_CASE("process owner: the worker's jobs by cgroup session or environment and everyone else's", "[reclaim]") {
    FakeProc proc;
    const std::vector<JobMark> jobs{{7, 0, k_job_id, 0}, {8, 1, "", 5000}};
    // The jobs' own processes: in the podman container (v2 and this host's v1 hybrid), in the process
    // runtime's session, and a process-runtime child that left the session but names its attempt.
    proc.add(4242, "0::/machine.slice/libpod-" + k_job_id + ".scope/container\n");
    proc.add(4243, v1_hybrid("/libpod_parent/libpod-" + k_job_id));
    proc.add(5001, "0::/user.slice/user-0.slice/session-3.scope\n", "python3", 5000);
    proc.add(5100, "0::/user.slice/user-0.slice/session-3.scope\n", "python3", 5100,
             std::string("PATH=/bin\0GPUPOOL_ATTEMPT_ID=8\0", 30));
    for (std::int64_t pid : {4242, 4243, 5001, 5100}) {
        INFO(pid);
        CHECK(proc.owner(pid, jobs) == ProcessOwner::job);
    }
    // The owner: a desktop app, its own docker container, a process naming an attempt that is not ours.
    proc.add(1234, "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-code-4711.scope\n",
             "python3 (train)");
    proc.add(1300, "0::/system.slice/docker-" + k_other_id + ".scope\n");
    proc.add(1400, "0::/user.slice/user-1000.slice/session-2.scope\n", "python3", 1400,
             std::string("GPUPOOL_ATTEMPT_ID=99\0", 22));
    for (std::int64_t pid : {1234, 1300, 1400}) {
        INFO(pid);
        CHECK(proc.owner(pid, jobs) == ProcessOwner::foreign);
    }
    // Once job 7 has ended, a process left in its container is nobody's job any more.
    CHECK(proc.owner(4242, {{8, 1, "", 5000}}) == ProcessOwner::foreign);
    // The driver's MPS server (comm is cut to 15 bytes by the kernel).
    proc.add(900, "0::/system.slice/nvidia-mps.service\n", "nvidia-cuda-mps");
    CHECK(proc.owner(900, jobs) == ProcessOwner::system);
}

TEST_CASE("process owner: pids that cannot be read are unknown and never foreign", "[reclaim]") {
    FakeProc proc;
    const std::vector<JobMark> jobs{{7, 0, k_job_id, 0}};
    CHECK(proc.owner(31337, jobs) == ProcessOwner::unknown); // gone, or in another pid namespace
    CHECK(proc.owner(0, jobs) == ProcessOwner::unknown);
    CHECK(proc.owner(-5, jobs) == ProcessOwner::unknown);
    proc.add(77, "0::/user.slice\n");
    test::write_file(proc.root.path() / "77" / "stat", "garbage without a closing parenthesis");
    CHECK(proc.owner(77, jobs) == ProcessOwner::unknown);
    proc.add(78, "0::/user.slice\n");
    fs::remove(proc.root.path() / "78" / "cgroup");
    CHECK(proc.owner(78, jobs) == ProcessOwner::unknown);
    CHECK(worker::owner_of_process("/nonexistent-proc", 1, jobs) == ProcessOwner::unknown);
}

TEST_CASE("process owner: a real process-runtime job is the worker's and this test process is not", "[reclaim]") {
    test::TempDir dir;
    worker::ProcessRuntime rt;
    worker::ContainerSpec spec;
    spec.name = "gpupool-owner-test-" + std::to_string(::getpid());
    spec.argv = {"sh", "-c", "sleep 30 & wait"};
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    spec.log_path = dir.path() / "log";
    spec.workdir = dir.path();
    REQUIRE(rt.start(spec));
    auto marks = rt.process_marks(spec.name);
    REQUIRE(marks.has_value());
    REQUIRE(marks->session > 0);
    const std::vector<JobMark> jobs{{7, 0, marks->container_id, marks->session}};
    CHECK(worker::owner_of_process("/proc", marks->session, jobs) == ProcessOwner::job);
    // Its child `sleep` too (same session), once it is there.
    std::int64_t child = 0;
    const std::string sleep_cmdline = std::string("sleep") + '\0' + "30" + '\0';
    REQUIRE(test::eventually([&] {
        for (const auto& e : fs::directory_iterator("/proc")) {
            const auto name = e.path().filename().string();
            if (name.find_first_not_of("0123456789") == std::string::npos &&
                test::slurp(e.path() / "cmdline") == sleep_cmdline &&
                test::slurp(e.path() / "stat").find(" " + std::to_string(marks->session) + " ") != std::string::npos) {
                child = std::stoll(name);
                return true;
            }
        }
        return false;
    }));
    CHECK(worker::owner_of_process("/proc", child, jobs) == ProcessOwner::job);
    CHECK(worker::owner_of_process("/proc", ::getpid(), jobs) == ProcessOwner::foreign);
    CHECK(worker::owner_of_process("/proc", marks->session, {}) == ProcessOwner::foreign);
    REQUIRE(rt.remove(spec.name));
    CHECK_FALSE(rt.process_marks(spec.name).has_value());
}

TEST_CASE("process owner: gpu_job_marks lists the running GPU jobs with their runtime's marks", "[reclaim]") {
    test::FakeRuntime rt;
    test::TempDir dir;
    worker::AttemptTable attempts;
    auto add = [&](std::int64_t id, std::int64_t gpu, bool running) {
        worker::Attempt t;
        t.a.attempt = AttemptId(id);
        t.a.gpu_index = gpu;
        t.container = "gpupool-a" + std::to_string(id);
        t.phase = running ? worker::AttemptPhase::running : worker::AttemptPhase::ended;
        worker::ContainerSpec s;
        s.name = t.container;
        s.log_path = dir.path() / t.container;
        REQUIRE(rt.start(s));
        attempts.add(t);
    };
    add(1, 0, true);
    add(2, -1, true); // CPU only
    add(3, 1, false); // ended
    add(4, 1, true);
    const auto marks = worker::gpu_job_marks(attempts, rt);
    REQUIRE(marks.size() == 2);
    CHECK(marks[0].attempt == 1);
    CHECK(marks[0].gpu_index == 0);
    CHECK(marks[0].container_id == test::FakeRuntime::container_id("gpupool-a1"));
    CHECK(marks[1].attempt == 4);
    CHECK(marks[1].gpu_index == 1);
}

} // namespace test_process_owner
} // namespace
