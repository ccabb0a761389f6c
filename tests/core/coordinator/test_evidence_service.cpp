// Each attempt's manifest over HTTP (core/coordinator/evidence.hpp): a real coordinator on loopback
// over a real SQLite file, a worker that reports what it ran and uploads a real archive, researchers
// reading `GET /v1/jobs/{id}/manifest`.
#include "core/api/run_report.hpp"
#include "core/archive/archive.hpp"
#include "core/coordinator/evidence.hpp"
#include "core/util/sha256.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_evidence_service {

using namespace gpupool;
using namespace gpupool::test::svc;
using json = nlohmann::json;

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The attempt the pool's worker was given for the one job submitted.
json take_assignment(Pool& p) {
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    auto polled = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object());
    REQUIRE(polled["assignments"].size() == 1);
    return polled["assignments"][0];
}

TEST_CASE("evidence: the manifest joins the job, the worker's report and the outputs listed from the archive",
          "[service][evidence]") {
    Pool p;
    auto s = spec("eval-n0");
    s.image = "ghcr.io/lab/eval:1";
    s.env = {{"SEED", "7"}, {"HF_TOKEN", "hf_secret_value"}};
    s.params = {{"n", "0"}};
    s.cache_models = {"org/m"};
    s.recipe_sha256 = std::string(64, 'd');
    p.submit({s});
    const json a = take_assignment(p);
    const std::string attempt = std::to_string(a["attempt"].get<std::int64_t>());
    const std::string job = std::to_string(a["job"].get<std::int64_t>());
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());

    test::TempDir out;
    out.write("results.json", "{\"accuracy\": 0.5}\n");
    test::TempDir spool;
    const auto tar = spool.path() / "outputs.tar";
    REQUIRE(archive::pack_outputs(out.path(), {"."}, 1 << 20, tar));
    const std::string bytes = slurp(tar);
    auto up = w.request("PUT", "/v1/attempts/" + attempt + "/outputs", bytes);
    REQUIRE(up);
    REQUIRE(up->status == 200);

    api::RunReport report;
    report.runtime = "podman";
    report.image_digest = "sha256:" + std::string(64, 'a');
    report.image_id = "sha256:" + std::string(64, 'b');
    report.gpu_model = "L4";
    report.driver_version = "550.54";
    report.cuda_version = "12.4";
    report.enforcement = "mps";
    report.models = {{"org/m", std::string(40, 'c')}};
    report.started_at_ms = 1000;
    report.ended_at_ms = 2000;
    report.worker_version = "0.1.0";
    call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", 0}, {"report", api::to_json(report)}});

    auto m = p.server.client(p.member);
    const json man = call(m, "GET", "/v1/jobs/" + job + "/manifest");
    CHECK(man["manifest_version"] == 1);
    CHECK(man["job"]["name"] == "eval-n0");
    CHECK(man["job"]["params"]["n"] == "0");
    CHECK(man["recipe"]["sha256"] == std::string(64, 'd'));
    CHECK(man["recipe"]["source"] == "t.toml");
    CHECK(man["image"]["reference"] == "ghcr.io/lab/eval:1");
    CHECK(man["image"]["digest"] == report.image_digest);
    CHECK(man["image"]["id"] == report.image_id);
    CHECK(man["command"] == json::array({"echo", "eval-n0"}));
    CHECK(man["env"]["SEED"] == "7");
    // A secret-looking value is shown by its digest only.
    CHECK(man["env"]["HF_TOKEN"] == "sha256:" + util::sha256_hex("hf_secret_value"));
    CHECK(man.dump().find("hf_secret_value") == std::string::npos);
    CHECK(man["models"][0]["model"] == "org/m");
    CHECK(man["models"][0]["revision"] == std::string(40, 'c'));
    CHECK(man["worker"]["id"] == p.worker_id);
    CHECK(man["worker"]["name"] == "box");
    CHECK(man["worker"]["owner_team"] == "owners");
    CHECK(man["worker"]["gpu_model"] == "L4");
    CHECK(man["worker"]["driver_version"] == "550.54");
    CHECK(man["worker"]["cuda_version"] == "12.4");
    CHECK(man["worker"]["enforcement"] == "mps");
    CHECK(man["worker"]["clock"]["ended_at_ms"] == 2000);
    CHECK(man["attempt"]["state"] == "succeeded");
    CHECK(man["attempt"]["exit_code"] == 0);
    CHECK(man["attempt"]["number"] == 1);
    // The outputs as the coordinator listed them from the archive it keeps.
    CHECK(man["outputs"]["archive_sha256"] == util::sha256_hex(bytes));
    CHECK(man["outputs"]["archive_bytes"] == bytes.size());
    REQUIRE(man["outputs"]["entries"].size() == 1);
    CHECK(man["outputs"]["entries"][0]["path"] == "results.json");
    CHECK(man["outputs"]["entries"][0]["sha256"] == util::sha256_hex("{\"accuracy\": 0.5}\n"));
    CHECK(man["unknown"].empty());

    // Another team does not see it; an attempt of another job is not this job's.
    auto o = p.server.client(p.other);
    auto hidden = o.request("GET", "/v1/jobs/" + job + "/manifest");
    REQUIRE(hidden);
    CHECK(hidden->status == 404);
    auto wrong = m.request("GET", "/v1/jobs/" + job + "/manifest?attempt=999");
    REQUIRE(wrong);
    CHECK(wrong->status == 404);
    CHECK_THAT(wrong->body, Catch::Contains("is not an attempt of job"));
    const json same = call(m, "GET", "/v1/jobs/" + job + "/manifest?attempt=" + attempt);
    CHECK(same["attempt"]["id"] == a["attempt"]);
}

