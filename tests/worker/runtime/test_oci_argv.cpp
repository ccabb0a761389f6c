// Pure parts of the podman/docker runtime: the `run` argv built from a ContainerSpec, the inspect
// JSON reader, make_runtime's choices. No engine needed.
#include "tests/support.hpp"
#include "worker/runtime/oci_runtime.hpp"
#include "worker/runtime/runtime_registry.hpp"

#include <algorithm>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_oci_argv {

using namespace gpupool;
using namespace gpupool::worker;

namespace {

ContainerSpec sample_spec() {
    ContainerSpec s;
    s.name = "gpupool-a42";
    s.image = "localhost/gpupool/busybox:latest";
    s.argv = {"python", "train.py", "--lr", "0.1"};
    s.env = {{"GPUPOOL_JOB_ID", "42"}, {"CUDA_VISIBLE_DEVICES", "0"}};
    s.mounts = {{"/srv/jobs/42/work", "/work", true}, {"/srv/jobs/42/outputs", "/outputs", false}};
    s.labels = {{"gpupool.job", "42"}, {"gpupool.attempt", "7"}, {"gpupool.worker", "w1"}};
    s.log_path = "/srv/jobs/42/log";
    s.gpu_index = 3;
    s.cpu_milli = 1500;
    s.memory_mib = 2048;
    s.pids_limit = 512;
    return s;
}

// True when `flag` is immediately followed by `value` somewhere in argv.
bool has_pair(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
        if (argv[i] == flag && argv[i + 1] == value) {
            return true;
        }
    }
    return false;
}

bool has(const std::vector<std::string>& argv, const std::string& arg) {
    return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

} // namespace

TEST_CASE("oci run argv: isolation flags, limits, labels, mounts and env", "[runtime]") {
    for (OciTool tool : {OciTool::podman, OciTool::docker}) {
        DYNAMIC_SECTION(to_string(tool)) {
            auto argv = build_run_argv(tool, sample_spec());
            REQUIRE(argv.size() > 4);
            CHECK(argv[0] == "run");
            CHECK_FALSE(has(argv, "-d"));          // foreground: the CLI's exit is the container's
            CHECK(has(argv, "--sig-proxy=false")); // signals reach the job through `kill` only
            CHECK(has_pair(argv, "--name", "gpupool-a42"));
            CHECK(has_pair(argv, "--label", "gpupool.job=42"));
            CHECK(has_pair(argv, "--label", "gpupool.attempt=7"));
            CHECK(has_pair(argv, "--label", "gpupool.worker=w1"));
            CHECK(has(argv, "--cap-drop=ALL"));
            CHECK(has(argv, "--init"));
            CHECK(has_pair(argv, "--security-opt", "no-new-privileges"));
            CHECK(has_pair(argv, "--user", "65534:65534"));
            CHECK(has_pair(argv, "--pids-limit", "512"));
            // memory == memory+swap: no swap
            CHECK(has_pair(argv, "--memory", "2048m"));
            CHECK(has_pair(argv, "--memory-swap", "2048m"));
            CHECK(has_pair(argv, "--cpus", "1.5"));
            CHECK(has_pair(argv, "--ulimit", "nofile=4096:4096"));
            CHECK(has_pair(argv, "--ulimit", "nproc=4096:4096"));
            CHECK(has(argv, "--read-only"));
            CHECK(has_pair(argv, "--tmpfs", "/tmp:rw,nosuid,nodev,size=512m,mode=1777"));
            CHECK(has_pair(argv, "-v", "/srv/jobs/42/work:/work:ro"));
            CHECK(has_pair(argv, "-v", "/srv/jobs/42/outputs:/outputs"));
            CHECK(has_pair(argv, "-e", "GPUPOOL_JOB_ID=42"));
            CHECK(has_pair(argv, "-e", "CUDA_VISIBLE_DEVICES=0"));
            CHECK_FALSE(has(argv, "--network")); // the engine's default: jobs may download
            CHECK_FALSE(has(argv, "--privileged"));
            // `--` ends the engine's options; then the image and the command exactly as given, at the end.
            std::vector<std::string> tail(argv.end() - 6, argv.end());
            CHECK(tail == std::vector<std::string>{"--", "localhost/gpupool/busybox:latest", "python", "train.py",
                                                   "--lr", "0.1"});
            CHECK(std::count(argv.begin(), argv.end(), "--") == 1);
        }
    }
}

