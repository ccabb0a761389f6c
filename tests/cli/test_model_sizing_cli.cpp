// GPU memory from the model, through the real binary: `price`, `submit --dry-run` and `submit` read
// each model's config.json from a hub on loopback (tests/worker/cache/fake_hub.hpp, serving the
// fixtures of tests/core/resources/model_configs), show the estimate and its basis, give a whole-GPU
// job the estimate as its gpu_memory, refuse a gpu_memory below the weights naming the recipe, say
// so and go on when the hub cannot be reached, and send the hub token to the hub's host only.
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"
#include "tests/worker/cache/fake_hub.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_model_sizing_cli {

using namespace gpupool;
using test::run_gpupool;
namespace fs = std::filesystem;

// Sets an environment variable for the test's length (the binary inherits it), then puts it back.
class EnvFor {
public:
    EnvFor(const char* name, const std::string& value) : m_name(name) {
        if (const char* old = std::getenv(name)) {
            m_old = old;
        }
        ::setenv(name, value.c_str(), 1);
    }
    ~EnvFor() {
        if (m_old) {
            ::setenv(m_name, m_old->c_str(), 1);
        } else {
            ::unsetenv(m_name);
        }
    }
    EnvFor(const EnvFor&) = delete;
    EnvFor& operator=(const EnvFor&) = delete;

private:
    const char* m_name;
    std::optional<std::string> m_old;
};

