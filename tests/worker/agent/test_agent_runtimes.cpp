// The whole worker path for real — coordinator over loopback HTTP, the agent, and each runtime this
// machine has (process always; podman and docker when .ci/setup-containers has run): environment,
// mounts, inputs, exit codes, log order, output upload, the memory-limit kill, max_runtime and cancel.
#include "core/archive/archive.hpp"
#include "core/coordinator/service.hpp"
#include "core/store/open_store.hpp"
#include "core/net/http_client.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/util/token_secret.hpp"
#include "tests/support.hpp"
#include "tests/worker/runtime/runtimes_under_test.hpp"
#include "worker/agent/agent.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_agent_runtimes {

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using test::eventually;

struct LivePool {
    test::TempDir dir;
    std::unique_ptr<coordinator::CoordinatorService> service;
    std::string url, member, enroll;

    LivePool() {
        coordinator::ServiceOptions o;
        o.http.host = "127.0.0.1";
        o.tick = 50ms;
        o.coordinator.credits.enforce = false;
        auto opened = store::open_store((dir.path() / "pool.db").string());
        REQUIRE(opened);
        service = std::make_unique<coordinator::CoordinatorService>(o, std::move(*opened), coordinator::system_clock());
        std::string admin;
        REQUIRE(service->start(&admin));
        url = "http://127.0.0.1:" + std::to_string(service->port());
        auto a = client(admin);
        call(a, "POST", "/v1/admin/teams", {{"name", "fellows"}}, 201);
        member = call(a, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
        enroll = call(a, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "fellows"}, {"uses", 100}}, 201)["token"];
    }
    ~LivePool() { service->stop(); }
    net::HttpClient client(const std::string& token) const {
        net::ClientOptions o;
        o.base_url = url;
        o.token = token;
        o.timeout = 10s;
        return net::HttpClient(o);
    }
    static json call(net::HttpClient& c, const std::string& method, const std::string& path, const json& body,
                     int expect) {
        auto r = c.request(method, path, body.is_null() ? std::string() : body.dump());
        REQUIRE(r);
        INFO(method << " " << path << " -> " << r->status << " " << r->body);
        REQUIRE(r->status == expect);
        return json::parse(r->body);
    }
    std::int64_t submit(const recipe::JobSpec& s) {
        auto c = client(member);
        return call(c, "POST", "/v1/jobs",
                    {{"source", "t.toml"}, {"max_parallel", 0}, {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}},
                    201)["jobs"][0]
            .get<std::int64_t>();
    }
    json job(std::int64_t id) {
        auto c = client(member);
        return call(c, "GET", "/v1/jobs/" + std::to_string(id), nullptr, 200);
    }
    std::string logs(std::int64_t id) {
        auto c = client(member);
        return call(c, "GET", "/v1/jobs/" + std::to_string(id) + "/logs?offset=0", nullptr, 200)["data"];
    }
    bool ended(std::int64_t id) {
        const std::string s = job(id)["state"];
        return s == "succeeded" || s == "failed" || s == "cancelled";
    }
};

recipe::JobSpec shell_job(const std::string& name, const std::string& script) {
    recipe::JobSpec s;
    s.name = name;
    s.image = test::k_test_image;
    s.command = {script};
    s.shell = true;
    s.resources.cpu_milli = 500;
    s.resources.memory_mib = 128;
    s.resources.max_runtime_s = 60;
    s.retry.max_attempts = 1;
    return s;
}

} // namespace

