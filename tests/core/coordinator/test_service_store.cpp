// CoordinatorService is handed its store and its clock: it serves whatever Store it is given,
// caps input uploads with that store's blob cap, and reads the time from that clock.
#include "core/coordinator/service.hpp"
#include "core/store/sqlite_store.hpp"
#include "core/util/clock.hpp"
#include "core/util/token_secret.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_service_store {

using namespace gpupool;
using json = nlohmann::json;
using namespace gpupool::test::svc;

namespace {

// A service over a SQLite store with the given blob cap, and a member of team "fellows".
struct SmallPool {
    test::TempDir dir;
    util::ManualClock clock{5'000'000};
    std::unique_ptr<coordinator::CoordinatorService> service;
    std::string admin;
    std::string member;
    std::string url;

    explicit SmallPool(std::int64_t max_blob_bytes) {
        store::SqliteOptions so;
        so.lock = true;
        so.max_blob_bytes = max_blob_bytes;
        auto opened = store::SqliteStore::open(dir.path() / "pool.db", so);
        REQUIRE(opened);
        coordinator::ServiceOptions o;
        o.http.host = "127.0.0.1";
        o.http.port = 0;
        service = std::make_unique<coordinator::CoordinatorService>(o, std::move(*opened), clock);
        REQUIRE(service->start(&admin));
        url = "http://127.0.0.1:" + std::to_string(service->port());
        auto a = client(admin);
        call(a, "POST", "/v1/admin/teams", {{"name", "fellows"}}, 201);
        member = call(a, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201)["token"];
    }
    ~SmallPool() { service->stop(); }

    net::HttpClient client(const std::string& token) const {
        net::ClientOptions o;
        o.base_url = url;
        o.token = token;
        return net::HttpClient(o);
    }
};

int put_inputs(net::HttpClient& c, const std::string& body) {
    auto r = c.request("PUT", "/v1/inputs/" + util::sha256_hex(body), body);
    REQUIRE(r);
    INFO(r->body);
    return r->status;
}

} // namespace

TEST_CASE("service store: an input upload over the store's blob cap is refused", "[service]") {
    SmallPool p(1000);
    auto m = p.client(p.member);
    CHECK(put_inputs(m, std::string(1000, 'a')) == 201);
    CHECK(put_inputs(m, std::string(1001, 'b')) == 400);  // read, then refused by the store
    CHECK(put_inputs(m, std::string(1002, 'c')) == 413);  // over the route's cap: never read
}

TEST_CASE("service store: the SQLite store's blob cap is the coordinator's inputs cap", "[service]") {
    // The upload route takes its cap from the store; with SQLite's default it is what it always was.
    CHECK(store::k_sqlite_max_blob_bytes == static_cast<std::int64_t>(coordinator::k_max_input_archive_bytes));
}

TEST_CASE("service store: the pool's time is the clock the service is handed", "[service]") {
    SmallPool p(1000);
    p.clock.advance_ms(250);
    auto a = p.client(p.admin);
    auto tokens = call(a, "GET", "/v1/admin/tokens")["tokens"];
    REQUIRE(tokens.size() == 2);
    CHECK(tokens[0]["created_at"] == 5'000'000); // the first admin, made at start
    CHECK(tokens[1]["created_at"] == 5'000'000); // the member, before the clock moved
    call(a, "POST", "/v1/admin/tokens", {{"role", "member"}, {"team", "fellows"}}, 201);
    CHECK(call(a, "GET", "/v1/admin/tokens")["tokens"][2]["created_at"] == 5'000'250);
}

} // namespace test_service_store
} // namespace
