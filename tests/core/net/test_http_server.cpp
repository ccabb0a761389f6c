// The HTTP server and client on loopback: real sockets, real threads, no mocks.
#include "core/net/http_client.hpp"
#include "core/net/http_server.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_http_server {

using namespace gpupool;
using namespace gpupool::net;
using gpupool::test::client_options;
using gpupool::test::eventually;
using gpupool::test::raw_request;
using gpupool::test::RawConnection;
using namespace std::chrono_literals;

namespace {

std::string base_url(const HttpServer& server) {
    return "http://127.0.0.1:" + std::to_string(server.port());
}

HttpClient client_for(const HttpServer& server) {
    return HttpClient(client_options(base_url(server), "", ""));
}

// Responders kept by long-poll handlers, answered later from a test thread.
struct Parked {
    std::mutex mutex;
    std::vector<Responder> responders;
    std::vector<std::shared_ptr<ClientLink>> links;

    Handler handler() {
        return [this](Request req, Responder respond) {
            std::lock_guard lock(mutex);
            responders.push_back(std::move(respond));
            links.push_back(req.client);
        };
    }
    std::size_t size() {
        std::lock_guard lock(mutex);
        return responders.size();
    }
    void answer_all(const std::string& prefix) {
        std::vector<Responder> all;
        {
            std::lock_guard lock(mutex);
            all.swap(responders);
        }
        for (std::size_t i = 0; i < all.size(); ++i) {
            all[i](json_response(200, "{\"n\":\"" + prefix + std::to_string(i) + "\"}"));
        }
    }
};

Handler echo_handler() {
    return [](Request req, Responder respond) {
        nlohmann::json j;
        j["method"] = req.method;
        j["path"] = req.path;
        j["route"] = req.route;
        j["params"] = req.path_params;
        j["query"] = req.query;
        j["body"] = req.body;
        j["auth"] = req.header("authorization");
        j["remote"] = req.remote_address;
        j["port"] = req.remote_port;
        j["tls"] = req.tls;
        respond(json_response(200, j.dump()));
    };
}

nlohmann::json body_json(const Result<Response>& r) {
    REQUIRE(r);
    return nlohmann::json::parse(r->body);
}

} // namespace

TEST_CASE("http: routing, path parameters, query, headers, token", "[net]") {
    Router router;
    router.add("GET", "/v1/jobs/{id}/logs", echo_handler());
    router.add("POST", "/v1/jobs", echo_handler());
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());
    REQUIRE(server.port() != 0);

    HttpClient client(client_options(base_url(server) + "/", "s3cret", ""));
    auto r = client.get("/v1/jobs/job%2042/logs?offset=10&follow");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->content_type == "application/json");
    CHECK(r->headers.get("server").rfind("gpupool/", 0) == 0);
    auto j = nlohmann::json::parse(r->body);
    CHECK(j["route"] == "/v1/jobs/{id}/logs");
    CHECK(j["path"] == "/v1/jobs/job 42/logs");
    CHECK(j["params"]["id"] == "job 42");
    CHECK(j["query"]["offset"] == "10");
    CHECK(j["query"]["follow"] == "");
    CHECK(j["auth"] == "Bearer s3cret");
    CHECK(j["remote"] == "127.0.0.1");
    CHECK(j["tls"] == false);

    auto p = client.post("/v1/jobs", R"({"recipe":"x"})");
    CHECK(body_json(p)["body"] == R"({"recipe":"x"})");
    CHECK(body_json(p)["method"] == "POST");
}

TEST_CASE("http: unknown path is 404, wrong method 405 with Allow, as JSON errors", "[net]") {
    Router router;
    router.add("GET", "/v1/jobs/{id}", echo_handler());
    router.add("DELETE", "/v1/jobs/{id}", echo_handler());
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());
    auto client = client_for(server);

    auto nf = client.get("/v1/nothing");
    REQUIRE(nf);
    CHECK(nf->status == 404);
    CHECK(nf->content_type == "application/json");
    CHECK(body_json(nf)["error"] == "not_found");
    CHECK(body_json(nf)["detail"].get<std::string>().find("/v1/nothing") != std::string::npos);

    auto na = client.post("/v1/jobs/3", "{}");
    REQUIRE(na);
    CHECK(na->status == 405);
    CHECK(na->headers.get("Allow") == "DELETE, GET");
    CHECK(body_json(na)["error"] == "method_not_allowed");

    // The connection survives both: the next request is served.
    CHECK(client.request("DELETE", "/v1/jobs/3")->status == 200);
}

