// The real `gpupool coordinator` process: client commands against it, kill -9 durability, TLS.
#include "core/net/http_client.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_coordinator_cli {

using namespace gpupool;
using json = nlohmann::json;
namespace bp = boost::process;
namespace fs = std::filesystem;

namespace {

using test::CoordinatorProcess;


std::string make_member(const std::string& url, const std::string& admin) {
    auto a = test::http_client(url, admin);
    auto t = a.request("POST", "/v1/admin/teams", R"({"name": "fellows"})");
    REQUIRE(t);
    REQUIRE(t->status == 201);
    auto g = a.request("POST", "/v1/admin/grants", R"({"team": "fellows", "amount_micro": 1000000000000})");
    REQUIRE(g);
    REQUIRE(g->status == 201);
    auto m = a.request("POST", "/v1/admin/tokens", R"({"role": "member", "team": "fellows"})");
    REQUIRE(m);
    REQUIRE(m->status == 201);
    return json::parse(m->body)["token"];
}

// Submits one `true` job named `name`; its id when the coordinator acknowledged it (201).
std::optional<std::int64_t> submit_true(net::HttpClient& client, const std::string& name) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"true"};
    json body = {{"jobs", json::array({json::parse(recipe::to_json(s).dump())})}};
    auto r = client.request("POST", "/v1/jobs", body.dump());
    if (!r || r->status != 201) {
        return std::nullopt;
    }
    return json::parse(r->body)["jobs"][0].get<std::int64_t>();
}

} // namespace

