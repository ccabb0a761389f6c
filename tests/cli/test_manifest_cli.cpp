// `gpupool manifest`, `fetch`'s manifest.json, `diff` and `repro` on real processes: a coordinator
// on a SQLite file and a worker with the process runtime, which runs no image and says so.
#include "core/recipe/recipe_json.hpp"
#include "core/util/sha256.hpp"
#include "tests/cli/funded_pool.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_manifest_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

recipe::JobSpec writer(const std::string& name, const std::string& value, std::int64_t index) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {"printf '%s' '" + value + "' > \"$GPUPOOL_OUTPUT_DIR/result.txt\"; echo done"};
    s.shell = true;
    s.env = {{"SEED", value}, {"API_TOKEN", "do-not-print-" + value}};
    s.resources.cpu_milli = 500;
    s.resources.memory_mib = 64;
    s.sweep_index = index;
    return s;
}

json submit(const std::string& url, const std::string& member, const std::vector<recipe::JobSpec>& specs) {
    auto c = test::http_client(url, member);
    const json body = {{"source", "manifest.toml"}, {"jobs", json::parse(recipe::to_json(specs).dump())}};
    auto r = c.request("POST", "/v1/jobs", body.dump());
    REQUIRE(r);
    REQUIRE(r->status == 201);
    return json::parse(r->body);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_CASE("manifest CLI: a result's manifest, fetched beside its outputs, diffed, and a repro that says what it "
          "could not pin",
          "[manifest-cli][worker-cli][evidence]") {
    test::TempDir dir;
    test::FundedPool pool(dir.path());
    auto as = [&](std::vector<std::string> args) { return pool.as(pool.fellow, std::move(args)); };
    const json sweep = submit(pool.url, pool.fellow, {writer("a", "1", 0), writer("b", "2", 1), writer("c", "1", 2)});
    const std::string a = std::to_string(sweep["jobs"][0].get<std::int64_t>());
    const std::string b = std::to_string(sweep["jobs"][1].get<std::int64_t>());
    const std::string c = std::to_string(sweep["jobs"][2].get<std::int64_t>());
    test::WorkerProcess worker(dir.path() / "w", pool.url, pool.enroll);
    auto waited = as({"wait", "--sweep", std::to_string(sweep["sweep_id"].get<std::int64_t>())});
    INFO(waited.out << waited.err);
    REQUIRE(waited.exit_code == 0);

    auto m = as({"--json", "manifest", a});
    INFO(m.out << m.err);
    REQUIRE(m.exit_code == 0);
    const json man = json::parse(m.out);
    CHECK(man["job"]["name"] == "a");
    CHECK(man["attempt"]["state"] == "succeeded");
    CHECK(man["worker"]["runtime"] == "process");
    CHECK(man["image"]["digest"] == "");
    CHECK_THAT(man["unknown"].dump(), Catch::Contains("the image's digest"));
    CHECK(man["env"]["SEED"] == "1");
    CHECK(man["env"]["API_TOKEN"] == "sha256:" + util::sha256_hex("do-not-print-1"));
    REQUIRE(man["outputs"]["entries"].size() == 1);
    CHECK(man["outputs"]["entries"][0]["path"] == "result.txt");
    CHECK(man["outputs"]["entries"][0]["sha256"] == util::sha256_hex("1"));
    CHECK(man["worker"]["clock"]["ended_at_ms"].get<std::int64_t>() >=
          man["worker"]["clock"]["started_at_ms"].get<std::int64_t>());

    auto status = as({"status", a});
    CHECK_THAT(status.out, Catch::Contains("manifest: `gpupool manifest " + a + "`"));
    auto human = as({"manifest", a});
    REQUIRE(human.exit_code == 0);
    CHECK_THAT(human.out, Catch::Contains("result.txt"));
    CHECK_THAT(human.out, Catch::Contains(util::sha256_hex("1")));
    CHECK_THAT(human.out, Catch::Contains("not known:"));
    CHECK(human.out.find("do-not-print") == std::string::npos);

    // fetch writes the manifest beside the outputs.
    auto fetched = as({"fetch", a, (dir.path() / "got").string()});
    INFO(fetched.out << fetched.err);
    REQUIRE(fetched.exit_code == 0);
    CHECK(slurp(dir.path() / "got" / "a" / "result.txt") == "1");
    const json saved = json::parse(slurp(dir.path() / "got" / "a.manifest.json"));
    CHECK(saved["outputs"]["tree_sha256"] == man["outputs"]["tree_sha256"]);

    // a and c wrote the same bytes with the same seed, b did not.
    auto same = as({"diff", a, c});
    INFO(same.out << same.err);
    CHECK(same.exit_code == 0);
    CHECK_THAT(same.out, Catch::Contains("no differences"));
    auto differ = as({"--json", "diff", a, b});
    INFO(differ.out << differ.err);
    CHECK(differ.exit_code == 1);
    const json d = json::parse(differ.out);
    std::vector<std::string> fields;
    for (const auto& x : d["differences"]) {
        fields.push_back(x["field"]);
    }
    CHECK(fields == std::vector<std::string>{"command", "env.API_TOKEN", "env.SEED", "outputs.tree_sha256",
                                             "outputs/result.txt"});

    // The process runtime gives no digest: repro refuses to pretend it pinned one, unless told.
    auto refused = as({"repro", a});
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Catch::Contains("the image's digest is not known"));
    auto repro = as({"--json", "repro", a, "--allow-unpinned"});
    INFO(repro.out << repro.err);
    REQUIRE(repro.exit_code == 0);
    const json again = json::parse(repro.out);
    CHECK(again["repro_of"].get<std::int64_t>() == std::stoll(a));
    CHECK_THAT(again["notes"].dump(), Catch::Contains("image NOT pinned"));
    const std::string new_job = std::to_string(again["job"].get<std::int64_t>());
    REQUIRE(as({"wait", new_job}).exit_code == 0);
    auto repro_diff = as({"diff", a, new_job});
    INFO(repro_diff.out << repro_diff.err);
    CHECK(repro_diff.exit_code == 0);
}

} // namespace test_manifest_cli
} // namespace
