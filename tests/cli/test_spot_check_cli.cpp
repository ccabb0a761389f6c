// Spot checks on real processes: a coordinator with --verify-fraction, a worker that forges results
// and honest ones whose results are nondeterministic within the recipe's tolerance.
//
// What it proves (issue 43, part 2): the coordinator samples results of a worker another team owns
// and runs them again as check jobs, which never go to the checked worker's owner and cost the
// researchers nothing; a check agrees with an honest result that differs within the tolerance and
// catches every forged result it samples (the worker's own log names the jobs it forged:
// GPUPOOL_TEST_FORGE, worker/agent/forge.hpp); the liar is quarantined (its state, the audit log,
// /metrics, `gpupool admin workers`) and no honest worker is.
//
// Staged in two phases so that it is deterministic. Phase 1: the liar alone, one job at a time, runs
// all 100 jobs; the order of its results is fixed, and so are both seeded draws on it (which results
// it forges, which the coordinator samples: the liar's record stays empty while nobody may run its
// checks). Phase 2: the honest workers start and run the checks, and the tie-breaks these call for.
#include "core/recipe/recipe_json.hpp"
#include "tests/cli/funded_pool.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace test_spot_check_cli {

using namespace gpupool;
using json = nlohmann::json;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr std::size_t k_jobs = 100;

// {"score": 0.5 + noise}, the noise below 1e-5 and different run to run (the shell's pid).
recipe::JobSpec scorer(std::int64_t index) {
    recipe::JobSpec s;
    s.name = "score-" + std::to_string(index);
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {R"sh(printf '{"score": 0.50000%04d}\n' $(($$ % 10000)) > "$GPUPOOL_OUTPUT_DIR/results.json")sh"};
    s.shell = true;
    s.resources.cpu_milli = 250;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 120;
    s.sweep_index = index;
    s.verify.compare = recipe::CompareMode::json;
    s.verify.tolerance = 1e-3;
    return s;
}