TEST_CASE("http: keep-alive serves several requests on one connection", "[net]") {
    Router router;
    router.add("GET", "/echo", echo_handler());
    router.add("POST", "/echo", echo_handler());
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());

    // Raw: two requests, one after the other, then two pipelined, all on one socket.
    boost::asio::io_context ioc;
    RawConnection conn(ioc, server.port());
    conn.send(raw_request("GET", "/echo?n=1"));
    auto first = conn.read_response();
    REQUIRE(first);
    CHECK(first->keep_alive);
    conn.send(raw_request("POST", "/echo", "two"));
    auto second = conn.read_response();
    REQUIRE(second);
    CHECK(nlohmann::json::parse(second->body)["body"] == "two");
    conn.send(raw_request("POST", "/echo", "three") + raw_request("POST", "/echo", "four"));
    auto third = conn.read_response();
    auto fourth = conn.read_response();
    REQUIRE(third);
    REQUIRE(fourth);
    CHECK(nlohmann::json::parse(third->body)["body"] == "three");
    CHECK(nlohmann::json::parse(fourth->body)["body"] == "four");
    CHECK(server.connection_count() == 1);

    // The client reuses its connection: the server sees the same peer port.
    auto client = client_for(server);
    auto a = body_json(client.get("/echo"));
    auto b = body_json(client.get("/echo"));
    CHECK(a["port"] == b["port"]);

    // "Connection: close" is honoured.
    RawConnection once(ioc, server.port());
    once.send(raw_request("GET", "/echo", {}, "Connection: close\r\n"));
    auto last = once.read_response();
    REQUIRE(last);
    CHECK_FALSE(last->keep_alive);
    CHECK(once.closed_by_peer());
}

