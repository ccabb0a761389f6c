// The ops team's admin commands against a real coordinator (funded_pool.hpp): workers, teams and
// tokens named by their names wherever an id is taken (one rule, resolve_name on the coordinator),
// `admin enroll --label`, revoked tokens in `token list`, and admin commands with a member's token.
#include "tests/cli/funded_pool.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_admin_names_cli {

using namespace gpupool;
using json = nlohmann::json;

namespace {

// Registers a worker called `name` with `enroll` (a token of `uses` > 1) and returns its id.
std::int64_t register_worker(const std::string& url, const std::string& enroll, const std::string& name) {
    auto e = test::http_client(url, enroll);
    const json inventory = {{"cpu_milli", 4000},
                            {"memory_mib", 8192},
                            {"gpus", json::array({{{"index", 0}, {"model", "L4"}, {"memory_mib", 24576}}})}};
    auto reg = e.request("POST", "/v1/workers/register", json{{"name", name}, {"inventory", inventory}}.dump());
    REQUIRE(reg);
    INFO(reg->body);
    REQUIRE(reg->status == 201);
    return json::parse(reg->body)["worker_id"].get<std::int64_t>();
}

std::string state_of(const test::FundedPool& p, const std::string& admin, std::int64_t worker) {
    auto r = p.as(admin, {"--json", "admin", "workers"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const json all = json::parse(r.out);
    for (const auto& w : all["workers"]) {
        if (w["id"] == worker) {
            return w["state"];
        }
    }
    FAIL("no worker " << worker);
    return "";
}

} // namespace

TEST_CASE("admin CLI: workers are named by id or by name, an exact id winning", "[cli][admin][names]") {
    test::TempDir dir;
    test::FundedPool p(dir.path());
    const std::string admin = p.coord.admin();
    const std::string enroll = test::make_token(p.admin, R"({"role": "enroll", "team": "owners", "uses": 4})");
    const std::int64_t gpu_a = register_worker(p.url, enroll, "gpu-a");
    const std::int64_t box1 = register_worker(p.url, enroll, "lab-box");
    const std::int64_t box2 = register_worker(p.url, enroll, "lab-box");
    const std::int64_t named_like_id = register_worker(p.url, enroll, std::to_string(gpu_a));

    // By its name.
    auto drained = p.as(admin, {"admin", "drain", "gpu-a"});
    INFO(drained.out << drained.err);
    REQUIRE(drained.exit_code == 0);
    CHECK_THAT(drained.out, Catch::Contains("worker " + std::to_string(gpu_a) + " is now draining"));
    CHECK(state_of(p, admin, gpu_a) == "draining");
    // An exact id wins over a worker named like it.
    REQUIRE(p.as(admin, {"admin", "activate", std::to_string(gpu_a)}).exit_code == 0);
    CHECK(state_of(p, admin, gpu_a) == "active");
    CHECK(state_of(p, admin, named_like_id) == "active");

    // A name two workers have: an error naming both ids, nothing changed.
    auto ambiguous = p.as(admin, {"admin", "ban", "lab-box"});
    CHECK(ambiguous.exit_code == 1);
    CHECK_THAT(ambiguous.err, Catch::Contains("`lab-box` names 2 workers: " + std::to_string(box1) + " (") &&
                                  Catch::Contains(", " + std::to_string(box2) + " (") &&
                                  Catch::Contains("give the id"));
    CHECK(state_of(p, admin, box1) == "active");
    CHECK(state_of(p, admin, box2) == "active");
    // Misspelt: the nearest name.
    auto misspelt = p.as(admin, {"admin", "drain", "gpu-b"});
    CHECK(misspelt.exit_code == 1);
    CHECK_THAT(misspelt.err, Catch::Contains("no worker named `gpu-b`; did you mean `gpu-a`?"));
    // By id, the ban takes the one meant.
    auto ban = p.as(admin, {"admin", "ban", std::to_string(box2)});
    REQUIRE(ban.exit_code == 0);
    CHECK(state_of(p, admin, box2) == "banned");
    CHECK(state_of(p, admin, box1) == "active");
}

TEST_CASE("admin CLI: misspelt teams get did you mean, tokens are revoked by label, enroll takes --label",
          "[cli][admin][names]") {
    test::TempDir dir;
    test::FundedPool p(dir.path());
    const std::string admin = p.coord.admin();

    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"admin", "grant", "fellowz", "10"},
          std::vector<std::string>{"admin", "token", "create", "--team", "ownres", "--label", "x"},
          std::vector<std::string>{"admin", "budget", "felows"}}) {
        auto r = p.as(admin, args);
        INFO(r.err);
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains("did you mean `fellows`?") || Catch::Contains("did you mean `owners`?"));
    }

    // Enrollment tokens carry a label of the admin's choosing.
    auto enroll = p.as(admin, {"admin", "enroll", "owners", "--label", "rack-7", "--uses", "2"});
    REQUIRE(enroll.exit_code == 0);
    const json tokens = json::parse(p.as(admin, {"--json", "admin", "token", "list"}).out)["tokens"];
    CHECK(std::any_of(tokens.begin(), tokens.end(),
                      [](const json& t) { return t["role"] == "enroll" && t["label"] == "rack-7"; }));

    // Two active tokens labelled bob: revoking by the label lists both; by id takes one.
    std::vector<std::int64_t> bobs;
    for (int i = 0; i < 2; ++i) {
        auto made = p.as(admin, {"--json", "admin", "token", "create", "--team", "fellows", "--label", "bob"});
        REQUIRE(made.exit_code == 0);
        bobs.push_back(json::parse(made.out)["id"].get<std::int64_t>());
    }
    auto ambiguous = p.as(admin, {"admin", "token", "revoke", "bob"});
    CHECK(ambiguous.exit_code == 1);
    CHECK_THAT(ambiguous.err,
               Catch::Contains("`bob` names 2 active tokens: " + std::to_string(bobs[0]) +
                               " (member of team fellows), " + std::to_string(bobs[1]) + " (member of team fellows)"));
    REQUIRE(p.as(admin, {"admin", "token", "revoke", std::to_string(bobs[0])}).exit_code == 0);
    // One bob left active: the label now names it.
    auto by_label = p.as(admin, {"admin", "token", "revoke", "bob"});
    REQUIRE(by_label.exit_code == 0);
    CHECK_THAT(by_label.out, Catch::Contains("revoked token " + std::to_string(bobs[1])));
    auto misspelt = p.as(admin, {"admin", "token", "revoke", "alise"});
    CHECK(misspelt.exit_code == 1);
    CHECK_THAT(misspelt.err, Catch::Contains("no active token named `alise`; did you mean `alice`?"));

    // The list says what it leaves out; --all shows the revoked ones.
    auto listed = p.as(admin, {"admin", "token", "list", "--team", "fellows"});
    REQUIRE(listed.exit_code == 0);
    CHECK_THAT(listed.out,
               !Catch::Contains("bob") && Catch::Contains("(2 revoked token(s) not shown; --all lists them)"));
    auto all = p.as(admin, {"admin", "token", "list", "--team", "fellows", "--all"});
    REQUIRE(all.exit_code == 0);
    CHECK_THAT(all.out, Catch::Contains("bob") && Catch::Contains("revoked 20") && !Catch::Contains("not shown"));
}