TEST_CASE("coordinator process: submit, list, status and cancel through the CLI", "[coordinator-cli]") {
    test::TempDir dir;
    CoordinatorProcess coord(dir.path());
    REQUIRE(coord.admin().size() == 68);
    std::string member = make_member(coord.url(), coord.admin());
    const std::string url = coord.url();
    auto recipe = (test::source_dir() / "recipes/hello-sweep/recipe.toml").string();

    auto sub = test::run_gpupool({"--url", url, "--token", member, "--json", "submit", recipe});
    REQUIRE(sub.exit_code == 0);
    auto ids = json::parse(sub.out)["jobs"];
    REQUIRE(ids.size() == 6);

    auto jobs = test::run_gpupool({"--url", url, "--token", member, "jobs"});
    CHECK(jobs.exit_code == 0);
    CHECK_THAT(jobs.out, Catch::Contains("hello-bonjour-2") && Catch::Contains("no worker is connected"));
    CHECK_THAT(jobs.out, !Catch::Contains("TEAM"));
    auto all_teams = test::run_gpupool({"--url", url, "--token", coord.admin(), "jobs", "--all-teams"});
    CHECK(all_teams.exit_code == 0);
    CHECK_THAT(all_teams.out, Catch::Contains("TEAM") && Catch::Contains("fellows"));
    CHECK_THAT(jobs.out, Catch::Contains("CREDITS"));
    CHECK_THAT(jobs.out, !Catch::Contains("newest shown"));
    // Who submitted them (an unlabelled token is shown by its id), and the filters on it.
    CHECK_THAT(jobs.out, Catch::Contains("BY") && Catch::Contains("token 2"));
    auto mine = test::run_gpupool({"--url", url, "--token", member, "--json", "jobs", "--mine"});
    CHECK(json::parse(mine.out)["jobs"].size() == 6);
    CHECK(json::parse(mine.out)["jobs"][0]["submitted_by"] == "token 2");
    auto theirs = test::run_gpupool({"--url", url, "--token", coord.admin(), "--json", "jobs", "--mine"});
    CHECK(json::parse(theirs.out)["jobs"].empty());
    auto by = test::run_gpupool({"--url", url, "--token", member, "--json", "jobs", "--by", "token 2"});
    CHECK(json::parse(by.out)["jobs"].size() == 6);
    by = test::run_gpupool({"--url", url, "--token", member, "--json", "jobs", "--by", "alice"});
    CHECK(json::parse(by.out)["jobs"].empty());

    // The newest two of the sweep, and the hint that there are more.
    auto newest = test::run_gpupool({"--url", url, "--token", member, "jobs", "--sweep", "1", "--limit", "2"});
    CHECK(newest.exit_code == 0);
    CHECK_THAT(newest.out, Catch::Contains("hello-hola-2") && Catch::Contains("hello-hola-1"));
    CHECK_THAT(newest.out, !Catch::Contains("hello-hello-1"));
    CHECK_THAT(newest.out, Catch::Contains("the 2 newest shown"));
    auto other_sweep = test::run_gpupool({"--url", url, "--token", member, "--json", "jobs", "--sweep", "2"});
    CHECK(other_sweep.exit_code == 0);
    CHECK(json::parse(other_sweep.out)["jobs"].empty());
    CHECK(json::parse(other_sweep.out)["more"] == false);
    auto more = test::run_gpupool({"--url", url, "--token", member, "--json", "jobs", "--limit", "2"});
    CHECK(json::parse(more.out)["more"] == true); // the --json answer keeps what the table says in words
    CHECK(json::parse(more.out)["jobs"].size() == 2);
    auto nothing = test::run_gpupool({"--url", url, "--token", member, "cancel"});
    CHECK(nothing.exit_code == 2);
    CHECK_THAT(nothing.err, Catch::Contains("cancel what?") && Catch::Contains("--sweep"));

    auto status = test::run_gpupool({"--url", url, "--token", member, "status", std::to_string(ids[0].get<int>())});
    CHECK(status.exit_code == 0);
    CHECK_THAT(status.out, Catch::Contains("queued") && Catch::Contains("waiting: no worker is connected"));

    // `logs -f` on a job that cannot start yet says why it waits, waits, then says how it ended and
    // exits with its outcome (here: cancelled meanwhile, so 1).
    const std::string first = std::to_string(ids[0].get<int>());
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        (void)test::http_client(url, member).request("POST", "/v1/jobs/" + first + "/cancel", "{}");
    });
    auto follow = test::run_gpupool({"--url", url, "--token", member, "logs", "-f", first});
    canceller.join();
    CHECK(follow.exit_code == 1);
    CHECK_THAT(follow.err, Catch::Contains("-- job " + first + " is queued: ") &&
                               Catch::Contains("no worker is connected") &&
                               Catch::Contains("-- job " + first + " cancelled"));

    auto cancel = test::run_gpupool({"--url", url, "--token", member, "cancel", "--sweep", "1"});
    CHECK(cancel.exit_code == 0);
    CHECK_THAT(cancel.out, Catch::Contains("cancelled 5 jobs")); // the sixth was cancelled above

    auto wait = test::run_gpupool({"--url", url, "--token", member, "wait", std::to_string(ids[0].get<int>())});
    CHECK(wait.exit_code == 1); // cancelled is not success

    // Clear errors for a bad token, a missing job and an unreachable coordinator.
    auto bad = test::run_gpupool({"--url", url, "--token", "gpp_nope", "jobs"});
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.err, Catch::Contains("the coordinator at " + url + " (URL from --url) refused the token from --token") &&
                            Catch::Contains("GPUPOOL_URL"));
    auto none = test::run_gpupool({"--url", url, "jobs"});
    CHECK(none.exit_code == 1);
    CHECK_THAT(none.err, Catch::Contains("no token was given") && Catch::Contains("--token-file"));
    auto missing = test::run_gpupool({"--url", url, "--token", member, "status", "999"});
    CHECK(missing.exit_code == 1);
    CHECK_THAT(missing.err, Catch::Contains("no job 999"));
    auto down = test::run_gpupool({"--url", "http://127.0.0.1:1", "--token", member, "jobs"});
    CHECK(down.exit_code == 1);
    CHECK_THAT(down.err, Catch::Contains("127.0.0.1:1"));

    CHECK(coord.terminate_and_wait() == 0); // SIGTERM: graceful, exit 0
}

