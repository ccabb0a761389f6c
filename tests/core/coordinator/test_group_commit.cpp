// Group commit through the real HTTP service on a real SQLite file (service_group.cpp): requests
// handled together share one commit, none is answered before it, and when the commit fails every
// request in the group is answered 503 and the pool is read back from the database.
#include "tests/core/coordinator/service_fixture.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_group_commit {

using namespace gpupool;
using namespace gpupool::test::svc;

namespace {

json submission(const std::string& name) {
    return {{"source", "t.toml"}, {"jobs", json::parse(recipe::to_json(std::vector{spec(name)}).dump())}};
}

// The names of the team's jobs, asked until the coordinator serves again (it may be reloading).
std::set<std::string> job_names(const Server& server, const std::string& token) {
    auto c = server.client(token);
    for (int i = 0; i < 100; ++i) {
        auto r = c.request("GET", "/v1/jobs", "");
        REQUIRE(r);
        if (r->status == 503) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
        }
        REQUIRE(r->status == 200);
        const json listed = json::parse(r->body);
        std::set<std::string> names;
        for (const auto& j : listed["jobs"]) {
            names.insert(j["name"].get<std::string>());
        }
        return names;
    }
    FAIL("the coordinator did not serve again within 5 s");
    return {};
}

// A value of the metrics' text: the line that starts with `name` followed by a space.
double metric(const std::string& text, const std::string& name) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(name + " ", 0) == 0) {
            return std::stod(line.substr(name.size() + 1));
        }
    }
    FAIL("no metric " << name);
    return 0;
}

// `count` clients at once, each submitting `each` jobs named "<prefix>-<client>-<n>"; the status of every
// submission by name (Catch's assertions stay on this thread).
std::map<std::string, int> burst(const Server& server, const std::string& token, int count, int each,
                                 const std::string& prefix) {
    std::vector<std::map<std::string, int>> seen(static_cast<std::size_t>(count));
    std::vector<std::thread> clients;
    for (int t = 0; t < count; ++t) {
        clients.emplace_back([&, t] {
            auto c = server.client(token);
            for (int n = 0; n < each; ++n) {
                const std::string name = prefix + "-" + std::to_string(t) + "-" + std::to_string(n);
                auto r = c.request("POST", "/v1/jobs", submission(name).dump());
                seen[static_cast<std::size_t>(t)][name] = r ? r->status : -1;
            }
        });
    }
    for (auto& c : clients) {
        c.join();
    }
    std::map<std::string, int> all;
    for (auto& m : seen) {
        all.merge(m);
    }
    return all;
}

} // namespace

TEST_CASE("service: concurrent requests share group commits, and every acknowledged one is stored",
          "[service][group]") {
    Pool pool;
    const auto statuses = burst(pool.server, pool.member, 16, 15, "burst");
    REQUIRE(statuses.size() == 240);
    for (const auto& [name, status] : statuses) {
        INFO(name);
        CHECK(status == 201);
    }
    const auto names = job_names(pool.server, pool.member);
    for (const auto& [name, status] : statuses) {
        CHECK(names.count(name) == 1);
    }
    // Some commit held more than one request: the group sizes' sum exceeds their count.
    auto admin = pool.server.client(pool.server.admin_token);
    auto scraped = admin.request("GET", "/metrics", "");
    REQUIRE(scraped);
    REQUIRE(scraped->status == 200);
    const double groups = metric(scraped->body, "gpupool_store_group_tasks_count");
    const double tasks = metric(scraped->body, "gpupool_store_group_tasks_sum");
    INFO(tasks << " tasks in " << groups << " group commits");
    CHECK(groups >= 1);
    CHECK(tasks > groups);
    CHECK(metric(scraped->body, "gpupool_store_commit_failures_total") == 0);
}

TEST_CASE("service: a group commit that fails answers its requests 503, keeps none of them, and the pool "
          "is read back from the database",
          "[service][group]") {
    Pool pool;
    const std::string member = pool.member;
    pool.submit({spec("before")});
    {
        // A deferred foreign key is checked at COMMIT only: a job whose spec names "poison-pill" makes
        // the commit of the group it is in fail (another connection adds the trap to the live file).
        SQLite::Database db((pool.server.dir.path() / "pool.db").string(), SQLite::OPEN_READWRITE);
        db.exec("CREATE TABLE poison (team_id INTEGER REFERENCES teams(id) DEFERRABLE INITIALLY DEFERRED);"
                "CREATE TRIGGER poison_commit AFTER INSERT ON jobs WHEN instr(NEW.spec, 'poison-pill') > 0 "
                "BEGIN INSERT INTO poison (team_id) VALUES (-1); END;");
    }
    auto c = pool.server.client(member);
    auto poisoned = c.request("POST", "/v1/jobs", submission("poison-pill").dump());
    REQUIRE(poisoned);
    INFO(poisoned->body);
    CHECK(poisoned->status == 503);
    CHECK(json::parse(poisoned->body)["error"] == "unavailable");
    CHECK_THAT(poisoned->body, Catch::Contains("nothing was kept"));

    // The poisoned job beside others: whatever shared its commit is refused with it, the rest stored.
    std::map<std::string, int> statuses;
    std::thread pill([&] {
        auto p = pool.server.client(member);
        auto r = p.request("POST", "/v1/jobs", submission("poison-pill-2").dump());
        statuses["poison-pill-2"] = r ? r->status : -1;
    });
    auto others = burst(pool.server, member, 6, 3, "beside");
    pill.join();
    statuses.merge(others);
    CHECK(statuses["poison-pill-2"] == 503);

    const auto names = job_names(pool.server, member);
    CHECK(names.count("before") == 1);
    CHECK(names.count("poison-pill") == 0); // memory was read back: the refused job is not listed
    CHECK(names.count("poison-pill-2") == 0);
    for (const auto& [name, status] : statuses) {
        INFO(name << " answered " << status);
        CHECK((status == 201 || status == 503));
        CHECK(names.count(name) == (status == 201 ? 1U : 0U)); // acknowledged if and only if stored
    }
    // And the pool goes on: a new submission is stored and listed.
    auto after = c.request("POST", "/v1/jobs", submission("after").dump());
    for (int i = 0; i < 100 && after && after->status == 503; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        after = c.request("POST", "/v1/jobs", submission("after").dump());
    }
    REQUIRE(after);
    CHECK(after->status == 201);
    CHECK(job_names(pool.server, member).count("after") == 1);
}

} // namespace test_group_commit
} // namespace