TEST_CASE("oci run argv: the one GPU, the podman (CDI) and the docker way", "[runtime]") {
    auto podman = build_run_argv(OciTool::podman, sample_spec());
    CHECK(has_pair(podman, "--device", "nvidia.com/gpu=3"));
    CHECK_FALSE(has(podman, "--gpus"));
    CHECK(has_pair(podman, "--log-driver", "k8s-file"));

    auto docker = build_run_argv(OciTool::docker, sample_spec());
    CHECK(has_pair(docker, "--gpus", "device=3"));
    CHECK_FALSE(has(docker, "--device"));
    CHECK(has_pair(docker, "--log-driver", "json-file"));

    // A worker that is not root runs its containers as its own uid: rootless podman keeps it.
    ContainerSpec own = sample_spec();
    own.user = "998:997";
    own.keep_user_id = true;
    CHECK(has(build_run_argv(OciTool::podman, own), "--userns=keep-id"));
    CHECK(has_pair(build_run_argv(OciTool::podman, own), "--user", "998:997"));
    CHECK_FALSE(has(build_run_argv(OciTool::docker, own), "--userns=keep-id"));
    CHECK_FALSE(has(podman, "--userns=keep-id"));

    ContainerSpec cpu_only = sample_spec();
    cpu_only.gpu_index.reset();
    auto none = build_run_argv(OciTool::docker, cpu_only);
    CHECK_FALSE(has(none, "--gpus"));
    CHECK_FALSE(has(build_run_argv(OciTool::podman, cpu_only), "--device"));
}

TEST_CASE("oci run argv: an MPS client shares the host's IPC namespace, others never do", "[runtime][mps]") {
    for (auto tool : {OciTool::podman, OciTool::docker}) {
        auto s = sample_spec();
        CHECK_FALSE(has(build_run_argv(tool, s), "--ipc=host"));
        s.host_ipc = true;
        auto argv = build_run_argv(tool, s);
        const auto ipc = std::find(argv.begin(), argv.end(), "--ipc=host");
        REQUIRE(ipc != argv.end());
        CHECK(ipc < std::find(argv.begin(), argv.end(), "--")); // an engine option, before the image
    }
}

TEST_CASE("oci run argv: the job starts in its working directory, as a bare process does", "[runtime]") {
    for (auto tool : {OciTool::podman, OciTool::docker}) {
        auto s = sample_spec();
        CHECK_FALSE(has(build_run_argv(tool, s), "--workdir")); // none given: the image's own
        s.workdir = "/work";
        auto argv = build_run_argv(tool, s);
        const auto at = std::find(argv.begin(), argv.end(), "--workdir");
        REQUIRE(at != argv.end());
        REQUIRE(at + 1 != argv.end());
        CHECK(*(at + 1) == "/work");
        CHECK(at < std::find(argv.begin(), argv.end(), "--")); // an engine option, before the image
        CHECK(check_container_spec(s, true));
        s.workdir = "work"; // relative: read against whatever the engine's default is
        CHECK_FALSE(check_container_spec(s, true));
    }
}

TEST_CASE("oci run argv: unset limits are left out and extra run flags come before `--` and the image", "[runtime]") {
    ContainerSpec s = sample_spec();
    s.memory_mib = 0;
    s.cpu_milli = 0;
    s.pids_limit = 0;
    s.read_only_root = false;
    s.user = "1000:1000";
    auto argv = build_run_argv(OciTool::podman, s, {"--network", "none"});
    CHECK_FALSE(has(argv, "--memory"));
    CHECK_FALSE(has(argv, "--memory-swap"));
    CHECK_FALSE(has(argv, "--cpus"));
    CHECK_FALSE(has(argv, "--pids-limit"));
    CHECK_FALSE(has(argv, "--read-only"));
    CHECK_FALSE(has(argv, "--tmpfs"));
    CHECK(has_pair(argv, "--user", "1000:1000"));
    auto image = std::find(argv.begin(), argv.end(), s.image);
    REQUIRE(image != argv.end());
    CHECK(*(image - 3) == "--network");
    CHECK(*(image - 2) == "none");
    CHECK(*(image - 1) == "--");

    s.cpu_milli = 250;
    CHECK(has_pair(build_run_argv(OciTool::docker, s), "--cpus", "0.25"));
    s.cpu_milli = 2000;
    CHECK(has_pair(build_run_argv(OciTool::docker, s), "--cpus", "2"));
    s.cpu_milli = 1005;
    CHECK(has_pair(build_run_argv(OciTool::docker, s), "--cpus", "1.005"));
}