TEST_CASE("coordinator process: kill -9 loses no acknowledged job and duplicates none", "[coordinator-cli]") {
    test::TempDir dir;
    std::string member;
    std::vector<std::pair<std::int64_t, std::string>> acked;
    std::random_device rd;
    const auto seed = rd();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    {
        CoordinatorProcess coord(dir.path());
        member = make_member(coord.url(), coord.admin());
        auto m = test::http_client(coord.url(), member);
        std::atomic<bool> killed{false};
        std::thread killer([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(200, 1500)(rng)));
            coord.kill9();
            killed = true;
        });
        for (int i = 0; i < 500; ++i) {
            const std::string name = "durable-" + std::to_string(i);
            auto id = submit_true(m, name);
            if (!id) {
                break; // the coordinator is gone: this one was not acknowledged
            }
            acked.emplace_back(*id, name);
        }
        killer.join();
        REQUIRE(killed);
    }
    INFO(acked.size() << " submissions acknowledged before the kill");
    CoordinatorProcess again(dir.path());
    CHECK(again.admin().empty()); // the store was found, not recreated
    auto m = test::http_client(again.url(), member);
    auto r = m.request("GET", "/v1/jobs");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    std::map<std::int64_t, std::string> stored;
    std::set<std::string> names;
    const json listed = json::parse(r->body);
    for (const auto& j : listed["jobs"]) {
        stored[j["id"].get<std::int64_t>()] = j["name"];
        CHECK(names.insert(j["name"].get<std::string>()).second); // no job twice
    }
    INFO(stored.size() << " jobs stored after the restart");
    for (const auto& [id, name] : acked) {
        INFO("acknowledged job " << id);
        REQUIRE(stored.count(id) == 1);
        CHECK(stored[id] == name);
    }
    // At most the one request in flight at the kill may be stored without an answer.
    CHECK(stored.size() <= acked.size() + 1);
}

TEST_CASE("coordinator process: kill -9 during concurrent submissions loses no acknowledged job", "[coordinator-cli]") {
    // Eight clients at once: their requests share group commits, and an answer means the commit it
    // waited for is on disk.
    test::TempDir dir;
    std::string member;
    constexpr int k_clients = 8;
    std::vector<std::vector<std::pair<std::int64_t, std::string>>> acked(k_clients);
    std::random_device rd;
    const auto seed = rd();
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    {
        CoordinatorProcess coord(dir.path());
        member = make_member(coord.url(), coord.admin());
        std::vector<std::thread> clients;
        for (int t = 0; t < k_clients; ++t) {
            clients.emplace_back([&, t] {
                auto m = test::http_client(coord.url(), member);
                for (int i = 0; i < 400; ++i) {
                    const std::string name = "client-" + std::to_string(t) + "-" + std::to_string(i);
                    auto id = submit_true(m, name);
                    if (!id) {
                        return; // the coordinator is gone: this one was not acknowledged
                    }
                    acked[static_cast<std::size_t>(t)].emplace_back(*id, name);
                }
            });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1500)(rng)));
        coord.kill9();
        for (auto& c : clients) {
            c.join();
        }
    }
    std::size_t total = 0;
    for (const auto& a : acked) {
        total += a.size();
    }
    INFO(total << " submissions acknowledged before the kill");
    REQUIRE(total > 0);
    CoordinatorProcess again(dir.path());
    auto m = test::http_client(again.url(), member);
    auto r = m.request("GET", "/v1/jobs");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    std::map<std::int64_t, std::string> stored;
    const json listed = json::parse(r->body);
    for (const auto& j : listed["jobs"]) {
        stored[j["id"].get<std::int64_t>()] = j["name"];
    }
    for (const auto& list : acked) {
        for (const auto& [id, name] : list) {
            INFO("acknowledged job " << id << " " << name);
            REQUIRE(stored.count(id) == 1);
            CHECK(stored[id] == name);
        }
    }
    // Only the requests in flight at the kill (one per client at most) may be stored unanswered.
    CHECK(stored.size() <= total + k_clients);
}

