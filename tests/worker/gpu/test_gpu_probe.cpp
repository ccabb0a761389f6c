#include "tests/path_first.hpp"
#include "tests/support.hpp"
#include "worker/gpu/gpu_probe.hpp"

#include <boost/process/search_path.hpp>
#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_gpu_probe {

using namespace gpupool::worker;

TEST_CASE("nvidia-smi CSV is parsed into a GPU inventory") {
    auto gpus = parse_nvidia_smi_csv("0, GPU-1b2c, NVIDIA H200, 143771\n"
                                     "1, GPU-3d4e, NVIDIA GeForce RTX 4090, 24564\n\n");
    REQUIRE(gpus);
    REQUIRE(gpus->size() == 2);
    CHECK((*gpus)[0] == GpuInfo{0, "GPU-1b2c", "NVIDIA H200", "H200", 143771});
    CHECK((*gpus)[1].model == "RTX-4090");
    CHECK((*gpus)[1].memory_mib == 24564);
}

TEST_CASE("garbage from nvidia-smi is an error naming the line") {
    auto r = parse_nvidia_smi_csv("0, GPU-1, NVIDIA H200, 143771\n1, GPU-2, NVIDIA H200, [N/A]\n");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("line 2") && Catch::Contains("memory.total"));
    CHECK_FALSE(parse_nvidia_smi_csv("0, GPU-1, H200\n"));
}

TEST_CASE("GPU model names are normalized for the catalog") {
    CHECK(normalize_gpu_model("NVIDIA H100 80GB HBM3") == "H100-80GB-HBM3");
    CHECK(normalize_gpu_model("Tesla T4") == "T4");
    CHECK(normalize_gpu_model("NVIDIA A10") == "A10");
}

TEST_CASE("the real probe reports no GPUs, not an error, where there is no driver") {
    NvidiaSmiProbe probe;
    auto gpus = probe.list();
    if (boost::process::search_path("nvidia-smi").empty()) {
        REQUIRE(gpus);
        CHECK(gpus->empty());
    } else {
        WARN("nvidia-smi present: the probe found " << (gpus ? gpus->size() : 0) << " GPUs");
        CHECK(gpus);
    }
}

TEST_CASE("gpu health: nvidia-smi's status answer parses, [N/A] ECC counts are unknown, not zero") {
    auto s = parse_gpu_status_csv("GPU-aaaa, 0\nGPU-bbbb, [N/A]\nGPU-cccc, 3\nGPU-dddd, [Not Supported]\n");
    REQUIRE(s);
    REQUIRE(s->size() == 4);
    CHECK((*s)[0] == GpuStatus{"GPU-aaaa", 0});
    CHECK((*s)[1] == GpuStatus{"GPU-bbbb", std::nullopt});
    CHECK((*s)[2] == GpuStatus{"GPU-cccc", 3});
    CHECK_FALSE((*s)[3].ecc_uncorrected);
    auto bad = parse_gpu_status_csv("GPU-aaaa, many\n");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("line 1") && Catch::Contains("ECC"));
    CHECK_FALSE(parse_gpu_status_csv("GPU-aaaa\n"));
}

TEST_CASE("gpu health: gone from the driver, ECC errors, or no driver answer make a GPU unhealthy") {
    const std::vector<GpuInfo> gpus{{0, "GPU-aaaa", "NVIDIA L4", "L4", 24576},
                                    {1, "GPU-bbbb", "NVIDIA L4", "L4", 24576},
                                    {2, "GPU-cccc", "NVIDIA L4", "L4", 24576}};
    CHECK(assess_gpu_health(gpus, std::vector<GpuStatus>{{"GPU-aaaa", 0}, {"GPU-bbbb", std::nullopt}, {"GPU-cccc", 0}})
              .empty());
    auto v = assess_gpu_health(gpus, std::vector<GpuStatus>{{"GPU-aaaa", 0}, {"GPU-cccc", 2}});
    REQUIRE(v.size() == 2);
    CHECK(v[0].index == 1);
    CHECK_THAT(v[0].reason, Catch::Contains("no longer lists it") && Catch::Contains("GPU-bbbb"));
    CHECK(v[1].index == 2);
    CHECK_THAT(v[1].reason, Catch::Contains("2 uncorrectable ECC error(s)"));
    auto down = assess_gpu_health(
        gpus, gpupool::Result<std::vector<GpuStatus>>(gpupool::make_error(gpupool::ErrorCode::io, "GPU is lost")));
    REQUIRE(down.size() == 3);
    CHECK_THAT(down[2].reason, Catch::Contains("does not answer") && Catch::Contains("GPU is lost"));
}

using gpupool::test::PathFirst;