TEST_CASE("http: a body over the limit is 413 and the server keeps serving", "[net]") {
    Router router;
    router.add("POST", "/small", echo_handler());
    router.add("POST", "/upload", echo_handler(), RouteOptions{64 * 1024});
    ServerOptions options;
    options.max_body_bytes = 1024;
    HttpServer server(options, std::move(router));
    REQUIRE(server.start());
    auto client = client_for(server);

    auto big = client.post("/small", std::string(2048, 'x'));
    REQUIRE(big);
    CHECK(big->status == 413);
    CHECK(body_json(big)["error"] == "body_too_large");

    // Per-route limit: the upload route takes more, and the limit is exact.
    CHECK(client.post("/upload", std::string(10'000, 'y'))->status == 200);
    CHECK(client.post("/small", std::string(1024, 'z'))->status == 200);
    CHECK(client.post("/upload", std::string(64 * 1024 + 1, 'y'))->status == 413);

    // A chunked body is cut off as it grows.
    boost::asio::io_context ioc;
    RawConnection conn(ioc, server.port());
    std::string chunk(1000, 'c');
    conn.send("POST /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + chunk + "\r\n3e8\r\n" +
              chunk + "\r\n0\r\n\r\n");
    auto r = conn.read_response();
    REQUIRE(r);
    CHECK(r->status == 413);
    CHECK(conn.closed_by_peer());

    // Expect: 100-continue gets a 413 before the body is sent.
    RawConnection expect(ioc, server.port());
    expect.send("POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
    auto refused = expect.read_response();
    REQUIRE(refused);
    CHECK(refused->status == 413);

    CHECK(client.post("/small", "ok")->status == 200);
}

TEST_CASE("http: Expect 100-continue within the limit", "[net]") {
    Router router;
    router.add("POST", "/echo", echo_handler());
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());
    boost::asio::io_context ioc;
    RawConnection conn(ioc, server.port());
    conn.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    auto cont = conn.read_response();
    REQUIRE(cont);
    CHECK(cont->status == 100);
    conn.send("hello");
    auto r = conn.read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(nlohmann::json::parse(r->body)["body"] == "hello");
}

TEST_CASE("http: malformed requests are 400, the connection closes, the server keeps serving", "[net]") {
    Router router;
    router.add("GET", "/echo", echo_handler());
    ServerOptions options;
    options.max_header_bytes = 4096;
    HttpServer server(options, std::move(router));
    REQUIRE(server.start());
    boost::asio::io_context ioc;

    for (std::string garbage : {std::string("THIS IS NOT HTTP\r\n\r\n"), std::string("GET /echo HTTP/9.9\r\n\r\n"),
                                std::string("GET /echo HTTP/1.1\r\nBad Header\r\n\r\n"),
                                std::string("GET /echo HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
                                std::string("GET http://elsewhere/echo HTTP/1.1\r\nHost: t\r\n\r\n"),
                                std::string("GET /echo%zz HTTP/1.1\r\nHost: t\r\n\r\n")}) {
        CAPTURE(garbage);
        RawConnection conn(ioc, server.port());
        conn.send(garbage);
        auto r = conn.read_response();
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK(nlohmann::json::parse(r->body)["error"] == "bad_request");
        CHECK(conn.closed_by_peer());
    }

    RawConnection huge(ioc, server.port());
    huge.send("GET /echo HTTP/1.1\r\nX-Big: " + std::string(8000, 'h') + "\r\n\r\n");
    auto r = huge.read_response();
    REQUIRE(r);
    CHECK(r->status == 431);

    CHECK(client_for(server).get("/echo")->status == 200);
}

TEST_CASE("http: a long-poll is answered from another thread later", "[net]") {
    Parked parked;
    Router router;
    router.add("GET", "/v1/workers/{id}/assignments", parked.handler());
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());

    bool parked_in_time = false; // asserted after join: Catch is not thread-safe
    std::thread coordinator([&] {
        parked_in_time = eventually([&] { return parked.size() == 1; });
        std::this_thread::sleep_for(200ms);
        parked.answer_all("late");
    });
    auto client = client_for(server);
    auto start = std::chrono::steady_clock::now();
    auto r = client.get("/v1/workers/w1/assignments");
    auto waited = std::chrono::steady_clock::now() - start;
    coordinator.join();
    CHECK(parked_in_time);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(body_json(r)["n"] == "late0");
    CHECK(waited >= 200ms);
}

TEST_CASE("http: 300 idle long-polls on a 2-thread server are all answered", "[net]") {
    constexpr std::size_t k_clients = 300;
    Parked parked;
    Router router;
    router.add("GET", "/poll", parked.handler());
    ServerOptions options;
    options.threads = 2;
    options.max_connections_per_client = 0; // all 300 come from 127.0.0.1
    HttpServer server(options, std::move(router));
    REQUIRE(server.start());

    boost::asio::io_context ioc;
    std::vector<std::unique_ptr<RawConnection>> conns;
    for (std::size_t i = 0; i < k_clients; ++i) {
        conns.push_back(std::make_unique<RawConnection>(ioc, server.port()));
        conns.back()->send(raw_request("GET", "/poll"));
    }
    // Every request is parked at once while the server runs two threads.
    REQUIRE(eventually([&] { return parked.size() == k_clients; }));
    CHECK(server.connection_count() == k_clients);

    std::thread answerer([&] { parked.answer_all("a"); });
    answerer.join();

    // Read all answers concurrently on one io_context.
    namespace http = boost::beast::http;
    std::vector<http::response<http::string_body>> responses(k_clients);
    std::atomic<std::size_t> ok{0};
    for (std::size_t i = 0; i < k_clients; ++i) {
        http::async_read(conns[i]->socket(), conns[i]->buffer(), responses[i],
                         [&ok, &responses, i](const boost::system::error_code& ec, std::size_t) {
                             if (!ec && responses[i].result_int() == 200) {
                                 ok++;
                             }
                         });
    }
    ioc.restart();
    ioc.run_for(10s);
    CHECK(ok == k_clients);
    std::set<std::string> bodies;
    for (auto& r : responses) {
        bodies.insert(r.body());
    }
    CHECK(bodies.size() == k_clients);
}

TEST_CASE("http: a client that leaves while its Responder is pending", "[net]") {
    Parked parked;
    std::atomic<int> gone_calls{0};
    Router router;
    router.add("GET", "/poll", [&](Request req, Responder respond) {
        req.client->on_gone([&] { gone_calls++; });
        parked.handler()(std::move(req), std::move(respond));
    });
    router.add("GET", "/echo", echo_handler());
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());

    {
        boost::asio::io_context ioc;
        RawConnection conn(ioc, server.port());
        conn.send(raw_request("GET", "/poll"));
        REQUIRE(eventually([&] { return parked.size() == 1; }));
        conn.close();
    }
    // The handler learns it, the connection is released, and answering now is harmless.
    CHECK(eventually([&] { return gone_calls == 1; }));
    {
        std::lock_guard lock(parked.mutex);
        CHECK(parked.links.at(0)->gone());
    }
    CHECK(eventually([&] { return server.connection_count() == 0; }));
    parked.answer_all("too late");
    // A callback registered after the fact runs right away.
    bool late = false;
    parked.links.at(0)->on_gone([&] { late = true; });
    CHECK(late);
    CHECK(client_for(server).get("/echo")->status == 200);
}

TEST_CASE("http: a Responder is answered once, dropping it answers 500", "[net]") {
    Router router;
    router.add("GET", "/twice", [](Request, Responder respond) {
        respond(json_response(201, "{}"));
        respond(json_response(500, "{}"));
    });
    router.add("GET", "/dropped", [](Request, Responder) {});
    router.add("GET", "/throws", [](Request, Responder) -> void { throw std::runtime_error("boom"); });
    router.add("GET", "/empty", [](Request, Responder respond) {
        Response r;
        r.status = 204;
        r.body = "ignored";
        r.headers.add("X-Extra", "yes");
        respond(std::move(r));
    });
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());
    auto client = client_for(server);

    CHECK(client.get("/twice")->status == 201);
    auto dropped = client.get("/dropped");
    CHECK(dropped->status == 500);
    CHECK(body_json(dropped)["error"] == "no_response");
    auto thrown = client.get("/throws");
    CHECK(thrown->status == 500);
    CHECK(body_json(thrown)["detail"].get<std::string>().find("boom") != std::string::npos);
    auto empty = client.get("/empty");
    CHECK(empty->status == 204);
    CHECK(empty->body.empty());
    CHECK(empty->headers.get("x-extra") == "yes");
}

TEST_CASE("http: stop lets requests in flight finish, then answers pending ones 503", "[net]") {
    Parked parked;
    Router router;
    router.add("GET", "/poll", parked.handler());
    router.add("GET", "/slow", [](Request, Responder respond) {
        std::thread([respond = std::move(respond)] {
            std::this_thread::sleep_for(300ms);
            respond(json_response(200, R"({"slow":true})"));
        }).detach();
    });
    ServerOptions options;
    options.stop_grace = 1000ms;
    HttpServer server(options, std::move(router));
    REQUIRE(server.start());
    std::uint16_t port = server.port();

    boost::asio::io_context ioc;
    RawConnection idle(ioc, port); // an idle keep-alive connection: closed at once
    idle.send(raw_request("GET", "/slow"));
    REQUIRE(idle.read_response());

    auto slow = std::async(std::launch::async, [&] { return client_for(server).get("/slow"); });
    auto poll = std::async(std::launch::async, [&] { return client_for(server).get("/poll"); });
    REQUIRE(eventually([&] { return parked.size() == 1 && server.connection_count() == 3; }));

    auto start = std::chrono::steady_clock::now();
    server.stop();
    auto took = std::chrono::steady_clock::now() - start;
    CHECK_FALSE(server.running());

    auto s = slow.get();
    REQUIRE(s);
    CHECK(s->status == 200);
    CHECK(s->headers.get("connection") == "close");
    auto p = poll.get();
    REQUIRE(p);
    CHECK(p->status == 503);
    CHECK(body_json(p)["error"] == "shutting_down");
    CHECK(took >= 900ms);
    CHECK(took < 3s);
    CHECK(idle.closed_by_peer(1s));

    // Answering after stop is harmless; new connections are refused; stop is idempotent.
    parked.answer_all("after");
    server.stop();
    auto refused = HttpClient(client_options("http://127.0.0.1:" + std::to_string(port), "", "")).get("/poll");
    CHECK_FALSE(refused);
}

TEST_CASE("http: stop is quick when nothing is pending, and the destructor stops", "[net]") {
    Router router;
    router.add("GET", "/echo", echo_handler());
    Parked parked;
    router.add("GET", "/keep", parked.handler());
    auto server = std::make_unique<HttpServer>(ServerOptions{}, std::move(router));
    REQUIRE(server->start());
    auto idle_client = client_for(*server);
    CHECK(idle_client.get("/echo")->status == 200); // leaves an idle keep-alive connection
    CHECK(server->connection_count() == 1);
    auto start = std::chrono::steady_clock::now();
    server->stop();
    CHECK(std::chrono::steady_clock::now() - start < 500ms);

    ServerOptions quick;
    quick.stop_grace = 200ms;
    auto second = std::make_unique<HttpServer>(quick, Router(server->router()));
    REQUIRE(second->start());
    auto keep = std::async(std::launch::async, [&] { return client_for(*second).get("/keep"); });
    REQUIRE(eventually([&] { return second->connection_count() == 1; }));
    REQUIRE(eventually([&] { return parked.size() == 1; }));
    second.reset(); // destructor: stops (answers 503), joins
    CHECK(keep.get()->status == 503);
    parked.answer_all("gone"); // the server is gone: nothing happens
}

TEST_CASE("http: idle and stalled connections time out", "[net]") {
    Router router;
    router.add("GET", "/echo", echo_handler());
    router.add("POST", "/echo", echo_handler());
    ServerOptions options;
    options.idle_timeout = 200ms;
    options.header_timeout = 200ms;
    options.io_timeout = 200ms;
    HttpServer server(options, std::move(router));
    REQUIRE(server.start());
    boost::asio::io_context ioc;

    RawConnection idle(ioc, server.port());
    idle.send(raw_request("GET", "/echo"));
    REQUIRE(idle.read_response());
    CHECK(idle.closed_by_peer(2s));

    RawConnection half_header(ioc, server.port());
    half_header.send("GET /echo HTTP/1.1\r\nHost: t\r\n");
    CHECK(half_header.closed_by_peer(2s));

    RawConnection half_body(ioc, server.port());
    half_body.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12345");
    CHECK(half_body.closed_by_peer(2s));

    RawConnection silent(ioc, server.port());
    CHECK(silent.closed_by_peer(2s));

    CHECK(eventually([&] { return server.connection_count() == 0; }));
    CHECK(client_for(server).get("/echo")->status == 200);
}

TEST_CASE("http: start reports a port in use and bad options", "[net]") {
    Router router;
    router.add("GET", "/echo", echo_handler());
    HttpServer first(ServerOptions{}, router);
    REQUIRE(first.start());
    CHECK(first.start().error().code == ErrorCode::conflict);

    ServerOptions same;
    same.port = first.port();
    HttpServer second(same, router);
    auto s = second.start();
    REQUIRE_FALSE(s);
    CHECK(s.error().code == ErrorCode::io);
    CHECK(s.error().message.find("could not listen on 127.0.0.1:" + std::to_string(first.port())) !=
          std::string::npos);
    CHECK(s.error().message.find("in use") != std::string::npos);

    ServerOptions bad_host;
    bad_host.host = "no-such-host.invalid";
    CHECK(HttpServer(bad_host, router).start().error().code == ErrorCode::invalid_input);

    ServerOptions half_tls;
    half_tls.tls_cert_file = "/nonexistent/cert.pem";
    CHECK(HttpServer(half_tls, router).start().error().code == ErrorCode::invalid_input);
}

TEST_CASE("http client: unreachable servers are clear errors", "[net]") {
    std::uint16_t port = 0;
    {
        Router router;
        router.add("GET", "/echo", echo_handler());
        HttpServer server(ServerOptions{}, std::move(router));
        REQUIRE(server.start());
        port = server.port();
    }
    std::string url = "http://127.0.0.1:" + std::to_string(port);
    HttpClient client(client_options(url, "", ""));
    auto r = client.get("/v1/jobs");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::unavailable);
    CHECK(r.error().message.find(url + "/v1/jobs") != std::string::npos);

    auto dns = HttpClient(client_options("http://no-such-host.invalid:1", "", "")).get("/x");
    REQUIRE_FALSE(dns);
    CHECK(dns.error().code == ErrorCode::unavailable);
    CHECK(dns.error().message.find("no-such-host.invalid") != std::string::npos);

    CHECK(HttpClient(ClientOptions()).get("/x").error().code == ErrorCode::invalid_input);
    CHECK(HttpClient(client_options(url, "a\nb", "")).get("/x").error().code ==
          ErrorCode::invalid_input);
}

TEST_CASE("http client: a request that outlives its timeout is unavailable", "[net]") {
    Parked parked;
    Router router;
    router.add("GET", "/poll", parked.handler());
    HttpServer server(ServerOptions{}, std::move(router));
    REQUIRE(server.start());
    auto client = client_for(server);
    auto r = client.request("GET", "/poll", {}, {}, 150ms);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::unavailable);
    CHECK(r.error().message.find("150 ms") != std::string::npos);
}

} // namespace test_http_server
} // namespace