TEST_CASE("coordinator process: TLS with a self-signed certificate and --ca-cert", "[coordinator-cli]") {
    if (bp::search_path("openssl").empty()) {
        WARN("SKIPPED: the openssl command is not installed (package openssl)");
        return;
    }
    test::TempDir dir;
    auto key = (dir.path() / "key.pem").string();
    auto cert = (dir.path() / "cert.pem").string();
    int rc = bp::system(bp::search_path("openssl"), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                        "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                        "subjectAltName=IP:127.0.0.1", bp::std_out > bp::null, bp::std_err > bp::null);
    REQUIRE(rc == 0);
    CoordinatorProcess coord(dir.path(), {"--tls-cert", cert, "--tls-key", key});
    const std::string url = coord.url("https");
    auto trusted = test::run_gpupool({"--url", url, "--token", coord.admin(), "--ca-cert", cert, "admin", "team", "list"});
    CHECK(trusted.exit_code == 0);
    CHECK_THAT(trusted.out, Catch::Contains("NAME"));
    auto refused = test::run_gpupool({"--url", url, "--token", coord.admin(), "admin", "team", "list"});
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Catch::Contains("certificate"));
    auto plain = test::run_gpupool({"--url", coord.url("http"), "--token", coord.admin(), "admin", "team", "list"});
    CHECK(plain.exit_code == 1);
}

