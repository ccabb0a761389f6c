// `gpupool diff` and `gpupool repro`'s pure parts (cmd/manifest_diff.hpp, cmd/manifest.hpp): what
// counts as a difference between two manifests, and a spec pinned to what its manifest says ran.
#include "cmd/manifest.hpp"
#include "cmd/manifest_diff.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_manifest_diff {

using namespace gpupool;
using nlohmann::json;

const std::string k_digest = "sha256:" + std::string(64, 'a');
const std::string k_rev = std::string(40, 'c');

json manifest() {
    return {{"manifest_version", 1},
            {"job", {{"id", 12}, {"name", "eval-n0"}, {"params", {{"n", "0"}}}}},
            {"recipe", {{"sha256", std::string(64, 'd')}, {"origins", json::array()}}},
            {"image", {{"reference", "ghcr.io/lab/eval:1"}, {"digest", k_digest}, {"id", ""}}},
            {"command", {"python", "eval.py"}},
            {"env", {{"SEED", "1"}}},
            {"inputs", {{"archive_sha256", ""}}},
            {"resources", {{"gpus", 1}, {"gpu_milli", 500}}},
            {"models", {{{"model", "org/m"}, {"revision", k_rev}}}},
            {"attempt", {{"id", 31}, {"state", "succeeded"}, {"exit_code", 0}, {"started_at", 5}}},
            {"worker", {{"id", 3}, {"name", "box"}, {"gpu_model", "NVIDIA L4"}, {"driver_version", "550"}}},
            {"outputs",
             {{"tree_sha256", "t1"},
              {"entries",
               {{{"path", "a.json"}, {"type", "file"}, {"size", 3}, {"sha256", "h1"}},
                {{"path", "b.json"}, {"type", "file"}, {"size", 4}, {"sha256", "h2"}}}}}}};
}

TEST_CASE("diff: two runs of the same thing differ in nothing, whatever their ids, times and workers",
          "[cmd][evidence]") {
    auto a = manifest();
    auto b = manifest();
    b["job"]["id"] = 40;
    b["attempt"]["id"] = 77;
    b["attempt"]["started_at"] = 999;
    b["worker"]["id"] = 9;
    b["worker"]["name"] = "other-box";
    CHECK(cmd::diff_manifests(a, b).empty());
}

TEST_CASE("diff: what decides a result is compared, outputs file by file", "[cmd][evidence]") {
    auto a = manifest();
    auto b = manifest();
    b["image"]["digest"] = "sha256:" + std::string(64, 'f');
    b["env"]["SEED"] = "2";
    b["env"]["EXTRA"] = "x";
    b["models"][0]["revision"] = std::string(40, 'e');
    b["worker"]["gpu_model"] = "NVIDIA H100";
    b["outputs"]["tree_sha256"] = "t2";
    b["outputs"]["entries"][1]["sha256"] = "h3";
    b["outputs"]["entries"].push_back({{"path", "c.json"}, {"type", "file"}, {"size", 1}, {"sha256", "h4"}});
    const auto d = cmd::diff_manifests(a, b);
    std::vector<std::string> fields;
    for (const auto& x : d) {
        fields.push_back(x.field);
    }
    CHECK(fields == std::vector<std::string>{"image.digest", "env.EXTRA", "env.SEED", "models.org/m",
                                             "worker.gpu_model", "outputs.tree_sha256", "outputs/b.json",
                                             "outputs/c.json"});
    CHECK(d[1].a == "(absent)");
    CHECK(d[1].b == "x");
    CHECK(d[6].a == "h2 (4 bytes)");
    CHECK(d[6].b == "h3 (4 bytes)");
    CHECK(d[7].a == "(absent)");
}

TEST_CASE("diff: a manifest of an unexpected shape is read as absent members, never thrown on", "[cmd][evidence]") {
    const json odd = {{"image", "not an object"}, {"outputs", {{"entries", {1, "x", {{"path", 3}}}}}}, {"env", 5}};
    const auto d = cmd::diff_manifests(manifest(), odd);
    CHECK_FALSE(d.empty());
    CHECK(d.front().field == "image.reference");
    CHECK(d.front().b == "(absent)");
    CHECK(cmd::diff_manifests(odd, odd).empty());
}

TEST_CASE("repro: the spec is pinned to the image digest and model revisions its manifest records",
          "[cmd][evidence]") {
    recipe::JobSpec spec;
    spec.name = "eval-n0";
    spec.image = "ghcr.io/lab/eval:1";
    spec.command = {"python", "eval.py"};
    spec.cache_models = {"org/m"};
    std::vector<std::string> notes;
    auto pinned = cmd::pinned_spec(spec, manifest(), false, notes);
    REQUIRE(pinned);
    CHECK(pinned->image == "ghcr.io/lab/eval:1@" + k_digest);
    CHECK(pinned->cache_models == std::vector<std::string>{"org/m@" + k_rev});
    CHECK(notes.size() == 2);
    // A spec already pinned is pinned again, not twice.
    auto again = cmd::pinned_spec(*pinned, manifest(), false, notes);
    REQUIRE(again);
    CHECK(again->image == pinned->image);

    // Without a digest (the process runtime runs no image): refused unless told.
    auto unknown = manifest();
    unknown["image"]["digest"] = "";
    auto refused = cmd::pinned_spec(spec, unknown, false, notes);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().field == "image");
    auto allowed = cmd::pinned_spec(spec, unknown, true, notes);
    REQUIRE(allowed);
    CHECK(allowed->image == "ghcr.io/lab/eval:1");
    // A digest that is not one is never put into the reference.
    unknown["image"]["digest"] = "sha256:--privileged";
    CHECK_FALSE(cmd::pinned_spec(spec, unknown, false, notes));
    // A model whose revision is not known.
    auto no_rev = manifest();
    no_rev["models"][0]["revision"] = "";
    auto r = cmd::pinned_spec(spec, no_rev, false, notes);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "models");
}

} // namespace test_manifest_diff
} // namespace
