// `admin backup` and `coordinator --restore`: a backup taken over HTTP while members submit and a
// worker runs jobs holds every job acknowledged before it was asked for, its ledger balances, and it
// restores on a new path; a restore never replaces a newer pool, a pool in use, or anything with a
// file that is not a pool (real service on loopback, real SQLite files).
#include "core/coordinator/restore.hpp"
#include "core/store/sqlite_store.hpp"
#include "tests/core/coordinator/service_fixture.hpp"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_backup_restore {

using namespace gpupool;
using namespace gpupool::test::svc;
namespace fs = std::filesystem;

namespace {

store::Records load(const fs::path& db) {
    store::SqliteOptions o;
    o.create = false;
    auto s = store::SqliteStore::open(db, o);
    REQUIRE(s);
    auto r = (*s)->load();
    REQUIRE(r);
    return *r;
}

// Every account's balance is what its entries say, and the balances sum to zero.
void check_balanced(const store::Records& r) {
    std::map<std::string, std::int64_t> derived;
    for (const auto& e : r.ledger) {
        derived[credits::to_string(e.debit)] -= e.amount;
        derived[credits::to_string(e.credit)] += e.amount;
    }
    std::int64_t sum = 0;
    for (const auto& b : r.balances) {
        INFO(credits::to_string(b.account));
        CHECK(derived[credits::to_string(b.account)] == b.balance);
        sum += b.balance;
    }
    CHECK(sum == 0);
}

} // namespace

TEST_CASE("a backup taken under load holds every acknowledged job and restores balanced", "[service][backup]") {
    Pool p;
    std::mutex mu;
    std::vector<std::int64_t> acked; // job ids, in the order their submissions were acknowledged
    std::atomic<bool> stop{false};
    std::atomic<int> completed{0};

    std::thread members([&] {
        auto c = p.server.client(p.member);
        for (int i = 0; !stop; ++i) {
            const json body = {
                {"source", "t.toml"},
                {"jobs", json::parse(recipe::to_json(std::vector{spec("j" + std::to_string(i))}).dump())}};
            auto r = c.request("POST", "/v1/jobs", body.dump());
            REQUIRE(r);
            REQUIRE(r->status == 201);
            {
                std::lock_guard lock(mu);
                const json answer = json::parse(r->body);
                for (const auto& id : answer["jobs"]) {
                    acked.push_back(id.get<std::int64_t>());
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5)); // about 150 submissions a second
        }
    });
    std::thread worker([&] {
        auto w = p.server.client(p.worker);
        while (!stop) {
            REQUIRE(w.request("POST", "/v1/workers/heartbeat", R"({"running":[]})"));
            auto polled = w.request("POST", "/v1/workers/poll?wait_ms=200", "{}");
            REQUIRE(polled);
            const json assignments = json::parse(polled->body)["assignments"];
            for (const auto& a : assignments) {
                const std::string attempt = std::to_string(a["attempt"].get<std::int64_t>());
                REQUIRE(w.request("POST", "/v1/attempts/" + attempt + "/start", "{}"));
                REQUIRE(w.request("POST", "/v1/attempts/" + attempt + "/logs?offset=0", "ran\n"));
                auto done = w.request("POST", "/v1/attempts/" + attempt + "/complete", R"({"exit_code":0})");
                REQUIRE(done);
                completed += done->status == 200 ? 1 : 0;
            }
        }
    });
    while (completed < 5) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<std::int64_t> before;
    {
        std::lock_guard lock(mu);
        before = acked;
    }
    auto admin = p.server.client(p.server.admin_token);
    const fs::path backup = p.server.dir.path() / "backup.db";
    auto r = admin.download("POST", "/v1/admin/backup", backup);
    const int completed_at_backup = completed;
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // the load goes on after it
    stop = true;
    members.join();
    worker.join();
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    CHECK(r->content_type == "application/vnd.sqlite3");
    CHECK(r->body.empty()); // in the file, not in memory
    CHECK((fs::status(backup).permissions() & fs::perms::others_read) == fs::perms::none);
    REQUIRE(store::check_backup_file(backup).value() == store::k_schema_version);

    // The backup is one moment of the pool: every job acknowledged before it was asked for, and the
    // pool went on without it.
    const fs::path restored_db = p.server.dir.path() / "elsewhere" / "pool.db";
    fs::create_directories(restored_db.parent_path());
    auto report = coordinator::restore_pool({backup, restored_db.string(), false});
    REQUIRE(report);
    CHECK_FALSE(report->replaced);
    const store::Records restored = load(restored_db);
    std::set<std::int64_t> ids;
    for (const auto& j : restored.jobs) {
        ids.insert(j.id.value());
    }
    for (std::int64_t id : before) {
        CHECK(ids.count(id) == 1);
    }
    CHECK(report->restored.jobs == static_cast<std::int64_t>(restored.jobs.size()));
    CHECK(restored.jobs.size() < acked.size()); // submissions after it are not in it
    std::int64_t succeeded = 0;
    for (const auto& j : restored.jobs) {
        succeeded += j.state == store::JobState::succeeded ? 1 : 0;
    }
    CHECK(succeeded >= 5);
    CHECK(succeeded <= completed_at_backup);
    CHECK(restored.ledger.size() > 10);
    check_balanced(restored);

    // The backup was audited once it was taken.
    auto audit = call(admin, "GET", "/v1/admin/audit?action=pool.backup");
    REQUIRE(audit["audit"].size() == 1);
    CHECK(audit["audit"][0]["detail"]["bytes"] == static_cast<std::int64_t>(fs::file_size(backup)));
    CHECK(audit["audit"][0]["actor"]["id"].is_number());

    // Members may not take one.
    auto member = p.server.client(p.member);
    auto refused = member.download("POST", "/v1/admin/backup", p.server.dir.path() / "stolen.db");
    REQUIRE(refused);
    CHECK(refused->status == 403);
    CHECK(fs::file_size(p.server.dir.path() / "stolen.db") == 0);
}