TEST_CASE("agent with real runtimes: env, mounts, logs, outputs, exit codes, OOM, max_runtime, cancel",
          "[agent-runtime][slow]") {
    for (const auto& candidate : test::runtimes_under_test()) {
        DYNAMIC_SECTION(candidate.kind) {
            auto rt = test::runtime_or_skip(candidate);
            if (!rt) {
                continue;
            }
            LivePool pool;
            test::TempDir work;
            test::TempDir inputs;
            worker::StaticGpuProbe no_gpus({});
            worker::AgentOptions o;
            o.coordinator_url = pool.url;
            o.token = pool.enroll;
            o.work_dir = work.path();
            o.cpu_milli = 4000;
            o.memory_mib = 4096;
            o.heartbeat = 300ms;
            o.poll_wait = 1s;
            o.stop_grace = 500ms;
            o.runtime_grace = 500ms;
            o.log_flush = 100ms;
            o.tick = 50ms;
            worker::Agent agent(o, *rt, no_gpus);
            Status result;
            std::thread t([&] { result = agent.run(); });
            struct Join {
                worker::Agent& a;
                std::thread& t;
                ~Join() {
                    a.stop();
                    t.join();
                }
            } join{agent, t};

            // 1. Environment, the read-only input mount, interleaved output order, an uploaded file.
            const auto input = inputs.write("input.txt", "from the researcher\n");
            auto s = shell_job("env", "echo \"job=$GPUPOOL_JOB_ID attempt=$GPUPOOL_ATTEMPT p=$GPUPOOL_PARAM_LR\"; "
                                      "cat $GPUPOOL_WORK_DIR/input.txt; "
                                      "i=1; while [ $i -le 50 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done; "
                                      "echo result > $GPUPOOL_OUTPUT_DIR/r.txt");
            s.params = {{"lr", "0.5"}};
            // Shipped as a client does: packed, uploaded by digest, named in the job.
            s.inputs.paths = {"input.txt"};
            const auto tar = inputs.path() / "inputs.tar";
            REQUIRE(archive::pack_paths({input}, 1 << 20, tar));
            std::ifstream tin(tar, std::ios::binary);
            const std::string tar_bytes((std::istreambuf_iterator<char>(tin)), std::istreambuf_iterator<char>());
            s.inputs.archive = util::sha256_hex(tar_bytes);
            auto up = pool.client(pool.member);
            auto put = up.request("PUT", "/v1/inputs/" + s.inputs.archive, tar_bytes);
            REQUIRE(put);
            REQUIRE(put->status == 201);
            const auto id = pool.submit(s);
            REQUIRE(eventually([&] { return pool.ended(id); }, 60s));
            auto j = pool.job(id);
            INFO(j.dump(2));
            CHECK(j["state"] == "succeeded");
            // Every line, each stream in order. The process runtime shares one descriptor, so the
            // interleaving is exact too; container engines read stdout and stderr from two pipes.
            const std::string log = pool.logs(id);
            std::string expected_out = "job=" + std::to_string(id) + " attempt=1 p=0.5\nfrom the researcher\n";
            std::string expected_err;
            std::string interleaved = expected_out;
            for (int i = 1; i <= 50; ++i) {
                expected_out += "out" + std::to_string(i) + "\n";
                expected_err += "err" + std::to_string(i) + "\n";
                interleaved += "out" + std::to_string(i) + "\nerr" + std::to_string(i) + "\n";
            }
            std::string got_out;
            std::string got_err;
            std::istringstream lines(log);
            for (std::string line; std::getline(lines, line);) {
                (line.rfind("err", 0) == 0 ? got_err : got_out) += line + "\n";
            }
            CHECK(got_out == expected_out);
            CHECK(got_err == expected_err);
            if (!candidate.isolates) {
                CHECK(log == interleaved);
            }
            auto c = pool.client(pool.member);
            auto outputs = c.request("GET", "/v1/jobs/" + std::to_string(id) + "/outputs");
            REQUIRE(outputs);
            test::TempDir out;
            auto files = archive::unpack_archive(outputs->body, out.path());
            REQUIRE(files);
            CHECK(files->written == std::vector<std::string>{"r.txt"});

            // 2. A non-zero exit code, as is.
            const auto three = pool.submit(shell_job("three", "echo bye; exit 3"));
            REQUIRE(eventually([&] { return pool.ended(three); }, 60s));
            CHECK(pool.job(three)["exit_code"] == 3);
            CHECK(pool.job(three)["state"] == "failed");

            // 3. Containers: non-root, read-only root, inputs read-only; over the memory limit -> 137.
            if (candidate.isolates) {
                const auto iso = pool.submit(shell_job(
                    "isolated", "test \"$(id -u)\" != 0 && ! touch /etc/x 2>/dev/null && "
                                "! touch /work/x 2>/dev/null && echo isolated"));
                REQUIRE(eventually([&] { return pool.ended(iso); }, 60s));
                CHECK(pool.logs(iso) == "isolated\n");
                auto oom = shell_job("oom", "dd if=/dev/zero of=/dev/null bs=128M count=1");
                oom.resources.memory_mib = 32;
                const auto oid = pool.submit(oom);
                REQUIRE(eventually([&] { return pool.ended(oid); }, 60s));
                auto oj = pool.job(oid);
                CHECK(oj["exit_code"] == 137);
                CHECK_THAT(oj["reason"].get<std::string>(), Catch::Contains("out of memory"));
            }

            // 4. max_runtime: SIGTERM, then SIGKILL after the grace.
            auto slow = shell_job("slow", "trap '' TERM; sleep 30");
            slow.resources.max_runtime_s = 1;
            const auto t0 = std::chrono::steady_clock::now();
            const auto sid = pool.submit(slow);
            REQUIRE(eventually([&] { return pool.ended(sid); }, 30s));
            CHECK(std::chrono::steady_clock::now() - t0 < 15s);
            auto sj = pool.job(sid);
            CHECK_THAT(sj["reason"].get<std::string>(), Catch::Contains("exceeded max_runtime 1s"));

            // 5. Cancel: stopped within 2 s of the heartbeat that carries it.
            const auto cid = pool.submit(shell_job("cancelled", "echo started; sleep 30"));
            REQUIRE(eventually([&] { return pool.logs(cid) == "started\n"; }, 30s));
            auto cc = pool.client(pool.member);
            LivePool::call(cc, "POST", "/v1/jobs/" + std::to_string(cid) + "/cancel", json::object(), 200);
            REQUIRE(pool.job(cid)["state"] == "cancelled");
            REQUIRE(eventually([&] { return fs::is_empty(work.path() / "attempts"); }, 10s)); // stopped, removed
        }
    }
}

} // namespace test_agent_runtimes
} // namespace
