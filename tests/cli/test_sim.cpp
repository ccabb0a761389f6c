#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_sim {

using gpupool::test::run_gpupool;
using gpupool::test::TempDir;

namespace {

const char* k_nodes = "sn,cpu_milli,memory_mib,gpu,model\n"
                      "n0,32000,131072,2,T4\n"
                      "n1,64000,262144,4,A10\n"
                      "n2,16000,65536,1,T4\n";

std::string pods_csv() {
    std::string s = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
                    "scheduled_time\n";
    const char* shapes[] = {"4000,8192,1,500,", "8000,16384,1,1000,", "2000,4096,0,0,", "4000,8192,1,250,",
                            "16000,32768,2,1000,"};
    for (int i = 0; i < 20; ++i) {
        s += "p" + std::to_string(100 + i) + "," + shapes[i % 5] + ",LS,Running," + std::to_string(i * 100) + "," +
             std::to_string(i * 100 + 1000) + "," + std::to_string(i * 100) + "\n";
    }
    return s;
}

} // namespace

TEST_CASE("gpupool sim: missing data files name the path and exit 1") {
    TempDir dir;
    auto r = run_gpupool({"sim", "--data-dir", (dir.path() / "nowhere").string(), "--seeds", "1"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("nowhere/openb_node_list_gpu_node.csv"));
}

TEST_CASE("gpupool sim --json: every policy on a custom trace") {
    TempDir dir;
    auto nodes = dir.write("nodes.csv", k_nodes);
    auto pods = dir.write("pods.csv", pods_csv());
    auto r = run_gpupool({"sim", "--nodes", nodes.string(), "--trace", pods.string(), "--published",
                          (dir.path() / "none.csv").string(), "--seeds", "3", "--policy", "all", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 1); // an explicit --published that does not exist is an error
    auto ok = run_gpupool({"sim", "--nodes", nodes.string(), "--trace", pods.string(), "--data-dir",
                           dir.path().string(), "--seeds", "3", "--policy", "all", "--json"});
    INFO(ok.err);
    REQUIRE(ok.exit_code == 0);
    auto j = nlohmann::json::parse(ok.out);
    CHECK(j["gpus"] == 7);
    CHECK(j["pods"] == 20);
    REQUIRE(j["results"].size() == 5);
    for (const auto& res : j["results"]) {
        CHECK(res["runs"].size() == 3);
        const double a130 = res["alloc_pct_at_arrived"]["130"];
        CHECK(a130 > 0.0);
        CHECK(a130 <= 100.0);
        CHECK(res["published"].is_null());
    }
}

TEST_CASE("gpupool sim: table output, no-sharing and unknown policies") {
    TempDir dir;
    auto nodes = dir.write("nodes.csv", k_nodes);
    auto pods = dir.write("pods.csv", pods_csv());
    auto r = run_gpupool({"sim", "--nodes", nodes.string(), "--trace", pods.string(), "--data-dir", dir.path().string(),
                          "--seeds", "2", "--no-sharing"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("alloc@130"));
    CHECK_THAT(r.out, Catch::Contains("no sharing"));
    auto bad = run_gpupool({"sim", "--nodes", nodes.string(), "--trace", pods.string(), "--policy", "dotprod"});
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("unknown placement policy"));
}

TEST_CASE("gpupool sim --mode time: generated workload and trace replay") {
    auto r = run_gpupool(
        {"sim", "--mode", "time", "--generate", "--jobs", "200", "--workers", "4", "--teams", "2", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["jobs"] == 200);
    CHECK(j["queueing_delay_s"]["p50"] <= j["queueing_delay_s"]["p99"]);
    CHECK(j["jain_index"] > 0.0);
    CHECK(j["teams"].size() == 2);

    TempDir dir;
    auto nodes = dir.write("nodes.csv", k_nodes);
    auto pods = dir.write("pods.csv", pods_csv());
    auto t = run_gpupool({"sim", "--mode", "time", "--nodes", nodes.string(), "--trace", pods.string()});
    INFO(t.err);
    REQUIRE(t.exit_code == 0);
    CHECK_THAT(t.out, Catch::Contains("queueing delay: p50"));
    CHECK_THAT(t.out, Catch::Contains("fairness (Jain"));
}

TEST_CASE("gpupool sim --mode time: waste and fairness under contention, now and with the old rules", "[sim]") {
    const std::vector<std::string> base{
        "sim",    "--mode", "time",    "--generate", "--jobs",         "300", "--workers", "2",
        "--load", "3",      "--teams", "2",          "--team-weights", "1",   "3",         "--checkpoint-fraction",
        "0.5",    "--json"};
    auto now = run_gpupool(base);
    INFO(now.err);
    REQUIRE(now.exit_code == 0);
    auto j = nlohmann::json::parse(now.out);
    CHECK(j["rules"] == "current");
    CHECK(j["lost_gpu_seconds"] <= j["gpu_seconds"]);
    CHECK(j["waste_pct"] >= 0.0);
    CHECK(j["most_preemptions_of_a_job"] <= 1);
    REQUIRE(j["contended"]["teams"].size() == 2);
    CHECK(j["contended"]["seconds"] > 0.0);
    const double fair1 = j["contended"]["teams"][0]["fair_share"];
    const double fair2 = j["contended"]["teams"][1]["fair_share"];
    CHECK(fair1 + fair2 == Approx(1.0));
    CHECK(fair1 < fair2); // weight 1 against 3

    auto old_args = base;
    old_args.push_back("--old-policy");
    auto old = run_gpupool(old_args);
    REQUIRE(old.exit_code == 0);
    CHECK(nlohmann::json::parse(old.out)["rules"] == "old");

    auto text = run_gpupool({"sim", "--mode", "time", "--generate", "--jobs", "200", "--workers", "2", "--load", "3",
                             "--teams", "2", "--max-preemptions", "0", "--order", "class-first"});
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.out, Catch::Contains("fairness under contention"));
    CHECK_THAT(text.out, Catch::Contains("GPU-hours ("));
    auto bad = run_gpupool({"sim", "--mode", "time", "--generate", "--order", "random"});
    CHECK(bad.exit_code == 2);
}

} // namespace test_sim
} // namespace