TEST_CASE("a restore refuses a newer pool, a pool in use and a file that is not a pool", "[service][backup]") {
    test::TempDir dir;
    const fs::path backup = dir.path() / "backup.db";
    const fs::path db = dir.path() / "pool.db";
    auto make_team = [](const fs::path& path, const std::string& name, std::int64_t at) {
        auto s = store::SqliteStore::open(path);
        REQUIRE(s);
        store::Records c;
        c.teams.push_back({TeamId(at), name, 1, at, std::nullopt, std::nullopt});
        REQUIRE((*s)->apply(c));
    };
    {
        make_team(dir.path() / "source.db", "early", 1000);
        auto s = store::SqliteStore::open(dir.path() / "source.db");
        REQUIRE(s);
        REQUIRE((*s)->backup(backup));
        CHECK_FALSE((*s)->backup(backup)); // never over a file
    }
    // A pool that changed after the backup: refused, untouched; --force replaces it.
    make_team(db, "later", 2000);
    auto refused = coordinator::restore_pool({backup, db.string(), false});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::conflict);
    CHECK_THAT(refused.error().message, Catch::Contains("changed after the backup"));
    CHECK(load(db).teams.at(0).name == "later");
    CHECK_FALSE(fs::exists(db.string() + ".restoring"));
    auto forced = coordinator::restore_pool({backup, db.string(), true});
    REQUIRE(forced);
    REQUIRE(forced->replaced);
    CHECK(forced->replaced->teams == 1);
    CHECK(load(db).teams.at(0).name == "early");
    // The same backup again: the pool is not newer than it.
    CHECK(coordinator::restore_pool({backup, db.string(), false}));

    // A pool in use (its lock held, as a running coordinator holds it).
    {
        auto in_use = store::lock_database(db);
        REQUIRE(in_use);
        auto busy = coordinator::restore_pool({backup, db.string(), true});
        REQUIRE_FALSE(busy);
        CHECK(busy.error().code == ErrorCode::unavailable);
    }
    // Not a pool: refused before anything is replaced, naming the file.
    const fs::path junk = dir.path() / "junk.db";
    test::write_file(junk, std::string(8192, 'x'));
    auto bad = coordinator::restore_pool({junk, db.string(), true});
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("junk.db"));
    CHECK(bad.error().field == "--restore");
    CHECK_FALSE(store::check_backup_file(junk));
    CHECK(load(db).teams.at(0).name == "early");
    auto missing = coordinator::restore_pool({dir.path() / "nope.db", db.string(), false});
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ErrorCode::not_found);
}

} // namespace test_backup_restore
} // namespace
