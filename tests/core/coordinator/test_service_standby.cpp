// Active and standby coordinators as services on one real PostgreSQL database: the second stands by
// and answers 503 naming the first (before reading a body), a client with both URLs is served by the
// active one, a clean stop hands the pool over at once with its state, and on SQLite a service is
// always active. The kill -9 and SIGSTOP cases are tests/ha/failover.sh (real processes).
#include "core/coordinator/service.hpp"
#include "core/net/http_client.hpp"
#include "core/store/open_store.hpp"
#ifdef GPUPOOL_HAVE_POSTGRES
#include "tests/pg/pg_test_server.hpp"
#endif
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_service_standby {

using namespace gpupool;
using json = nlohmann::json;

namespace {

net::ClientOptions to(const std::string& urls, const std::string& token = {}) {
    net::ClientOptions o;
    o.base_url = urls;
    o.token = token;
    return o;
}

std::unique_ptr<coordinator::CoordinatorService> service_on(const std::string& db) {
    coordinator::ServiceOptions o;
    o.tick = std::chrono::milliseconds(50);
    o.standby.takeover_after = std::chrono::milliseconds(1500);
    o.standby.retry = std::chrono::milliseconds(100);
    auto opened = store::open_store(db);
    INFO((opened ? std::string() : opened.error().describe()));
    REQUIRE(opened);
    return std::make_unique<coordinator::CoordinatorService>(o, std::move(*opened), coordinator::system_clock());
}

std::string url_of(const coordinator::CoordinatorService& s) { return "http://127.0.0.1:" + std::to_string(s.port()); }

net::Response must(Result<net::Response> r) {
    INFO((r ? std::string() : r.error().describe()));
    REQUIRE(r);
    return std::move(*r);
}

[[maybe_unused]] bool eventually(const std::function<bool()>& f, std::chrono::milliseconds within) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (!f()) {
        if (std::chrono::steady_clock::now() > end) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

} // namespace

#ifdef GPUPOOL_HAVE_POSTGRES
TEST_CASE("standby: the second coordinator on a database stands by, and takes over when the first stops",
          "[postgres][service][standby]") {
    auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    const std::string db = test::fresh_database("standby_service", *server);
    auto a = service_on(db);
    std::string admin;
    REQUIRE(a->start(&admin));
    REQUIRE_FALSE(admin.empty());
    CHECK(a->active());
    CHECK(a->active_address() == url_of(*a));
    auto b = service_on(db);
    std::string none;
    REQUIRE(b->start(&none));
    CHECK(none.empty());
    CHECK_FALSE(b->active());
    CHECK(b->active_address() == url_of(*a));

    net::ClientOptions to_b = to(url_of(*b), admin);
    net::HttpClient only_b(to_b);
    for (const char* path : {"/v1/health", "/v1/whoami"}) {
        INFO(path);
        auto r = must(only_b.request("GET", path));
        CHECK(r.status == 503);
        CHECK(json::parse(r.body).at("error") == "standby");
        CHECK(json::parse(r.body).at("active") == url_of(*a));
        REQUIRE(r.headers.find("Gpupool-Active") != nullptr);
        CHECK(*r.headers.find("Gpupool-Active") == url_of(*a));
    }
    // A team made through a client that knows both, the standby first: the active one made it.
    net::HttpClient both(to(url_of(*b) + "," + url_of(*a), admin));
    auto made = must(both.request("POST", "/v1/admin/teams", R"({"name":"fellows"})"));
    CHECK(made.status == 201);
    CHECK(both.current_url() == url_of(*a));

    // A clean stop gives the lease up: the standby takes over well before the lease would run out.
    const auto stopped = std::chrono::steady_clock::now();
    a->stop();
    REQUIRE(eventually([&] { return b->active(); }, std::chrono::milliseconds(1000)));
    INFO("took over after "
         << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - stopped).count()
         << " ms");
    CHECK(b->active_address() == url_of(*b));
    auto teams = must(both.request("GET", "/v1/admin/teams"));
    REQUIRE(teams.status == 200);
    CHECK(teams.body.find("fellows") != std::string::npos); // the pool came with it
    CHECK(both.current_url() == url_of(*b));
    b->stop();
}

TEST_CASE("standby: an active coordinator that stops renewing is replaced after --takeover-after",
          "[postgres][service][standby]") {
    auto server = test::test_pg_url();
    if (!server) {
        return;
    }
    const std::string db = test::fresh_database("standby_expiry", *server);
    auto b = service_on(db);
    // The lease is held, and not renewed, by a coordinator that is gone (a process killed with -9).
    {
        auto held = store::open_store(db);
        REQUIRE(held);
        auto lease = (*held)->acquire_lease({"gone", "http://127.0.0.1:1", 1500});
        REQUIRE(lease);
        REQUIRE(lease->holder == "gone");
    }
    REQUIRE(b->start());
    CHECK_FALSE(b->active());
    CHECK(b->active_address() == "http://127.0.0.1:1");
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(eventually([&] { return b->active(); }, std::chrono::milliseconds(5000)));
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(waited >= std::chrono::milliseconds(1000)); // not before the lease ran out
    b->stop();
}

#endif

TEST_CASE("standby: a SQLite pool's coordinator is always the active one", "[service][standby]") {
    test::TempDir dir;
    auto s = service_on((dir.path() / "pool.db").string());
    REQUIRE(s->start());
    CHECK(s->active());
    CHECK(s->active_address() == url_of(*s));
    net::HttpClient c(to(url_of(*s)));
    CHECK(must(c.request("GET", "/v1/health")).status == 200);
}

// While it lives, every write of this process to a regular file fails (RLIMIT_FSIZE 0: EFBIG, with
// SIGXFSZ ignored), as on a full disk; pipes and terminals are not files and still take the logs.
struct FilesRefuseWrites {
    rlimit before{};
    FilesRefuseWrites() {
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
        ::signal(SIGXFSZ, SIG_IGN);
        rlimit none = before;
        none.rlim_cur = 0;
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &none) == 0);
    }
    ~FilesRefuseWrites() { ::setrlimit(RLIMIT_FSIZE, &before); }
};