TEST_CASE("oci inspect JSON: podman's and docker's shapes", "[runtime]") {
    // Trimmed from `podman container inspect` (4.3) and `docker container inspect` (20.10).
    const char* podman = R"([{"Id":"3f1c","Name":"gpupool-a1","State":{"Status":"running","Running":true,"ExitCode":0},
        "Config":{"Labels":{"gpupool.job":"1","gpupool.worker":"w1"}}}])";
    const char* docker = R"([{"Id":"9a0b","Name":"/gpupool-a2","State":{"Status":"exited","Running":false,"ExitCode":3},
        "Config":{"Labels":{"gpupool.attempt":"9"}}},
        {"Id":"77","Name":"/other","State":{"Running":false},"Config":{"Labels":null}}])";
    auto p = parse_inspect_json(podman);
    REQUIRE(p);
    REQUIRE(p->size() == 1);
    CHECK(p->at(0).name == "gpupool-a1");
    CHECK(p->at(0).running);
    CHECK(p->at(0).labels.at("gpupool.worker") == "w1");

    auto d = parse_inspect_json(docker);
    REQUIRE(d);
    REQUIRE(d->size() == 2);
    CHECK(d->at(0).name == "gpupool-a2"); // docker's leading slash dropped
    CHECK_FALSE(d->at(0).running);
    CHECK(d->at(0).labels.at("gpupool.attempt") == "9");
    CHECK(d->at(1).labels.empty());

    CHECK_FALSE(parse_inspect_json("not json"));
    CHECK_FALSE(parse_inspect_json(R"({"Name":"x"})"));
    CHECK_FALSE(parse_inspect_json(R"([{"Name":"x"}])"));
}

TEST_CASE("oci state JSON: an exit the job made, a container that never ran, podman's and docker's shapes",
          "[runtime]") {
    // podman, after `sh -c 'exit 125'`
    auto ran = parse_state_json(R"({"OciVersion":"1.0.2-dev","Status":"exited","Running":false,"OOMKilled":false,)"
                                R"("ExitCode":125,"StartedAt":"2026-12-02T15:51:04Z"})");
    REQUIRE(ran);
    CHECK(ran->ran);
    CHECK_FALSE(ran->running);
    CHECK(ran->exit_code == 125);
    // docker, a command not found: created, never started, yet ExitCode 127
    auto never = parse_state_json(R"({"Status":"created","Running":false,"OOMKilled":false,"ExitCode":127,)"
                                  R"("Error":"exec: \"nosuchcmd\": executable file not found in $PATH"})");
    REQUIRE(never);
    CHECK_FALSE(never->ran);
    CHECK(never->exit_code == 127);
    auto oom = parse_state_json(R"({"Status":"exited","Running":false,"OOMKilled":true,"ExitCode":137})");
    REQUIRE(oom);
    CHECK(oom->oom_killed);
    auto running = parse_state_json(R"({"Status":"running","Running":true,"ExitCode":0})");
    REQUIRE(running);
    CHECK(running->running);
    CHECK_FALSE(parse_state_json("not json"));
    CHECK_FALSE(parse_state_json(R"({"Status":"exited"})"));
}

