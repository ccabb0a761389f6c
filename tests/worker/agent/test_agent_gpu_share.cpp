// The agent's share of a GPU against a real coordinator (HTTP on loopback, SQLite) and a FakeRuntime:
// a job idle on its GPU is warned in its log and stopped with the reason; with --mps the worker runs
// its own MPS daemon (a stand-in control program that records what it is told), reports `mps`, makes
// fractional jobs its clients and stops the daemon on exit; a runtime that cannot share the host's
// IPC namespace is refused; the models a recipe names are fetched from a hub on loopback before the job
// starts (shown as the job's reason, not billed), mounted read-only, reported in the inventory, and the
// next such job goes to that worker; a model that cannot be fetched leaves a line in the job's log.
#include "tests/path_first.hpp"
#include "tests/worker/agent/agent_fixture.hpp"
#include "tests/worker/cache/fake_hub.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_gpu_share {

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
    o.mps_compute = GENERATE(worker::MpsCompute::throughput, worker::MpsCompute::isolate);
    const auto pipe = worker::mps_dirs(work.path()).pipe; // a root worker's is in /run (mps_daemon.hpp)
    {
        RunningAgent ra(o, rt, probe);
        auto admin = pool.client(pool.admin);
        REQUIRE(eventually([&] { return !Pool::call(admin, "GET", "/v1/workers")["workers"].empty(); }));
        const auto inv = Pool::call(admin, "GET", "/v1/workers")["workers"][0]["inventory"];
        CHECK(inv["gpus"][0]["memory_enforcement"] == "mps");
        const auto start = read_text(log);
        CHECK_THAT(start, Catch::Contains("start pipe=" + pipe.string() + " log=" +
                                          (work.path() / "mps" / "log").string()));
        CHECK_THAT(start, Catch::Contains("devices=GPU-test-0"));

        const auto id = pool.submit(job_spec("client")); // half of the GPU
        auto c = rt.get(container_of(rt));
        REQUIRE(c);
        CHECK(c->spec.host_ipc);
        CHECK(c->spec.env.at("CUDA_MPS_PIPE_DIRECTORY") == "/run/gpupool-mps");
        CHECK(c->spec.env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == "0=12288M");
        if (o.mps_compute == worker::MpsCompute::isolate) {
            CHECK(c->spec.env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == "50"); // capped at its half
        } else {
            CHECK(c->spec.env.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == 0); // throughput, the default
        }
        CHECK(std::any_of(c->spec.mounts.begin(), c->spec.mounts.end(), [&](const worker::Mount& m) {
            return m.container == "/run/gpupool-mps" && m.host == pipe;
        }));
        auto whole = job_spec("whole");
        whole.resources.gpu_milli = 1000;
        rt.exit(c->spec.name, 0);
        REQUIRE(eventually([&] { return pool.job(id)["state"] == "succeeded"; }));
        const auto whole_id = pool.submit(whole);
        auto w = rt.get(container_of(rt, 1));
        REQUIRE(w);
        CHECK_FALSE(w->spec.host_ipc); // a whole GPU bypasses MPS
        CHECK(w->spec.env.count("CUDA_MPS_PIPE_DIRECTORY") == 0);
        rt.exit(w->spec.name, 0);
        REQUIRE(eventually([&] { return pool.job(whole_id)["state"] == "succeeded"; }));
        ra.drain_and_join();
    }
    CHECK_THAT(read_text(log), Catch::Contains("cmd quit"));
    CHECK_FALSE(std::filesystem::exists(pipe)); // stopped, and its pipe directory gone with it
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
        CHECK_FALSE(std::filesystem::exists(worker::mps_dirs(work.path()).pipe)); // nothing left in /run
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