json get(net::HttpClient& c, const std::string& path) {
    auto r = c.request("GET", path);
    REQUIRE(r);
    INFO("GET " << path << ": " << r->status << " " << r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

double seconds_since(Steady::time_point t) {
    return std::chrono::duration<double>(Steady::now() - t).count();
}

bool terminal(const json& job) {
    const std::string s = job["state"];
    return s == "succeeded" || s == "failed" || s == "cancelled";
}

// "job 7 queued: <reason>", one line per job not yet ended.
std::string unfinished(const std::vector<json>& jobs) {
    std::ostringstream out;
    for (const auto& j : jobs) {
        if (!terminal(j)) {
            out << "job " << j["id"] << " " << j["state"].get<std::string>() << ": " << j["reason"].get<std::string>()
                << "\n";
        }
    }
    return out.str();
}

// The team's jobs (check_of: only the spot checks), oldest first.
std::vector<json> jobs_of(net::HttpClient& member, const std::string& query, bool checks) {
    std::vector<json> out;
    const json listed = get(member, "/v1/jobs" + query); // held: the loop reads into it
    for (const auto& j : listed["jobs"]) {
        if (j.contains("check_of") == checks) {
            out.push_back(j);
        }
    }
    return out;
}

json worker_named(net::HttpClient& admin, const std::string& name) {
    const json listed = get(admin, "/v1/workers");
    for (const auto& w : listed["workers"]) {
        if (w["name"] == name) {
            return w;
        }
    }
    FAIL("no worker named " << name);
    return {};
}

// The jobs the liar's log says it forged ("attempt 5 (job 12): FORGED 1 output file(s)").
std::set<std::int64_t> forged_jobs(const std::string& log) {
    std::set<std::int64_t> out;
    for (auto at = log.find("): FORGED "); at != std::string::npos; at = log.find("): FORGED ", at + 1)) {
        const auto open = log.rfind("(job ", at);
        REQUIRE(open != std::string::npos);
        out.insert(std::stoll(log.substr(open + 5, at - open - 5)));
    }
    return out;
}

TEST_CASE("spot checks: other owners' workers catch a worker that forges results and it is quarantined",
          "[spot-check-cli][worker-cli][evidence]") {
    test::TempDir dir;
    std::filesystem::create_directories(dir.path() / "coord");
    test::CoordinatorProcess coord(dir.path() / "coord", {"--verify-fraction", "0.1", "--verify-seed", "7"});
    const std::string url = coord.url();
    auto admin = test::http_client(url, coord.admin());
    for (const char* team : {"fellows", "liars", "honest-b", "honest-c"}) {
        REQUIRE(admin.request("POST", "/v1/admin/teams", json{{"name", team}}.dump())->status == 201);
    }
    REQUIRE(admin.request("POST", "/v1/admin/grants", R"({"team": "fellows", "amount_micro": 1000000000})")->status ==
            201);
    auto member = test::http_client(url, test::make_token(admin, R"({"role": "member", "team": "fellows"})"));
    auto enroll = [&](const char* team) {
        return test::make_token(admin, json{{"role", "enroll"}, {"team", team}}.dump());
    };
    std::vector<recipe::JobSpec> specs;
    for (std::size_t i = 0; i < k_jobs; ++i) {
        specs.push_back(scorer(static_cast<std::int64_t>(i)));
    }
    const json body = {{"source", "spot.toml"}, {"jobs", json::parse(recipe::to_json(specs).dump())}};
    auto submitted = member.request("POST", "/v1/jobs", body.dump());
    REQUIRE(submitted);
    REQUIRE(submitted->status == 201);
    const std::string sweep = "?sweep=" + std::to_string(json::parse(submitted->body)["sweep_id"].get<std::int64_t>());

    // ---- Phase 1: the liar alone, one job at a time (boost::process passes it our environment).
    const auto phase1 = Steady::now();
    ::setenv("GPUPOOL_TEST_FORGE", "0.2:42", 1);
    test::WorkerProcess liar(dir.path() / "liar", url, enroll("liars"), {"--name", "spot-liar", "--slots", "1"});
    ::unsetenv("GPUPOOL_TEST_FORGE");
    std::vector<json> originals;
    const bool ran = test::eventually(
        [&] {
            originals = jobs_of(member, sweep, false);
            return originals.size() == k_jobs && std::all_of(originals.begin(), originals.end(), terminal);
        },
        150s, 200ms);
    INFO("phase 1 (the liar alone) took " << seconds_since(phase1) << " s");
    if (!ran) {
        const std::string log = liar.stderr_text();
        FAIL("phase 1: jobs not ended after 150 s (" << originals.size() << " listed):\n"
                                                     << unfinished(originals) << "the liar's log ends:\n"
                                                     << log.substr(log.size() > 8000 ? log.size() - 8000 : 0));
    }
    const std::int64_t liar_id = worker_named(admin, "spot-liar")["id"];
    std::map<std::int64_t, std::int64_t> job_of_attempt; // the liar's attempts, to their jobs
    for (const auto& j : originals) {
        CHECK(j["state"] == "succeeded");
        const json view = get(member, "/v1/jobs/" + std::to_string(j["id"].get<std::int64_t>()));
        REQUIRE(!view["attempt_history"].empty());
        for (const auto& a : view["attempt_history"]) {
            CHECK(a["worker"].get<std::int64_t>() == liar_id);
            job_of_attempt[a["id"].get<std::int64_t>()] = j["id"].get<std::int64_t>();
        }
    }
    const auto sampled = jobs_of(member, "", true);
    INFO(sampled.size() << " of the liar's results sampled for a check");
    REQUIRE(!sampled.empty());
    for (const auto& c : sampled) {
        CHECK(c["state"] == "queued"); // nobody may run them yet: never the liar, whose results they check
        CHECK(job_of_attempt.count(c["check_of"].get<std::int64_t>()) == 1);
    }
    const std::string liar_log = liar.stderr_text();
    CHECK_THAT(liar_log, Catch::Contains("this worker FORGES 0.2 of its results: a test of spot checks"));
    CHECK_THAT(liar_log, !Catch::Contains("FORGED 0 output")); // each forged job had its results.json overwritten
    const std::set<std::int64_t> forged = forged_jobs(liar_log);
    INFO(forged.size() << " results forged");
    CHECK(forged.size() >= 5);
    CHECK(forged.size() <= 40);

    // ---- Phase 2: the honest workers run the checks, and the tie-breaks that disagreements call for
    // (staged in the same transaction as the check's end: once all are done, none comes).
    const auto phase2 = Steady::now();
    test::WorkerProcess honest_b(dir.path() / "honest-b", url, enroll("honest-b"),
                                 {"--name", "spot-honest-b", "--slots", "1"});
    test::WorkerProcess honest_c(dir.path() / "honest-c", url, enroll("honest-c"),
                                 {"--name", "spot-honest-c", "--slots", "1"});
    std::vector<json> checks;
    std::size_t seen = 0;
    const bool settled = test::eventually(
        [&] {
            checks = jobs_of(member, "", true);
            const bool done = checks.size() == seen && std::all_of(checks.begin(), checks.end(), terminal);
            seen = checks.size();
            return done;
        },
        180s, 500ms);
    INFO("phase 2 (the checks) took " << seconds_since(phase2) << " s for " << checks.size() << " check jobs");
    if (!settled) {
        FAIL("phase 2: check jobs not ended after 180 s:\n" << unfinished(checks));
    }

    const json liar_w = worker_named(admin, "spot-liar");
    const json b = worker_named(admin, "spot-honest-b");
    const json c = worker_named(admin, "spot-honest-c");
    const std::set<std::int64_t> honest{b["id"].get<std::int64_t>(), c["id"].get<std::int64_t>()};
    std::set<std::int64_t> checked_jobs;
    for (const auto& j : checks) {
        CHECK(j["state"] == "succeeded");
        CHECK(j["cost_micro"].get<std::int64_t>() == 0); // the pool fee pays the checks, not the team
        checked_jobs.insert(job_of_attempt.at(j["check_of"].get<std::int64_t>()));
        for (const auto& a :
             get(member, "/v1/jobs/" + std::to_string(j["id"].get<std::int64_t>()))["attempt_history"]) {
            CHECK(honest.count(a["worker"].get<std::int64_t>()) == 1);
        }
    }
    // Each checked result: agreed when the liar ran it honestly (noise within 1e-3), disagreed (the
    // tie-break sides with the first check) when it forged it.
    std::int64_t agreed = 0;
    std::int64_t disagreed = 0;
    for (std::int64_t job : checked_jobs) {
        const json check = get(member, "/v1/jobs/" + std::to_string(job) + "/manifest").value("check", json::object());
        INFO("job " << job << (forged.count(job) ? " (forged)" : "") << ": " << check.dump());
        const std::string status = check.value("status", "(no check in its manifest)");
        CHECK(status == (forged.count(job) ? "disagreed" : "agreed"));
        (status == "agreed" ? agreed : disagreed) += 1;
    }
    CHECK(agreed >= 1);
    CHECK(disagreed >= 1);
    CHECK(liar_w["state"] == "quarantined");
    CHECK(liar_w["checks_agreed"].get<std::int64_t>() == agreed);
    CHECK(liar_w["checks_disagreed"].get<std::int64_t>() == disagreed);
    for (const json& w : {b, c}) {
        INFO(w.dump());
        CHECK(w["state"] == "active");
        CHECK(w["checks_disagreed"].get<std::int64_t>() == 0);
        CHECK(w["checks_agreed"].get<std::int64_t>() >= 1);
    }
    // One agreement each for a first check that agreed; a disagreement's first check and tie-break agree.
    CHECK(b["checks_agreed"].get<std::int64_t>() + c["checks_agreed"].get<std::int64_t>() == agreed + 2 * disagreed);

    const json audit = get(admin, "/v1/admin/audit?action=worker.quarantine")["audit"];
    REQUIRE(audit.size() == 1);
    CHECK(audit[0]["target"] == "worker " + std::to_string(liar_id) + " `spot-liar`");
    auto metrics = admin.request("GET", "/metrics");
    REQUIRE(metrics);
    REQUIRE(metrics->status == 200);
    CHECK_THAT(metrics->body, Catch::Contains("\ngpupool_workers_quarantined 1\n"));
    CHECK_THAT(metrics->body, Catch::Contains("gpupool_worker_spot_checks{name=\"spot-liar\",verdict=\"disagreed\""));
    auto listed = test::run_gpupool({"--url", url, "--token", coord.admin(), "admin", "workers"});
    INFO(listed.out << listed.err);
    REQUIRE(listed.exit_code == 0);
    std::istringstream lines(listed.out);
    int liar_lines = 0;
    for (std::string line; std::getline(lines, line);) {
        if (line.find("spot-liar") != std::string::npos && line.find("quarantined") != std::string::npos) {
            ++liar_lines;
        }
        CHECK(!(line.find("spot-honest") != std::string::npos && line.find("quarantined") != std::string::npos));
    }
    CHECK(liar_lines >= 1);
}

} // namespace test_spot_check_cli
} // namespace