TEST_CASE("admin CLI: an admin command with a member's token says it needs an admin token", "[cli][admin]") {
    test::TempDir dir;
    test::FundedPool p(dir.path());
    // `admin workers` would list the member's own team's workers if asked: it must not pass them
    // off as the pool's. The others would be refused by the coordinator with a bare 403.
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"admin", "workers"}, std::vector<std::string>{"admin", "team", "list"},
          std::vector<std::string>{"admin", "budget", "fellows"}, std::vector<std::string>{"admin", "audit"},
          std::vector<std::string>{"admin", "drain", "1"}}) {
        auto r = p.as(p.fellow, args);
        INFO(args[1] << ": " << r.out << r.err);
        CHECK(r.exit_code == 1);
        CHECK(r.out.empty());
        CHECK_THAT(r.err, Catch::Contains("`gpupool admin " + args[1]) && Catch::Contains("needs an admin token") &&
                              Catch::Contains("a member token of team `fellows` (labelled `alice`)"));
    }
    // A token the coordinator does not know is told so, not that it needs to be an admin's.
    auto unknown = p.as("gpp_" + std::string(64, '0'), {"admin", "workers"});
    CHECK(unknown.exit_code == 1);
    CHECK_THAT(unknown.err, !Catch::Contains("needs an admin token"));
}

} // namespace test_admin_names_cli
} // namespace
