// The agent's share of a GPU against a real coordinator (HTTP on loopback, SQLite) and a FakeRuntime:
// a job idle on its GPU is warned in its log and stopped with the reason; with --mps the worker runs
// its own MPS daemon (a stand-in control program that records what it is told), reports `mps`, makes
// fractional jobs its clients and stops the daemon on exit; a runtime that cannot share the host's
// IPC namespace is refused.
#include "tests/path_first.hpp"
#include "tests/worker/agent/agent_fixture.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;
using namespace gpupool::test::agent;

namespace {

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A stand-in nvidia-cuda-mps-control: `-d` starts a "daemon" (a sleep loop whose pid it keeps in the
// pipe directory); on stdin, get_server_list answers while the daemon lives and quit stops it. Every
// call is recorded in `log`.
std::filesystem::path mps_standin(const std::filesystem::path& dir, const std::filesystem::path& log) {
    const auto path = dir / "nvidia-cuda-mps-control";
    test::write_file(path, "#!/bin/sh\n"
                           "log='" + log.string() + "'\n"
                           "pidf=\"$CUDA_MPS_PIPE_DIRECTORY/standin.pid\"\n"
                           "if [ \"$1\" = -d ]; then\n"
                           "  echo \"start pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY "
                           "devices=$CUDA_VISIBLE_DEVICES\" >> \"$log\"\n"
                           "  (while true; do sleep 1; done) >/dev/null 2>&1 </dev/null &\n"
                           "  echo $! > \"$pidf\"\n"
                           "  exit 0\n"
                           "fi\n"
                           "while read -r cmd; do\n"
                           "  echo \"cmd $cmd\" >> \"$log\"\n"
                           "  case \"$cmd\" in\n"
                           "    get_server_list) [ -f \"$pidf\" ] && kill -0 \"$(cat \"$pidf\")\" 2>/dev/null && exit 0\n"
                           "                     echo 'Cannot find MPS control daemon process' >&2; exit 1 ;;\n"
                           "    quit) [ -f \"$pidf\" ] && kill \"$(cat \"$pidf\")\"; rm -f \"$pidf\"; exit 0 ;;\n"
                           "  esac\n"
                           "done\n");
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
}

} // namespace

TEST_CASE("agent: a job idle on its GPU is warned in its log, then stopped with the reason", "[agent][idle]") {
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu(); // every GPU at 0 %, no processes: anything there is idle
    auto o = options(pool, work.path());
    o.idle_watch = 100ms;
    RunningAgent ra(o, rt, probe);
    auto spec = job_spec("idler");
    spec.resources.idle_timeout_s = 2;
    const auto id = pool.submit(spec);
    container_of(rt);
    REQUIRE(eventually([&] { return pool.job(id)["state"] == "failed"; }, 15s));
    const auto job = pool.job(id);
    CHECK_THAT(job["reason"].get<std::string>(), Catch::Contains("idle on its GPU for 2 s"));
    REQUIRE(eventually([&] { return pool.logs(id).find("has not used its GPU") != std::string::npos; }));
    CHECK_THAT(pool.logs(id), Catch::Contains("it will be stopped in 1 s unless it does (resources.idle_timeout)"));

    // A busy job is left alone for longer than that.
    probe.set_activity(worker::GpuActivity{{{"GPU-test-0", 55, 10}}, std::nullopt});
    const auto busy = pool.submit(spec);
    const auto name = container_of(rt, 1);
    std::this_thread::sleep_for(3s);
    CHECK(pool.job(busy)["state"] == "running");
    rt.exit(name, 0);
    REQUIRE(eventually([&] { return pool.job(busy)["state"] == "succeeded"; }));
}

TEST_CASE("agent: --mps runs the worker's own MPS daemon, makes fractional jobs its clients and stops it on exit",
          "[agent][mps]") {
    test::TempDir bin;
    const auto log = bin.path() / "mps.log";
    mps_standin(bin.path(), log);
    test::PathFirst path(bin.path());
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.mps = true;
    {
        RunningAgent ra(o, rt, probe);
        auto admin = pool.client(pool.admin);
        REQUIRE(eventually([&] { return !Pool::call(admin, "GET", "/v1/workers")["workers"].empty(); }));
        const auto inv = Pool::call(admin, "GET", "/v1/workers")["workers"][0]["inventory"];
        CHECK(inv["gpus"][0]["memory_enforcement"] == "mps");
        const auto start = read_text(log);
        CHECK_THAT(start, Catch::Contains("start pipe=" + (work.path() / "mps" / "pipe").string()));
        CHECK_THAT(start, Catch::Contains("devices=GPU-test-0"));

        const auto id = pool.submit(job_spec("client")); // half of the GPU
        auto c = rt.get(container_of(rt));
        REQUIRE(c);
        CHECK(c->spec.host_ipc);
        CHECK(c->spec.env.at("CUDA_MPS_PIPE_DIRECTORY") == "/run/gpupool-mps");
        CHECK(c->spec.env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == "0=12288M");
        CHECK(c->spec.env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "50");
        CHECK(std::any_of(c->spec.mounts.begin(), c->spec.mounts.end(), [&](const worker::Mount& m) {
            return m.container == "/run/gpupool-mps" && m.host == work.path() / "mps" / "pipe";
        }));
        auto whole = job_spec("whole");
        whole.resources.gpu_milli = 1000;
        rt.exit(c->spec.name, 0);
        REQUIRE(eventually([&] { return pool.job(id)["state"] == "succeeded"; }));
        pool.submit(whole);
        auto w = rt.get(container_of(rt, 1));
        REQUIRE(w);
        CHECK_FALSE(w->spec.host_ipc); // a whole GPU bypasses MPS
        CHECK(w->spec.env.count("CUDA_MPS_PIPE_DIRECTORY") == 0);
        ra.drain_and_join();
    }
    CHECK_THAT(read_text(log), Catch::Contains("cmd quit"));
}

TEST_CASE("agent: --mps is refused without the MPS control program or with a runtime that cannot share IPC",
          "[agent][mps]") {
    Pool pool;
    auto probe = one_gpu();
    SECTION("no control program") {
        test::TempDir empty;
        test::PathFirst path(empty.path()); // nothing named nvidia-cuda-mps-control there...
        const char* old = std::getenv("PATH");
        const std::string saved = old != nullptr ? old : "";
        ::setenv("PATH", empty.path().c_str(), 1); // ...nor anywhere else
        test::TempDir work;
        test::FakeRuntime rt;
        auto o = options(pool, work.path());
        o.mps = true;
        worker::Agent agent(o, rt, probe);
        const auto st = agent.run();
        ::setenv("PATH", saved.c_str(), 1);
        REQUIRE_FALSE(st);
        CHECK_THAT(st.error().message, Catch::Contains("--mps"));
    }
    SECTION("a runtime without the host's IPC namespace") {
        test::TempDir bin;
        mps_standin(bin.path(), bin.path() / "mps.log");
        test::PathFirst path(bin.path());
        test::TempDir work;
        test::FakeRuntime rt;
        worker::RuntimeCapabilities caps;
        caps.shares_host_ipc = false;
        rt.set_capabilities(caps);
        auto o = options(pool, work.path());
        o.mps = true;
        worker::Agent agent(o, rt, probe);
        const auto st = agent.run();
        REQUIRE_FALSE(st);
        CHECK_THAT(st.error().message, Catch::Contains("IPC namespace"));
    }
}