TEST_CASE("agent: a recipe's models are fetched before it starts, read-only to it, and draw the next job there",
          "[agent][model-cache]") {
    test::hub::FakeHub hub;
    test::hub::FakeHub cdn;
    test::hub::TestRepo repo;
    repo.serve(hub, cdn);
    const auto& lfs = repo.file("model.safetensors");
    cdn.set("/lfs/" + lfs.blob(), test::hub::Reply(200, lfs.content).slowly()); // about a second
    Pool pool;
    test::TempDir warm_dir;
    test::TempDir cold_dir;
    test::FakeRuntime warm_rt;
    test::FakeRuntime cold_rt;
    auto warm_gpu = one_gpu();
    auto cold_gpu = one_gpu();
    auto warm_opt = options(pool, warm_dir.path());
    warm_opt.name = "warm";
    warm_opt.hub_endpoint = hub.url();
    RunningAgent warm(warm_opt, warm_rt, warm_gpu);
    auto spec = job_spec("eval");
    spec.resources.gpu_milli = 1000;
    spec.cache_models = {"acme/tiny"};
    const auto first = pool.submit(spec);
    // While the weights come, the job has not started: its reason says how far the download is.
    REQUIRE(eventually([&] {
        return pool.job(first)["reason"].get<std::string>().starts_with("fetching weights (");
    }, 10s));
    CHECK(warm_rt.started().empty());
    CHECK(pool.job(first)["state"] == "assigned");
    auto c = warm_rt.get(container_of(warm_rt));
    REQUIRE(c);
    CHECK(c->spec.env.at("HF_HOME") == "/cache");
    CHECK(c->spec.env.at("HF_HUB_OFFLINE") == "1");
    const auto models = warm_dir.path() / "cache" / "models";
    CHECK(std::any_of(c->spec.mounts.begin(), c->spec.mounts.end(), [&](const worker::Mount& m) {
        return m.container == "/cache" && m.host == models && m.read_only;
    }));
    const auto snapshot = models / "hub" / "models--acme--tiny" / "snapshots" / test::hub::k_commit;
    CHECK(read_text(snapshot / "model.safetensors") == lfs.content);
    // The download was not billed: the attempt started after it.
    REQUIRE(eventually([&] { return pool.job(first)["state"] == "running"; }));
    const auto attempt = pool.job(first)["attempt_history"][0];
    CHECK(attempt["started_at"].get<std::int64_t>() - attempt["assigned_at"].get<std::int64_t>() >= 500);
    warm_rt.exit(c->spec.name, 0);
    REQUIRE(eventually([&] { return pool.job(first)["state"] == "succeeded"; }));

    // The inventory says what the cache holds.
    auto admin = pool.client(pool.admin);
    REQUIRE(eventually([&] {
        const json workers = Pool::call(admin, "GET", "/v1/workers")["workers"];
        for (const auto& w : workers) {
            if (w["name"] == "warm" && !w["inventory"]["cached_models"].empty()) {
                const auto& m = w["inventory"]["cached_models"][0];
                return m["model"] == "acme/tiny" && m["bytes"] == repo.total_bytes();
            }
        }
        return false;
    }));

    // A second worker joins with an empty cache (its hub knows nothing): the next jobs go to the warm one.
    test::hub::FakeHub empty_hub;
    auto cold_opt = options(pool, cold_dir.path());
    cold_opt.name = "cold";
    cold_opt.hub_endpoint = empty_hub.url();
    RunningAgent cold(cold_opt, cold_rt, cold_gpu);
    REQUIRE(eventually([&] { return Pool::call(admin, "GET", "/v1/workers")["workers"].size() == 2; }));
    for (std::size_t i = 1; i <= 3; ++i) {
        const auto id = pool.submit(spec);
        const auto name = container_of(warm_rt, i);
        CHECK(cold_rt.started().empty());
        warm_rt.exit(name, 0);
        REQUIRE(eventually([&] { return pool.job(id)["state"] == "succeeded"; }));
    }
    CHECK(hub.seen(test::hub::k_api).size() == 1); // fetched once
}

TEST_CASE("agent: a model that cannot be fetched leaves a line in the job's log, and the job runs anyway",
          "[agent][model-cache]") {
    test::hub::FakeHub hub; // answers 404 to everything
    Pool pool;
    test::TempDir work;
    test::FakeRuntime rt;
    auto probe = one_gpu();
    auto o = options(pool, work.path());
    o.hub_endpoint = hub.url();
    RunningAgent ra(o, rt, probe);
    auto spec = job_spec("eval");
    spec.cache_models = {"acme/missing"};
    const auto id = pool.submit(spec);
    auto c = rt.get(container_of(rt));
    REQUIRE(c);
    CHECK(c->spec.env.at("HF_HOME") == "/team-cache/huggingface");
    CHECK(c->spec.env.count("HF_HUB_OFFLINE") == 0);
    rt.exit(c->spec.name, 0);
    REQUIRE(eventually([&] { return pool.job(id)["state"] == "succeeded"; }));
    const auto log = pool.logs(id);
    CHECK_THAT(log, Catch::Contains("gpupool-worker: fetching acme/missing: "));
    CHECK_THAT(log, Catch::Contains("the job starts without it"));
}

} // namespace test_agent_gpu_share
} // namespace