TEST_CASE("coordinator process: grants, credits, budgets, report, refusal and price through the CLI", "[coordinator-cli][credits]") {
    test::TempDir dir;
    CoordinatorProcess coord(dir.path());
    const std::string url = coord.url();
    auto a = test::http_client(url, coord.admin());
    REQUIRE(a.request("POST", "/v1/admin/teams", R"({"name": "poor"})")->status == 201);
    auto tok = a.request("POST", "/v1/admin/tokens", R"({"role": "member", "team": "poor"})");
    REQUIRE(tok->status == 201);
    const std::string member = json::parse(tok->body)["token"];
    auto as_admin = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"--url", url, "--token", coord.admin()});
        return test::run_gpupool(args);
    };
    auto as_member = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"--url", url, "--token", member});
        return test::run_gpupool(args);
    };

    auto grant = as_admin({"admin", "grant", "poor", "0.0001", "--note", "seed", "--expires", "2099-01-01"});
    CHECK(grant.exit_code == 0);
    CHECK_THAT(grant.out, Catch::Contains("granted 0.0001 credits to team poor") && Catch::Contains("2099-01-01"));
    CHECK(as_admin({"admin", "grant", "poor", "1.0000001"}).exit_code == 2); // finer than a micro-credit
    auto nobody = as_admin({"admin", "grant", "nobody", "1"});
    CHECK(nobody.exit_code == 1);
    CHECK_THAT(nobody.err, Catch::Contains("no team named `nobody`") &&
                               Catch::Contains("gpupool admin team create nobody"));

    // Six CPU jobs of up to a minute at 0.1 core: 6 x 0.000033 = 0.000198 credits > 0.0001.
    auto recipe = (test::source_dir() / "recipes/hello-sweep/recipe.toml").string();
    auto refused = as_member({"submit", recipe});
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Catch::Contains("estimated at 0.000198 credits") &&
                                Catch::Contains("team `poor` has 0.0001 credits available") &&
                                Catch::Contains("--allow-unfunded"));
    CHECK(as_member({"submit", "--allow-unfunded", recipe}).exit_code == 0);

    auto credits = as_member({"credits"});
    CHECK(credits.exit_code == 0);
    CHECK_THAT(credits.out, Catch::Contains("team poor") && Catch::Contains("available   0.0001 credits") &&
                                Catch::Contains("+0.0001") && Catch::Contains("grant: seed"));
    auto credits_json = as_member({"--json", "credits"});
    REQUIRE(credits_json.exit_code == 0);
    CHECK(json::parse(credits_json.out)["balance_micro"] == 100);

    auto budget = as_admin({"admin", "budget", "poor", "--day", "2.5"});
    CHECK(budget.exit_code == 0);
    CHECK_THAT(budget.out, Catch::Contains("2.5 per day, none per week"));
    // A cap left out keeps its value, `none` removes one, no flags shows them.
    budget = as_admin({"admin", "budget", "poor", "--week", "10"});
    CHECK_THAT(budget.out, Catch::Contains("2.5 per day, 10 per week"));
    budget = as_admin({"admin", "budget", "poor"});
    CHECK(budget.exit_code == 0);
    CHECK_THAT(budget.out, Catch::Contains("team poor budget: 2.5 per day, 10 per week; spent"));
    budget = as_admin({"admin", "budget", "poor", "--day", "none"});
    CHECK_THAT(budget.out, Catch::Contains("none per day, 10 per week"));
    budget = as_admin({"admin", "budget", "poor", "--week", "none", "--day", "2.5"});
    CHECK_THAT(budget.out, Catch::Contains("2.5 per day, none per week"));
    // A member's own caps, within the team's: set by label, shown with the team's.
    REQUIRE(as_admin({"admin", "token", "create", "--team", "poor", "--label", "alice"}).exit_code == 0);
    budget = as_admin({"admin", "budget", "poor", "--member", "alice", "--day", "1"});
    CHECK(budget.exit_code == 0);
    CHECK_THAT(budget.out, Catch::Contains("member alice of team poor budget: 1 per day, none per week"));
    budget = as_admin({"admin", "budget", "poor"});
    CHECK_THAT(budget.out, Catch::Contains("2.5 per day") && Catch::Contains("member alice (token") &&
                               Catch::Contains("): 1 per day, none per week"));
    CHECK(as_admin({"admin", "budget", "poor", "--member", "alice"}).exit_code == 2);
    auto no_member = as_admin({"admin", "budget", "poor", "--member", "bob", "--day", "1"});
    CHECK(no_member.exit_code == 1);
    CHECK_THAT(no_member.err, Catch::Contains("no live member token labelled `bob`"));
    CHECK_THAT(as_member({"credits"}).out, Catch::Contains("member      alice: 1 per day"));
    auto adjust = as_admin({"admin", "adjust", "poor", "-0.00005", "--note", "typo"});
    CHECK(adjust.exit_code == 0);
    CHECK_THAT(adjust.out, Catch::Contains("0.00005 credits from team:"));

    // Tokens: listed with role, team, label and last use; revoked by id or by a unique label.
    REQUIRE(as_admin({"admin", "token", "create", "--team", "poor", "--label", "laptop"}).exit_code == 0);
    auto tokens = as_admin({"admin", "token", "list", "--team", "poor"});
    CHECK(tokens.exit_code == 0);
    CHECK_THAT(tokens.out, Catch::Contains("laptop") && Catch::Contains("member") && Catch::Contains("poor") &&
                               Catch::Contains("active"));
    auto revoked = as_admin({"admin", "token", "revoke", "laptop"});
    CHECK(revoked.exit_code == 0);
    CHECK_THAT(revoked.out, Catch::Contains("revoked token"));
    CHECK_THAT(as_admin({"admin", "token", "list", "--team", "poor"}).out, !Catch::Contains("laptop"));
    CHECK_THAT(as_admin({"admin", "token", "list", "--team", "poor", "--all"}).out,
               Catch::Contains("laptop") && Catch::Contains("revoked"));
    auto unknown = as_admin({"admin", "token", "revoke", "laptop"});
    CHECK(unknown.exit_code == 1);
    CHECK_THAT(unknown.err, Catch::Contains("no active token named `laptop`"));

    auto report = as_admin({"admin", "report", "--since", "2020-01-01"});
    CHECK(report.exit_code == 0);
    CHECK_THAT(report.out, Catch::Contains("GRANTED") && Catch::Contains("poor") && Catch::Contains("0.00005"));
    CHECK(as_member({"admin", "report"}).exit_code == 1); // admins only

    auto price = as_member({"price", (test::source_dir() / "recipes/tlens-attribution/recipe.toml").string()});
    CHECK(price.exit_code == 0);
    CHECK_THAT(price.out, Catch::Contains("Pool estimate") && Catch::Contains("Your team has 0.00005 credits available") &&
                              Catch::Contains("Cheapest GPU that fits") && Catch::Contains("data/prices.toml"));
    auto price_json = test::run_gpupool({"--json", "price", "--offline", (test::source_dir() / "recipes/tlens-attribution/recipe.toml").string()});
    REQUIRE(price_json.exit_code == 0);
    auto pj = json::parse(price_json.out);
    CHECK(pj["pool"].is_null());
    CHECK(pj["models"].size() >= 8);
}

