// Hostile bodies against the memory of the HTTP server and the coordinator: many large bodies at
// once (ServerOptions::max_body_memory), a fast start followed by a trickle (the body rate over a
// sliding window), and submissions of more jobs than a sweep may have, refused before they are
// built. Each case is something a client (or a member) could do to hold gigabytes before.
#include "cmd/coordinator.hpp"
#include "core/coordinator/service.hpp"
#include "core/net/http_server.hpp"
#include "tests/cli/processes.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <sstream>
#include <stdexcept>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_body_budget {

using namespace gpupool;
using namespace gpupool::test::svc;
using gpupool::test::raw_request;
using gpupool::test::RawConnection;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t k_budget = std::size_t{1} << 20; // 1 MiB of bodies in memory, all together

// A server with a small body budget: POST /echo answers the body's size (up to 4 MiB), POST /throw
// throws once it has its body, GET /ping answers at once.
struct Budgeted {
    std::atomic<int> handled{0};
    std::unique_ptr<net::HttpServer> server;
    boost::asio::io_context ioc;

    explicit Budgeted(net::ServerOptions o = {}) {
        net::Router r;
        r.add(
            "POST", "/echo",
            [this](net::Request req, net::Responder respond) {
                ++handled;
                respond(net::json_response(200, "{\"size\":" + std::to_string(req.body.size()) + "}"));
            },
            net::RouteOptions(4 * k_budget));
        r.add(
            "POST", "/throw", [](net::Request, net::Responder) { throw std::runtime_error("boom"); },
            net::RouteOptions(4 * k_budget));
        r.add("GET", "/ping", [](net::Request, net::Responder respond) { respond(net::json_response(200, "{}")); });
        o.host = "127.0.0.1";
        o.port = 0;
        o.max_body_memory = k_budget;
        server = std::make_unique<net::HttpServer>(o, std::move(r));
        REQUIRE(server->start());
    }

    std::size_t reserved() const { return server->body_bytes_reserved(); }
};

std::string post_head(const std::string& target, std::size_t length) {
    return "POST " + target + " HTTP/1.1\r\nHost: test\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n";
}

// Writes `bytes` now; false when the server has closed the connection.
bool write_all(RawConnection& c, const std::string& bytes) {
    boost::system::error_code ec;
    boost::asio::write(c.socket(), boost::asio::buffer(bytes), ec);
    return !ec;
}

std::string chunk(const std::string& data) {
    std::ostringstream hex;
    hex << std::hex << data.size();
    return hex.str() + "\r\n" + data + "\r\n";
}

// {"source": "s", "jobs": [{}, {}, ...`n` of them, then text that is not JSON: a parser that
// builds the whole body before counting says "not valid JSON" instead of naming `jobs`.
std::string jobs_then_garbage(std::size_t n) {
    std::string body = "{\"source\": \"s\", \"jobs\": [";
    body.reserve(body.size() + 3 * n + 16);
    for (std::size_t i = 0; i < n; ++i) {
        body += i == 0 ? "{}" : ",{}";
    }
    return body + ", this is not JSON";
}

} // namespace

