// The owner's own use of a GPU, with the real binaries: a coordinator, `gpupool worker --share` (process
// runtime) and a stand-in nvidia-smi on PATH whose compute-apps answer the test writes. The job's own
// process on the GPU counts for nothing; a real process the worker did not start reclaims the GPU: the
// job is SIGTERMed (it checkpoints), handed back as the owner's preemption, and runs again once the GPU
// has been quiet for --reclaim-quiet.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/processes.hpp"
#include "tests/path_first.hpp"
#include "tests/support.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_worker_reclaim_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::eventually;

using test::PathFirst;

namespace {

json request(const std::string& url, const std::string& token, const std::string& method, const std::string& path,
             const json& body = nullptr) {
    auto c = test::http_client(url, token);
    auto r = c.request(method, path, body.is_null() ? std::string() : body.dump());
    REQUIRE(r);
    INFO(method << " " << path << " -> " << r->body);
    REQUIRE(r->status / 100 == 2);
    return json::parse(r->body);
}

// The compute-apps answer, replaced whole (the stand-in may read it at any moment).
void set_apps(const fs::path& file, const std::string& csv) {
    test::write_file(file.string() + ".tmp", csv);
    fs::rename(file.string() + ".tmp", file);
}

} // namespace

TEST_CASE("worker process: the owner's own process reclaims the GPU and the job goes back unpaid then runs again",
          "[worker-cli][reclaim][slow]") {
    test::TempDir dir;
    const fs::path apps = dir.path() / "apps.csv";
    set_apps(apps, "");
    const auto smi = dir.write("nvidia-smi", "#!/bin/sh\n"
                                             "case \"$*\" in\n"
                                             "  *query-gpu=index*) echo '0, GPU-aaaa, NVIDIA L4, 23034' ;;\n"
                                             "  *query-gpu=uuid*) echo 'GPU-aaaa, 0' ;;\n"
                                             "  *query-compute-apps*) cat '" +
                                                 apps.string() +
                                                 "' ;;\n"
                                                 "  *) exit 6 ;;\n"
                                                 "esac\n");
    fs::permissions(smi, fs::perms::owner_all);
    PathFirst path(dir.path());

    test::CoordinatorProcess coord(dir.path());
    const auto url = coord.url();
    const auto admin = coord.admin();
    request(url, admin, "POST", "/v1/admin/teams", {{"name", "fellows"}});
    request(url, admin, "POST", "/v1/admin/grants", {{"team", "fellows"}, {"amount_micro", 1'000'000'000}});
    const std::string member =
        request(url, admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}})["token"];
    const std::string enroll = request(url, admin, "POST", "/v1/admin/tokens",
                                       {{"role", "enroll"}, {"team", "fellows"}, {"uses", 10}})["token"];
    test::WorkerProcess w(dir.path() / "w", url, enroll, {"--reclaim-grace", "5s", "--reclaim-quiet", "3s"});

    // A whole-GPU job that checkpoints on SIGTERM and otherwise runs until the test lets it finish.
    const fs::path done = dir.path() / "done";
    recipe::JobSpec s;
    s.name = "train";
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {"echo pid $$; trap 'echo checkpointed; exit 0' TERM; while [ ! -f '" + done.string() +
                 "' ]; do sleep 0.2; done; echo finished"};
    s.shell = true;
    s.resources.gpus = 1;
    s.resources.gpu_milli = 1000;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 300;
    const auto id = request(url, member, "POST", "/v1/jobs",
                            {{"source", "t.toml"},
                             {"max_parallel", 0},
                             {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}})["jobs"][0]
                        .get<std::int64_t>();
    const std::string job = "/v1/jobs/" + std::to_string(id);
    auto logs = [&] { return request(url, member, "GET", job + "/logs?offset=0")["data"].get<std::string>(); };
    auto state = [&] { return request(url, member, "GET", job)["state"].get<std::string>(); };
    std::string log;
    // Generous: under a loaded CI machine (ctest -j with the container tests) the first placement,
    // start and log delivery have taken over 20 s.
    if (!eventually([&] { return (log = logs()).find("pid ") != std::string::npos; }, 60s)) {
        FAIL("the job logged nothing; the job: " + request(url, member, "GET", job).dump() +
             "\nthe worker's stderr:\n" + w.stderr_text());
    }
    const std::string job_pid = log.substr(4, log.find('\n') - 4);

    // The job's own process on the GPU: several looks (every 2 s), nothing happens.
    set_apps(apps, job_pid + ", GPU-aaaa, 20000\n");
    std::this_thread::sleep_for(5s);
    CHECK(w.stderr_text().find("reclaimed") == std::string::npos);
    CHECK(state() == "running");

    // The owner starts something of their own on the GPU.
    boost::process::child mine(boost::process::search_path("sleep"), "60");
    set_apps(apps, job_pid + ", GPU-aaaa, 20000\n" + std::to_string(mine.id()) + ", GPU-aaaa, 3000\n");
    REQUIRE(eventually(
        [&] {
            return w.stderr_text().find("GPU 0 reclaimed: a process you started (pid " + std::to_string(mine.id()) +
                                        ") uses it") != std::string::npos;
        },
        15s));
    CHECK_THAT(w.stderr_text(), Catch::Contains("the job there gets 5s to stop"));
    REQUIRE(eventually([&] { return state() == "queued"; }, 20s));
    const json first = request(url, member, "GET", job)["attempt_history"][0];
    CHECK(first["state"] == "preempted");
    CHECK_THAT(first["reason"].get<std::string>(),
               Catch::Contains("preempted by the GPU's owner: GPU 0 reclaimed by its owner"));
    CHECK_THAT(logs(), Catch::Contains("checkpointed\n"));
    // Nothing is placed there while the owner's process runs.
    std::this_thread::sleep_for(3s);
    CHECK(state() == "queued");

    // The owner is done: after 3 quiet seconds the GPU is shared again and the job runs again.
    mine.terminate();
    set_apps(apps, "");
    REQUIRE(eventually([&] { return w.stderr_text().find("GPU 0 is shared again") != std::string::npos; }, 20s));
    REQUIRE(eventually([&] { return state() == "running"; }, 20s));
    test::write_file(done, "");
    REQUIRE(eventually([&] { return state() == "succeeded"; }, 20s));
    CHECK(request(url, member, "GET", job)["attempts"] == 2);
}

} // namespace test_worker_reclaim_cli
} // namespace