TEST_CASE("standby: a SQLite coordinator whose commit fails stops serving without naming itself, then serves "
          "again",
          "[service][standby]") {
    test::TempDir dir;
    auto s = service_on((dir.path() / "pool.db").string());
    std::string admin;
    REQUIRE(s->start(&admin));
    net::HttpClient c(to(url_of(*s), admin));
    CHECK(must(c.request("POST", "/v1/admin/teams", R"({"name":"before"})")).status == 201);
    {
        auto full = std::make_unique<FilesRefuseWrites>();
        // The write is refused, not acknowledged: nothing of it is kept.
        CHECK(must(c.request("POST", "/v1/admin/teams", R"({"name":"lost"})")).status == 503);
        // It stands by until it can load the pool again (and steps down again at its next failed
        // commit, so `active()` flickers while the disk is full). Its 503 says why and names no
        // coordinator: before, it named itself, whose lease it had just given up, as the one that
        // serves the pool.
        std::optional<net::Response> standby;
        CHECK(eventually(
            [&] {
                auto r = must(c.request("GET", "/v1/admin/teams"));
                if (r.status == 503 && json::parse(r.body).value("error", "") == "standby") {
                    standby = r;
                }
                return standby.has_value();
            },
            std::chrono::milliseconds(5000)));
        REQUIRE(standby);
        const auto body = json::parse(standby->body);
        CHECK(body.at("active") == "");
        CHECK(standby->headers.find("Gpupool-Active") == nullptr);
        CHECK_THAT(body.at("detail").get<std::string>(),
                   Catch::StartsWith("this coordinator stopped serving the pool (a group commit failed: ") &&
                       Catch::EndsWith("and serves again once it holds the pool's lease; retry shortly"));
    }
    // The disk has room again: it serves, with what it acknowledged and nothing else.
    REQUIRE(eventually([&] { return s->active(); }, std::chrono::milliseconds(5000)));
    CHECK(s->active_address() == url_of(*s));
    CHECK(must(c.request("POST", "/v1/admin/teams", R"({"name":"after"})")).status == 201);
    const auto teams = json::parse(must(c.request("GET", "/v1/admin/teams")).body);
    std::vector<std::string> names;
    for (const auto& t : teams.at("teams")) {
        names.push_back(t.at("name"));
    }
    CHECK(std::find(names.begin(), names.end(), "before") != names.end());
    CHECK(std::find(names.begin(), names.end(), "after") != names.end());
    CHECK(std::find(names.begin(), names.end(), "lost") == names.end());
    s->stop();
}

} // namespace test_service_standby
} // namespace