TEST_CASE("oci image inspect JSON: podman's digest and bare id, docker's repo digest and id", "[runtime][report]") {
    const std::string digest = "sha256:" + std::string(64, 'd');
    const std::string other = "sha256:" + std::string(64, 'e');
    const std::string hex(64, '1');
    const std::string ref = "docker.io/library/busybox:latest";
    auto p = parse_image_identity(OciTool::podman,
                                  R"([{"Id":")" + hex + R"(","Digest":")" + digest +
                                      R"(","RepoDigests":["docker.io/library/busybox@)" + other + R"("]}])",
                                  ref);
    REQUIRE(p);
    CHECK(*p == ImageIdentity{digest, "sha256:" + hex, ""});
    // docker: the entry of the same repository (its familiar name), not the first.
    auto d = parse_image_identity(OciTool::docker,
                                  R"([{"Id":"sha256:)" + hex + R"(","RepoDigests":["quay.io/x/busybox@)" + other +
                                      R"(","busybox@)" + digest + R"("]}])",
                                  ref);
    REQUIRE(d);
    CHECK(*d == ImageIdentity{digest, "sha256:" + hex, ""});
    auto first = parse_image_identity(
        OciTool::docker, R"([{"Id":"sha256:)" + hex + R"(","RepoDigests":["quay.io/x/y@)" + other + R"("]}])", ref);
    REQUIRE(first);
    CHECK(first->digest == other);
    // Built here: no manifest digest, the id alone.
    auto local = parse_image_identity(OciTool::docker, R"([{"Id":"sha256:)" + hex + R"(","RepoDigests":[]}])", ref);
    REQUIRE(local);
    CHECK(*local == ImageIdentity{"", "sha256:" + hex, ""});
}

TEST_CASE("oci image inspect JSON: what is not a digest is never used", "[runtime][report]") {
    const std::string ref = "localhost/gpupool/busybox:latest";
    for (const char* hostile :
         {R"([{"Id":"--privileged","Digest":"sha256:../../etc/passwd"}])",
          R"([{"Id":"sha256:ABCDEF","Digest":"sha256:dddd\u001b[31m"}])",
          R"([{"Id":42,"Digest":["sha256:x"],"RepoDigests":"busybox@sha256:1"}])",
          R"([{"Id":"sha256:1111111111111111111111111111111111111111111111111111111111111111x"}])"}) {
        for (OciTool tool : {OciTool::podman, OciTool::docker}) {
            INFO(hostile << " " << to_string(tool));
            auto got = parse_image_identity(tool, hostile, ref);
            REQUIRE(got);
            CHECK(got->digest.empty());
            CHECK(got->id.empty());
            CHECK_THAT(got->unknown, Catch::Contains("neither a valid digest nor a valid id"));
        }
    }
    CHECK_FALSE(parse_image_identity(OciTool::podman, "not json", ref));
    CHECK_FALSE(parse_image_identity(OciTool::podman, "[]", ref));
    CHECK_FALSE(parse_image_identity(OciTool::docker, R"({"Id":"sha256:1"})", ref));
    CHECK_FALSE(parse_image_identity(OciTool::docker, "[{},{}]", ref));
}

TEST_CASE("oci runtime: a missing tool is a clear error", "[runtime]") {
    OciConfig config;
    config.tool = OciTool::podman;
    config.program = "gpupool-no-such-podman";
    OciRuntime rt(config);
    REQUIRE(rt.missing_tool());
    CHECK(rt.missing_tool()->message.find("gpupool-no-such-podman not found on PATH") != std::string::npos);
    CHECK(rt.missing_tool()->message.find("--runtime") != std::string::npos);
    auto started = rt.start(ContainerSpec{});
    REQUIRE_FALSE(started);
    CHECK(started.error().code == ErrorCode::io);
    CHECK_FALSE(rt.list("w1"));
    CHECK(rt.name() == "podman");
    // A container engine isolates, re-attaches, limits memory and passes one GPU as device 0.
    CHECK(rt.capabilities() == RuntimeCapabilities{true, true, true, true, true});

    CHECK(make_runtime("process", {"--root", "/x"}).has_error());
    auto unknown = make_runtime("lxc");
    REQUIRE(unknown.has_error());
    CHECK(unknown.error().message.find("podman, docker or process") != std::string::npos);
}

} // namespace test_oci_argv
} // namespace