TEST_CASE("the real probe runs nvidia-smi's CSV queries, and one that hangs is cut off in time") {
    gpupool::test::TempDir dir;
    // A stand-in nvidia-smi: one L4; the status query hangs while the file `hang` exists.
    const auto script = dir.write("nvidia-smi", "#!/bin/sh\n"
                                                "case \"$*\" in\n"
                                                "  *query-gpu=index*) echo '0, GPU-aaaa, NVIDIA L4, 23034' ;;\n"
                                                "  *query-gpu=uuid*) [ -f '" +
                                                    (dir.path() / "hang").string() +
                                                    "' ] && exec sleep 30; echo 'GPU-aaaa, 0' ;;\n"
                                                    "  *) echo 'No devices were found' >&2; exit 6 ;;\n"
                                                    "esac\n");
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    PathFirst path(dir.path());
    NvidiaSmiProbe probe(std::chrono::milliseconds(500));

    auto gpus = probe.list();
    REQUIRE(gpus);
    REQUIRE(gpus->size() == 1);
    CHECK((*gpus)[0].model == "L4");
    auto ok = probe.status();
    REQUIRE(ok);
    CHECK(*ok == std::vector<GpuStatus>{{"GPU-aaaa", 0}});
    CHECK(assess_gpu_health(*gpus, ok).empty());

    auto failed = probe.processes(); // the stand-in refuses this query
    REQUIRE_FALSE(failed);
    CHECK_THAT(failed.error().message, Catch::Contains("exited with status 6"));

    dir.write("hang", "");
    const auto t0 = std::chrono::steady_clock::now();
    auto hung = probe.status();
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    REQUIRE_FALSE(hung);
    CHECK_THAT(hung.error().message, Catch::Contains("did not answer within 500 ms"));
    auto verdict = assess_gpu_health(*gpus, hung);
    REQUIRE(verdict.size() == 1);
    CHECK_THAT(verdict[0].reason, Catch::Contains("does not answer"));
}

TEST_CASE("the real probe reads utilisation and pmon, says watchdog or none, and copes without pmon", "[idle]") {
    gpupool::test::TempDir dir;
    // A stand-in nvidia-smi: one L4 with a job computing on it; `no-pmon` makes pmon fail (some GPUs do
    // not support it), `no-apps` makes the per-process memory query fail (a driver that cannot say).
    const std::string no_pmon = (dir.path() / "no-pmon").string();
    const std::string no_apps = (dir.path() / "no-apps").string();
    const auto script = dir.write(
        "nvidia-smi", "#!/bin/sh\n"
                      "case \"$*\" in\n"
                      "  *query-gpu=index*) echo '0, GPU-aaaa, NVIDIA L4, 23034' ;;\n"
                      "  *utilization.gpu*) echo 'GPU-aaaa, 62, 9' ;;\n"
                      "  *query-compute-apps*) [ -f '" + no_apps + "' ] && exit 3; echo '4242, GPU-aaaa, 5000' ;;\n"
                      "  pmon*) [ -f '" + no_pmon + "' ] && { echo 'not supported' >&2; exit 3; }\n"
                      "     echo '# gpu        pid  type    sm   mem   enc   dec   command'\n"
                      "     echo '# Idx          #   C/G     %     %     %     %   name'\n"
                      "     echo '    0       4242     C    62     9     -     -   python3' ;;\n"
                      "  *) exit 6 ;;\n"
                      "esac\n");
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    PathFirst path(dir.path());
    NvidiaSmiProbe probe(std::chrono::milliseconds(2000));
    CHECK(probe.memory_enforcement() == MemoryEnforcement::watchdog);
    auto a = probe.activity();
    REQUIRE(a);
    CHECK(a->gpus == std::vector<GpuUtilisation>{{"GPU-aaaa", 62, 9}});
    REQUIRE(a->processes);
    CHECK(*a->processes == std::vector<ProcessActivity>{{4242, 0, 62, 9}});

    gpupool::test::write_file(no_pmon, "");
    a = probe.activity();
    REQUIRE(a);
    CHECK(a->gpus.size() == 1);
    CHECK_FALSE(a->processes); // the whole GPU decides then

    gpupool::test::write_file(no_apps, "");
    CHECK(probe.memory_enforcement() == MemoryEnforcement::none); // never silent: the inventory says so
}