TEST_CASE("evidence: what nobody said is listed as not known, never made up", "[service][evidence]") {
    Pool p;
    auto s = spec("quiet");
    s.cache_models = {"org/m"};
    p.submit({s});
    const json a = take_assignment(p);
    const std::string attempt = std::to_string(a["attempt"].get<std::int64_t>());
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    // Bytes that are no archive are kept (fetch returns them as they came) and the listing says why not.
    auto up = w.request("PUT", "/v1/attempts/" + attempt + "/outputs", std::string("tar-bytes\0\1", 11));
    REQUIRE(up);
    REQUIRE(up->status == 200);
    call(w, "POST", "/v1/attempts/" + attempt + "/complete", {{"exit_code", 3}}); // an older worker: no report

    auto m = p.server.client(p.member);
    const json man = call(m, "GET", "/v1/jobs/" + std::to_string(a["job"].get<std::int64_t>()) + "/manifest");
    CHECK(man["image"]["digest"] == "");
    CHECK(man["worker"]["gpu_model"] == "");
    CHECK(man["models"][0]["revision"] == "");
    CHECK(man["attempt"]["exit_code"] == 3);
    CHECK_THAT(man["outputs"]["error"].get<std::string>(), Catch::Contains("could not be listed"));
    const std::string unknown = man["unknown"].dump();
    CHECK_THAT(unknown, Catch::Contains("it did not report it"));
    CHECK_THAT(unknown, Catch::Contains("the revision of model org/m"));
    CHECK_THAT(unknown, Catch::Contains("the recipe's digest"));
}

TEST_CASE("evidence: a hostile report is refused whole, and the attempt has not ended", "[service][evidence]") {
    Pool p;
    p.submit({spec("hostile")});
    const json a = take_assignment(p);
    const std::string attempt = std::to_string(a["attempt"].get<std::int64_t>());
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    const json refused = call(w, "POST", "/v1/attempts/" + attempt + "/complete",
                              {{"exit_code", 0}, {"report", {{"image_digest", "sha256:../../etc"}}}}, 400);
    CHECK_THAT(refused.dump(), Catch::Contains("report.image_digest"));
    auto m = p.server.client(p.member);
    const json job = call(m, "GET", "/v1/jobs/" + std::to_string(a["job"].get<std::int64_t>()));
    CHECK(job["state"] == "running");
}

TEST_CASE("evidence: secret-looking environment names", "[evidence]") {
    for (const char* name : {"HF_TOKEN", "hf_token", "OPENAI_API_KEY", "DB_PASSWORD", "MY_SECRET", "GCP_CREDENTIALS"}) {
        INFO(name);
        CHECK(coordinator::secret_looking(name));
    }
    for (const char* name : {"SEED", "HF_HOME", "MODEL", "KEYS_PER_BATCH"}) {
        INFO(name);
        CHECK_FALSE(coordinator::secret_looking(name));
    }
}

} // namespace test_evidence_service
} // namespace