TEST_CASE("body budget: large bodies past the budget are told 503 before their body, small ones pass",
          "[security][net][body-budget]") {
    Budgeted b;
    constexpr std::size_t k_large = 300'000; // three fit in 1 MiB, a fourth does not
    std::vector<std::unique_ptr<RawConnection>> held;
    for (int i = 0; i < 3; ++i) {
        held.push_back(std::make_unique<RawConnection>(b.ioc, b.server->port()));
        held.back()->send(post_head("/echo", k_large) + "first bytes");
    }
    REQUIRE(test::eventually([&] { return b.reserved() == 3 * k_large; }, 5s));

    RawConnection fourth(b.ioc, b.server->port());
    fourth.send(post_head("/echo", k_large)); // its body is never sent: the answer comes from the header
    auto busy = fourth.read_response(3s);
    REQUIRE(busy);
    CHECK(busy->status == 503);
    CHECK(busy->headers.count("retry-after") == 1);
    CHECK(json::parse(busy->body)["error"] == "busy");
    CHECK_FALSE(busy->keep_alive);
    CHECK(fourth.closed_by_peer(3s));

    // Large bodies may fill seven eighths of the budget: 100 KB more does not fit, though 1 MiB is
    // not reached; a small body (64 KiB at most) still does, and one without a body never waits.
    RawConnection medium(b.ioc, b.server->port());
    medium.send(post_head("/echo", 100'000));
    auto refused = medium.read_response(3s);
    REQUIRE(refused);
    CHECK(refused->status == 503);
    RawConnection small(b.ioc, b.server->port());
    small.send(raw_request("POST", "/echo", std::string(60'000, 's')));
    auto r = small.read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == "{\"size\":60000}");
    small.send(raw_request("GET", "/ping"));
    auto ping = small.read_response(3s);
    REQUIRE(ping);
    CHECK(ping->status == 200);

    // One body finished and answered: its share comes back; the others' when their clients go.
    REQUIRE(write_all(*held[0], std::string(k_large - std::string("first bytes").size(), 'x')));
    auto done = held[0]->read_response(3s);
    REQUIRE(done);
    CHECK(done->status == 200);
    CHECK(done->body == "{\"size\":300000}");
    CHECK(test::eventually([&] { return b.reserved() == 2 * k_large; }, 3s));
    held[1]->close();
    held[2]->close();
    CHECK(test::eventually([&] { return b.reserved() == 0; }, 3s));
    CHECK(b.handled == 2);
}

TEST_CASE("body budget: a body that could never fit is refused 413, unread", "[security][net][body-budget]") {
    Budgeted b;
    RawConnection c(b.ioc, b.server->port());
    c.send(post_head("/echo", k_budget + 1));
    auto r = c.read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 413);
    CHECK(b.reserved() == 0);
}

TEST_CASE("body budget: a chunked body is counted as it grows and refused past the budget",
          "[security][net][body-budget]") {
    Budgeted b;
    RawConnection c(b.ioc, b.server->port());
    c.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n" +
           chunk(std::string(600'000, 'a')));
    REQUIRE(test::eventually([&] { return b.reserved() >= 600'000; }, 5s));
    CHECK(b.reserved() < 700'000); // about what it has, not what it might become
    (void)write_all(c, chunk(std::string(600'000, 'b')) + chunk(""));
    auto r = c.read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 503);
    CHECK(r->headers.count("retry-after") == 1);
    CHECK(test::eventually([&] { return b.reserved() == 0; }, 3s));
    CHECK(b.handled == 0);

    // Within the budget, a chunked body goes through and gives its share back.
    RawConnection ok(b.ioc, b.server->port());
    ok.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n" +
            chunk(std::string(400'000, 'c')) + chunk(std::string(400'000, 'd')) + chunk(""));
    auto r2 = ok.read_response(3s);
    REQUIRE(r2);
    CHECK(r2->status == 200);
    CHECK(r2->body == "{\"size\":800000}");
    CHECK(test::eventually([&] { return b.reserved() == 0; }, 3s));
}

TEST_CASE("body budget: shares come back when a handler throws and when the server stops",
          "[security][net][body-budget]") {
    net::ServerOptions o;
    o.stop_grace = 200ms; // a body still arriving is a request in flight: stop() waits this long for it
    Budgeted b(o);
    {
        RawConnection c(b.ioc, b.server->port());
        c.send(raw_request("POST", "/throw", std::string(500'000, 't')));
        auto r = c.read_response(3s);
        REQUIRE(r);
        CHECK(r->status == 500);
        CHECK(test::eventually([&] { return b.reserved() == 0; }, 3s));
    }
    RawConnection partial(b.ioc, b.server->port());
    partial.send(post_head("/echo", 500'000) + "some");
    REQUIRE(test::eventually([&] { return b.reserved() == 500'000; }, 5s));
    b.server->stop();
    CHECK(b.reserved() == 0);
}

TEST_CASE("body rate: a fast start followed by a trickle is cut off within about a window",
          "[security][net][body-budget]") {
    net::ServerOptions o;
    o.min_body_rate = 1000; // bytes per second
    o.body_grace = 300ms;
    o.body_rate_window = 1s;
    o.io_timeout = 10s; // each byte comes well within the stall timeout
    Budgeted b(o);
    RawConnection c(b.ioc, b.server->port());
    // 50 KB at once is 50 s of the minimum rate on average; then 10 bytes every 100 ms (100 B/s).
    c.send(post_head("/echo", 200'000) + std::string(50'000, 'f'));
    const auto t0 = std::chrono::steady_clock::now();
    bool closed = false;
    while (!closed && std::chrono::steady_clock::now() - t0 < 6s) {
        closed = !write_all(c, std::string(10, 'y'));
        std::this_thread::sleep_for(100ms);
    }
    closed = closed || c.closed_by_peer(1s);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(closed);
    // The grace, a window, and a slice of it for the bytes' bookkeeping, with room for a slow machine.
    CHECK(took < 3s);
    CHECK(b.handled == 0);
    CHECK(test::eventually([&] { return b.reserved() == 0; }, 3s));
}

TEST_CASE("body rate: a body that keeps the minimum rate over every window goes through",
          "[security][net][body-budget]") {
    net::ServerOptions o;
    o.min_body_rate = 1000;
    o.body_grace = 300ms;
    o.body_rate_window = 1s;
    Budgeted b(o);
    RawConnection c(b.ioc, b.server->port());
    constexpr std::size_t k_total = 6000; // 300 bytes every 100 ms: 3000 B/s for 2 s
    c.send(post_head("/echo", k_total));
    for (std::size_t sent = 0; sent < k_total; sent += 300) {
        REQUIRE(write_all(c, std::string(300, 'r')));
        std::this_thread::sleep_for(100ms);
    }
    auto r = c.read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 200);
}

TEST_CASE("connection cap: one address holds at most 64 connections by default", "[security][net][body-budget]") {
    CHECK(net::ServerOptions{}.max_connections_per_client == 64);
    CHECK(cmd::CoordinatorCmdOptions{}.max_connections_per_client == 64);
    CHECK(net::ServerOptions{}.max_body_memory == std::size_t{256} << 20);
    CHECK(net::ServerOptions{}.body_rate_window == 10s);
}

TEST_CASE("jobs cap: a body with more than 10,000 jobs is refused naming `jobs`, before it is built",
          "[security][service][body-budget]") {
    // The count is made while scanning: past the 10,000th item it stops, before the garbage at the end.
    const std::string over = jobs_then_garbage(10'001);
    auto refused = coordinator::parse_json_object(over, coordinator::k_max_json_depth, 10'000);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().field == "jobs");
    CHECK_THAT(refused.error().message, Catch::Contains("10000"));
    auto at_cap = coordinator::parse_json_object(jobs_then_garbage(10'000), coordinator::k_max_json_depth, 10'000);
    REQUIRE_FALSE(at_cap);
    CHECK(at_cap.error().field == "body"); // 10,000 are allowed: it reads on, to the garbage
    // Only the top-level "jobs" array counts; without a cap nothing does.
    CHECK(coordinator::parse_json_object(R"({"jobs": [1, 2], "other": {"jobs": [1, 2, 3]}, "x": [1, 2, 3]})",
                                         coordinator::k_max_json_depth, 2));
    CHECK_FALSE(
        coordinator::parse_json_object(R"({"jobs": [[1], {"a": [1, 2]}, 3]})", coordinator::k_max_json_depth, 2));
    CHECK(coordinator::parse_json_object(R"({"jobs": [[1], {"a": [1, 2]}]})", coordinator::k_max_json_depth, 2));

    Pool p;
    auto m = p.server.client(p.member);
    for (const char* path : {"/v1/jobs", "/v1/estimate", "/v1/jobs/wait"}) {
        INFO(path);
        auto r = m.request("POST", path, over);
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK(json::parse(r->body)["field"] == "jobs");
    }
}

TEST_CASE("coordinator: --max-body-memory bounds the bodies it holds", "[security][coordinator-cli][body-budget]") {
    test::TempDir dir;
    test::CoordinatorProcess coord(dir.path(), {"--max-body-memory", "1MiB"});
    boost::asio::io_context ioc;
    RawConnection c(ioc, coord.port());
    // An admin may submit: the token passes, then the body is larger than all the memory bodies may have.
    c.send("POST /v1/jobs HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer " + coord.admin() +
           "\r\nContent-Length: 2000000\r\n\r\n");
    auto r = c.read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 413);
    CHECK_THAT(r->body, Catch::Contains("memory"));

    cmd::GlobalOptions global;
    cmd::CoordinatorCmdOptions o;
    o.listen = "127.0.0.1:0";
    o.db = (dir.path() / "other.db").string();
    o.max_body_memory = "lots";
    CHECK(cmd::run_coordinator(global, o) == cmd::k_exit_usage);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "other.db"));
}

} // namespace test_body_budget
} // namespace