TEST_CASE("coordinator process: --credits record accepts work a team cannot pay for, the default refuses it",
          "[coordinator-cli]") {
    auto unfunded_submit = [](const std::vector<std::string>& extra) {
        test::TempDir dir;
        CoordinatorProcess coord(dir.path(), extra);
        auto a = test::http_client(coord.url(), coord.admin());
        REQUIRE(a.request("POST", "/v1/admin/teams", R"({"name": "broke"})")->status == 201);
        auto m = a.request("POST", "/v1/admin/tokens", R"({"role": "member", "team": "broke"})");
        REQUIRE(m->status == 201);
        const std::string member = json::parse(m->body)["token"];
        return test::run_gpupool({"--url", coord.url(), "--token", member, "submit",
                                  (test::source_dir() / "recipes/hello-sweep/recipe.toml").string()});
    };
    auto enforced = unfunded_submit({});
    CHECK(enforced.exit_code == 1);
    CHECK_THAT(enforced.err, Catch::Contains("credits"));
    auto recorded = unfunded_submit({"--credits", "record"});
    INFO(recorded.err);
    CHECK(recorded.exit_code == 0);
    CHECK_THAT(recorded.out, Catch::Contains("submitted sweep 1: 6 jobs"));
}

TEST_CASE("coordinator process: a lost admin token is recovered from the database, with the coordinator stopped",
          "[coordinator-cli]") {
    test::TempDir dir;
    const std::string db = (dir.path() / "pool.db").string();
    std::uint16_t port = 0;
    {
        CoordinatorProcess coord(dir.path());
        port = coord.port();
        // A second coordinator on the same database is refused, and so is the recovery while it runs.
        auto twice = test::run_gpupool({"coordinator", "--listen", "127.0.0.1:0", "--db", db});
        CHECK(twice.exit_code != 0);
        CHECK_THAT(twice.err, Catch::Contains("another gpupool coordinator is using"));
        auto busy = test::run_gpupool({"coordinator", "--db", db, "--new-admin-token"});
        CHECK(busy.exit_code == 1);
        CHECK_THAT(busy.err, Catch::Contains("stop it first"));
        CHECK(coord.terminate_and_wait() == 0);
    }
    auto recovered = test::run_gpupool({"coordinator", "--db", db, "--new-admin-token"});
    INFO(recovered.err);
    REQUIRE(recovered.exit_code == 0);
    CHECK_THAT(recovered.err, Catch::Contains("new admin token"));
    const std::string token = recovered.out.substr(0, recovered.out.find('\n'));
    REQUIRE(token.starts_with("gpp_"));
    CoordinatorProcess again(dir.path(), {}, port);
    auto teams = test::run_gpupool({"--url", again.url(), "--token", token, "admin", "team", "list"});
    CHECK(teams.exit_code == 0);
    auto missing = test::run_gpupool({"coordinator", "--db", (dir.path() / "nope.db").string(), "--new-admin-token"});
    CHECK(missing.exit_code == 1);
    CHECK_THAT(missing.err, Catch::Contains("no pool database"));
}