std::string fixture_text(const std::string& name) {
    std::ifstream in(test::source_dir() / "tests/core/resources/model_configs" / (name + ".json"));
    REQUIRE(in);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

const std::string k_llama = "/meta-llama/Llama-2-7b-hf/resolve/main/config.json";

// A recipe on one GPU that runs Llama-2-7B in bfloat16 with 4096 tokens; `resources` adds to [resources].
fs::path llama_recipe(const test::TempDir& dir, const std::string& resources = "gpus = 1\n") {
    return dir.write("llama.toml", "name = \"llama-eval\"\nimage = \"localhost/gpupool/busybox:latest\"\n"
                                   "command = \"true\"\n[resources]\n" +
                                       resources +
                                       "cpus = 0.5\n[cache]\nmodels = [\"meta-llama/Llama-2-7b-hf\"]\n"
                                       "dtype = \"bfloat16\"\nmax_tokens = 4096\n");
}

// The estimate model-memory gives for the same model and use, in MiB (what a submission must ask).
std::int64_t expected_mib() {
    const std::int64_t weights = 2 * std::int64_t{6'738'415'616};
    const std::int64_t kv = std::int64_t{2} * 32 * 32 * 128 * 4096 * 2;
    const std::int64_t total = weights + kv + (std::int64_t{1} << 30) + (weights + kv) / 10;
    return (total + (1 << 20) - 1) >> 20;
}

const std::string k_basis = "6.74 B parameters in bfloat16: 12.6 GiB of weights + 2.0 GiB of KV cache (4096 tokens x "
                            "1) + 2.5 GiB overhead (1 GiB + 10 %) = 17.0 GiB";

TEST_CASE("model sizing: price and submit --dry-run show the estimate from the hub, and its basis",
          "[cli][model_sizing]") {
    test::hub::FakeHub hub;
    hub.set(k_llama, test::hub::Reply(200, fixture_text("llama-2-7b")));
    test::TempDir dir;
    EnvFor no_cache("HF_HOME", (dir.path() / "hf-home").string()); // no local snapshot: the hub is asked
    const fs::path recipe = llama_recipe(dir);

    auto price = run_gpupool({"price", recipe.string(), "--hf-endpoint", hub.url()});
    INFO(price.out << price.err);
    REQUIRE(price.exit_code == 0);
    CHECK_THAT(price.out,
               Catch::Contains("gpu_memory estimated: 17.0 GiB (meta-llama/Llama-2-7b-hf: " + k_basis + ")"));
    CHECK(hub.seen(k_llama).size() == 1);

    auto json = run_gpupool({"--json", "price", recipe.string(), "--hf-endpoint", hub.url()});
    REQUIRE(json.exit_code == 0);
    const auto e = nlohmann::json::parse(json.out);
    const auto& g = e.at("gpu_memory");
    CHECK(g.at("outcome") == "estimated");
    CHECK(g.at("estimate_mib") == expected_mib());
    CHECK(g.at("weight_bytes") == 2 * std::int64_t{6'738'415'616});
    CHECK(g.at("basis") == "meta-llama/Llama-2-7b-hf: " + k_basis);
    CHECK(g.at("configs")[0].at("from") == hub.url() + k_llama);

    auto dry = run_gpupool({"submit", "--dry-run", recipe.string(), "--hf-endpoint", hub.url()});
    INFO(dry.out << dry.err);
    REQUIRE(dry.exit_code == 0);
    CHECK_THAT(dry.out, Catch::Contains("gpu_memory estimated: 17.0 GiB (meta-llama/Llama-2-7b-hf: " + k_basis + ")"));
    auto dry_json = run_gpupool({"--json", "submit", "--dry-run", recipe.string(), "--hf-endpoint", hub.url()});
    REQUIRE(dry_json.exit_code == 0);
    const auto d = nlohmann::json::parse(dry_json.out);
    CHECK_THAT(d.dump(), Catch::Contains("\"gpu_memory_mib\":" + std::to_string(expected_mib())));
    CHECK_THAT(d.dump(), Catch::Contains("\"estimate_mib\":" + std::to_string(expected_mib())));
}

TEST_CASE("model sizing: a local snapshot or --model-config is read instead of the hub", "[cli][model_sizing]") {
    test::TempDir dir;
    const fs::path repo = dir.path() / "hf-home/hub/models--meta-llama--Llama-2-7b-hf";
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "snapshots/abc123");
    dir.write("hf-home/hub/models--meta-llama--Llama-2-7b-hf/refs/main", "abc123");
    dir.write("hf-home/hub/models--meta-llama--Llama-2-7b-hf/snapshots/abc123/config.json", fixture_text("llama-2-7b"));
    EnvFor cache("HF_HOME", (dir.path() / "hf-home").string());
    const fs::path recipe = llama_recipe(dir);
    // The hub is a closed port: only the local file can give the estimate.
    auto local = run_gpupool({"--json", "price", "--offline", recipe.string(), "--hf-endpoint", "http://127.0.0.1:9"});
    INFO(local.out << local.err);
    REQUIRE(local.exit_code == 0);
    const auto g = nlohmann::json::parse(local.out).at("gpu_memory");
    CHECK(g.at("estimate_mib") == expected_mib());
    CHECK(g.at("configs")[0].at("from") == (repo / "snapshots/abc123/config.json").string());

    const fs::path mistral = dir.write("mistral/config.json", fixture_text("mistral-7b"));
    auto given = run_gpupool({"--json", "price", "--offline", recipe.string(), "--model-config",
                              "meta-llama/Llama-2-7b-hf=" + mistral.parent_path().string()});
    REQUIRE(given.exit_code == 0);
    CHECK(nlohmann::json::parse(given.out).at("gpu_memory").at("configs")[0].at("from") == mistral.string());
    CHECK(nlohmann::json::parse(given.out).at("gpu_memory").at("parameters") == 7'241'732'096);
}

TEST_CASE("model sizing: a submitted whole-GPU job asks the estimate as its gpu_memory", "[cli][model_sizing]") {
    test::hub::FakeHub hub;
    hub.set(k_llama, test::hub::Reply(200, fixture_text("llama-2-7b")));
    test::TempDir dir;
    EnvFor no_cache("HF_HOME", (dir.path() / "hf-home").string());
    const fs::path recipe = llama_recipe(dir);
    using namespace gpupool::test::svc;
    Server server;
    auto admin = server.client(server.admin_token);
    call(admin, "POST", "/v1/admin/teams", {{"name", "fellows"}}, 201);
    const std::string member =
        call(admin, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
    call(admin, "POST", "/v1/admin/grants", {{"team", "fellows"}, {"amount_micro", 1'000'000'000}}, 201);
    auto sub = run_gpupool(
        {"--url", server.url, "--token", member, "--json", "submit", recipe.string(), "--hf-endpoint", hub.url()});
    INFO(sub.out << sub.err);
    REQUIRE(sub.exit_code == 0);
    const std::string job = std::to_string(nlohmann::json::parse(sub.out)["jobs"][0].get<std::int64_t>());
    const auto got = call(admin, "GET", "/v1/jobs/" + job, nullptr, 200);
    INFO(got.dump());
    CHECK(got.at("spec").at("resources").at("gpu_memory_mib") == expected_mib());
    CHECK(got.at("spec").at("resources").at("gpu_milli") == 0);
    CHECK(got.at("spec").at("model_use").at("max_tokens") == 4096);
}

TEST_CASE("model sizing: gpu_memory below the weights is refused by price, dry-run and submit", "[cli][model_sizing]") {
    test::hub::FakeHub hub;
    hub.set(k_llama, test::hub::Reply(200, fixture_text("llama-2-7b")));
    test::TempDir dir;
    EnvFor no_cache("HF_HOME", (dir.path() / "hf-home").string());
    const fs::path recipe = llama_recipe(dir, "gpu_memory = \"8GiB\"\n");
    const std::string refusal = recipe.string() +
                                ": resources.gpu_memory: meta-llama/Llama-2-7b-hf in bfloat16: 12.6 GiB of weights; "
                                "the recipe asks 8.0 GiB (resources.gpu_memory)";
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"price", recipe.string(), "--hf-endpoint", hub.url()},
             {"submit", "--dry-run", recipe.string(), "--hf-endpoint", hub.url()},
             {"--url", "http://127.0.0.1:9", "--token", "t", "submit", recipe.string(), "--hf-endpoint", hub.url()},
             // the local mode refuses it the same way, before anything runs
             {"run", recipe.string(), "--hf-endpoint", hub.url(), "--runtime", "process", "--out",
              (dir.path() / "out").string(), "--data-dir", (dir.path() / "local").string()}}) {
        auto r = run_gpupool(args);
        INFO(args[0] << " " << args[1] << ": " << r.out << r.err);
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains(refusal));
    }
    CHECK_FALSE(fs::exists(dir.path() / "out" / "llama-eval.log"));
    // Enough for the weights: checked, and shown.
    const fs::path ok = llama_recipe(dir, "gpu_memory = \"20GiB\"\n");
    auto r = run_gpupool({"price", ok.string(), "--hf-endpoint", hub.url()});
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("gpu_memory checked: the recipe asks 20.0 GiB (resources.gpu_memory); the "
                                      "models need 12.6 GiB of weights, 17.0 GiB in all"));
}

TEST_CASE("model sizing: no hub, no config: said in one line, asking for gpu_memory, and nothing refused",
          "[cli][model_sizing]") {
    test::TempDir dir;
    EnvFor no_cache("HF_HOME", (dir.path() / "hf-home").string());
    const fs::path whole = llama_recipe(dir);
    auto r = run_gpupool({"price", whole.string(), "--hf-endpoint", "http://127.0.0.1:9"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("gpu_memory not estimated: meta-llama/Llama-2-7b-hf: cannot download "
                                      "config.json: could not connect to http://127.0.0.1:9" +
                                      k_llama) &&
                          Catch::Contains("set [resources] gpu_memory in the recipe"));
    const fs::path small = llama_recipe(dir, "gpu_memory = \"8GiB\"\n");
    auto offline = run_gpupool({"submit", "--dry-run", small.string(), "--hf-endpoint", "http://127.0.0.1:9"});
    INFO(offline.out << offline.err);
    REQUIRE(offline.exit_code == 0); // 8 GiB is too small, but nothing here can know it
    CHECK_THAT(offline.out, Catch::Contains("gpu_memory not checked: meta-llama/Llama-2-7b-hf: cannot download") &&
                                Catch::Contains("the recipe's GPU memory is not checked against its models"));
    // A hub without the model says so, the same way.
    test::hub::FakeHub hub;
    auto missing = run_gpupool({"price", whole.string(), "--hf-endpoint", hub.url()});
    CHECK(missing.exit_code == 0);
    CHECK_THAT(missing.out, Catch::Contains("the hub has no such model or file (404)"));
}

TEST_CASE("model sizing: the hub token goes to the hub's host, not to where it redirects", "[cli][model_sizing]") {
    test::hub::FakeHub hub;
    test::hub::FakeHub cdn;
    hub.set(k_llama, test::hub::Reply::redirect(cdn.url() + "/blobs/llama-config"));
    cdn.set("/blobs/llama-config", test::hub::Reply(200, fixture_text("llama-2-7b")));
    test::TempDir dir;
    EnvFor no_cache("HF_HOME", (dir.path() / "hf-home").string());
    const fs::path token = dir.write("hf-token", "hf_secret_token\n");
    auto r = run_gpupool(
        {"price", llama_recipe(dir).string(), "--hf-endpoint", hub.url(), "--hf-token-file", token.string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("gpu_memory estimated: 17.0 GiB"));
    REQUIRE(hub.seen(k_llama).size() == 1);
    CHECK(hub.seen(k_llama)[0].authorization == "Bearer hf_secret_token");
    REQUIRE(cdn.seen("/blobs/").size() == 1);
    CHECK(cdn.seen("/blobs/")[0].authorization.empty());

    // A config.json past 1 MiB is not read to its end.
    hub.set(k_llama, test::hub::Reply(200, std::string(2 << 20, ' ')));
    auto big = run_gpupool({"price", llama_recipe(dir).string(), "--hf-endpoint", hub.url()});
    CHECK(big.exit_code == 0);
    CHECK_THAT(big.out, Catch::Contains("is larger than 1048576 bytes"));
}

} // namespace test_model_sizing_cli
} // namespace