TEST_CASE("the driver's versions: driver_version's first line, the CUDA Version of --version or of the header",
          "[gpu_probe][report]") {
    CHECK(parse_driver_version("550.54.15\n550.54.15\n").value() == "550.54.15");
    CHECK_FALSE(parse_driver_version("stand-in\n"));
    CHECK_FALSE(parse_driver_version("[N/A]"));
    CHECK_FALSE(parse_driver_version(""));
    CHECK_FALSE(parse_driver_version(std::string(40, '1')));
    // `nvidia-smi --version` and the table's header.
    CHECK(parse_cuda_version("NVIDIA-SMI version  : 550.54.15\nNVML version        : 550.54\n"
                             "DRIVER version      : 550.54.15\nCUDA Version        : 12.4\n")
              .value() == "12.4");
    CHECK(
        parse_cuda_version("+-----+\n| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0     |\n")
            .value() == "13.0");
    CHECK(parse_cuda_version("No devices were found\n").value().empty()); // says nothing: not known
    CHECK_FALSE(parse_cuda_version("CUDA Version: $(reboot)\n"));
    CHECK_FALSE(parse_cuda_version("CUDA Version 12.4\n"));
}

TEST_CASE("the real probe says the driver's versions, and a driver without --version still its header's CUDA",
          "[gpu_probe][report]") {
    gpupool::test::TempDir dir;
    const std::string old = (dir.path() / "old").string();
    const auto script =
        dir.write("nvidia-smi",
                  "#!/bin/sh\n"
                  "case \"$*\" in\n"
                  "  *query-gpu=driver_version*) echo '550.54.15' ;;\n"
                  "  --version) [ -f '" +
                      old +
                      "' ] && exit 1\n"
                      "     echo 'NVIDIA-SMI version  : 550.54.15'; echo 'CUDA Version        : 12.4' ;;\n"
                      "  '') echo '| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.3     |' ;;\n"
                      "  *) exit 6 ;;\n"
                      "esac\n");
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    PathFirst path(dir.path());
    NvidiaSmiProbe probe(std::chrono::milliseconds(2000));
    CHECK(probe.driver().value() == DriverInfo{"550.54.15", "12.4"});
    gpupool::test::write_file(old, "");
    CHECK(probe.driver().value() == DriverInfo{"550.54.15", "12.3"});
}

namespace {
// GPUPOOL_NVIDIA_SMI_REPLAY for the life of the guard: tests/gpu/stand-in/nvidia-smi then answers from
// that folder.
struct Replay {
    explicit Replay(const std::filesystem::path& dir) { ::setenv("GPUPOOL_NVIDIA_SMI_REPLAY", dir.c_str(), 1); }
    ~Replay() { ::unsetenv("GPUPOOL_NVIDIA_SMI_REPLAY"); }
    Replay(const Replay&) = delete;
    Replay& operator=(const Replay&) = delete;
};
} // namespace

TEST_CASE("the real probe reads the H200's answers through the replaying stand-in (2026-12-04, reconstructed)",
          "[gpu_probe]") {
    const auto stand_in = gpupool::test::source_dir() / "tests" / "gpu" / "stand-in";
    PathFirst path(stand_in);
    Replay replay(stand_in / "h200"); // README.md there: reconstructed from that run's env.txt, not captured
    NvidiaSmiProbe probe(std::chrono::seconds(5));
    const std::string uuid = "GPU-51ae82ea-1094-9743-1075-c151ad33234a";
    auto gpus = probe.list();
    REQUIRE(gpus);
    CHECK(*gpus == std::vector<GpuInfo>{{0, uuid, "NVIDIA H200", "H200", 143771}});
    auto procs = probe.processes(); // idle: no line at all
    REQUIRE(procs);
    CHECK(procs->empty());
    CHECK(probe.memory_enforcement() == MemoryEnforcement::watchdog);
    auto status = probe.status();
    REQUIRE(status);
    CHECK(*status == std::vector<GpuStatus>{{uuid, 0}});
    CHECK(assess_gpu_health(*gpus, status).empty());
    auto activity = probe.activity();
    REQUIRE(activity);
    CHECK(activity->gpus == std::vector<GpuUtilisation>{{uuid, 0, 0}});
    CHECK_FALSE(activity->processes); // no pmon answer in the set: the whole GPU decides
}

TEST_CASE("the replaying stand-in answers a query it holds no capture of as an error, and nothing without a set",
          "[gpu_probe]") {
    const auto stand_in = gpupool::test::source_dir() / "tests" / "gpu" / "stand-in";
    PathFirst path(stand_in);
    gpupool::test::TempDir empty;
    {
        Replay replay(empty.path());
        auto gpus = NvidiaSmiProbe(std::chrono::seconds(5)).list();
        REQUIRE_FALSE(gpus);
        CHECK_THAT(gpus.error().message, Catch::Contains("exited with status 6"));
    }
    auto l4 = NvidiaSmiProbe(std::chrono::seconds(5)).list(); // its own L4 again
    REQUIRE(l4);
    REQUIRE(l4->size() == 1);
    CHECK((*l4)[0].model == "L4");
}

} // namespace test_gpu_probe
} // namespace