namespace {

// A self-signed certificate for 127.0.0.1 made by the openssl command, as `stem`-cert.pem and
// `stem`-key.pem in `dir`.
void openssl_pair(const fs::path& dir, const std::string& stem) {
    const int rc = bp::system(bp::search_path("openssl"), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                              (dir / (stem + "-key.pem")).string(), "-out", (dir / (stem + "-cert.pem")).string(),
                              "-days", "1", "-subj", "/CN=127.0.0.1 " + stem, "-addext", "subjectAltName=IP:127.0.0.1",
                              bp::std_out > bp::null, bp::std_err > bp::null);
    REQUIRE(rc == 0);
}

} // namespace

TEST_CASE("coordinator process: SIGHUP reloads the TLS files, and a failed reload keeps the old certificate",
          "[coordinator-cli][tls-reload]") {
    if (bp::search_path("openssl").empty()) {
        WARN("SKIPPED: the openssl command is not installed (package openssl)");
        return;
    }
    test::TempDir dir;
    openssl_pair(dir.path(), "a");
    openssl_pair(dir.path(), "b");
    const fs::path cert = dir.path() / "cert.pem";
    const fs::path key = dir.path() / "key.pem";
    fs::copy_file(dir.path() / "a-cert.pem", cert);
    fs::copy_file(dir.path() / "a-key.pem", key);
    CoordinatorProcess coord(dir.path(), {"--tls-cert", cert.string(), "--tls-key", key.string()});
    const std::string url = coord.url("https");
    auto trusts = [&](const std::string& stem) {
        return test::run_gpupool({"--url", url, "--token", coord.admin(), "--ca-cert",
                                  (dir.path() / (stem + "-cert.pem")).string(), "admin", "team", "list"})
                   .exit_code == 0;
    };
    REQUIRE(trusts("a"));
    REQUIRE_FALSE(trusts("b"));

    // Renewal: the files are replaced in place, then SIGHUP.
    fs::copy_file(dir.path() / "b-cert.pem", cert, fs::copy_options::overwrite_existing);
    fs::copy_file(dir.path() / "b-key.pem", key, fs::copy_options::overwrite_existing);
    coord.signal(SIGHUP);
    REQUIRE(test::eventually([&] { return coord.stderr_text().find("reloaded the TLS") != std::string::npos; }));
    CHECK(trusts("b"));
    CHECK_FALSE(trusts("a"));

    // A key that does not match: logged, and B is still served.
    fs::copy_file(dir.path() / "a-key.pem", key, fs::copy_options::overwrite_existing);
    coord.signal(SIGHUP);
    REQUIRE(test::eventually([&] { return coord.stderr_text().find("TLS reload failed") != std::string::npos; }));
    INFO(coord.stderr_text());
    CHECK_THAT(coord.stderr_text(), Catch::Contains("still serving the previous certificate"));
    CHECK(coord.running());
    CHECK(trusts("b"));
    CHECK_FALSE(trusts("a"));
    CHECK(coord.terminate_and_wait() == 0);
}

TEST_CASE("coordinator process: --admin-token-file keeps a new pool's admin token out of stdout", "[coordinator-cli]") {
    test::TempDir dir;
    const fs::path token_file = dir.path() / "admin.token";
    CoordinatorProcess coord(dir.path(), {"--admin-token-file", token_file.string()});
    CHECK(coord.admin().empty()); // not on stdout
    const std::string token = test::slurp(token_file);
    REQUIRE(token.starts_with("gpp_"));
    CHECK((fs::status(token_file).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
    const std::string secret = token.substr(0, token.find('\n'));
    auto teams = test::run_gpupool({"--url", coord.url(), "--token", secret, "admin", "team", "list"});
    CHECK(teams.exit_code == 0);
    CHECK(test::slurp(dir.path() / "stdout").find(secret) == std::string::npos);
    CHECK(coord.stderr_text().find(secret) == std::string::npos);
}

} // namespace test_coordinator_cli
} // namespace
