// HttpClient with several coordinator URLs: it goes past one that cannot be reached and past a
// standby (503 + Gpupool-Active), follows the standby's pointer only within its own list, and the
// server's gate answers before a body is read. Real servers on loopback.
#include "core/net/http_client.hpp"
#include "core/net/http_server.hpp"
#include "core/net/url.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_http_failover {

using namespace gpupool;
using namespace gpupool::net;

namespace {

ClientOptions to(const std::string& urls, const std::string& token = {}) {
    ClientOptions o;
    o.base_url = urls;
    o.token = token;
    return o;
}

std::string url_of(const HttpServer& s) { return "http://127.0.0.1:" + std::to_string(s.port()); }

// A server that says who it is, and counts what reached its handler.
struct Named {
    std::shared_ptr<std::atomic<int>> handled = std::make_shared<std::atomic<int>>(0);
    std::unique_ptr<HttpServer> server;
    explicit Named(const std::string& name, ServerOptions options = {}) {
        Router r;
        r.add("POST", "/v1/jobs", [name, handled = handled](Request, Responder respond) {
            ++*handled;
            respond(json_response(200, nlohmann::json{{"served_by", name}}.dump()));
        });
        server = std::make_unique<HttpServer>(std::move(options), std::move(r));
        REQUIRE(server->start());
    }
};

// A standby: every request answered by its gate, pointing at `active`.
ServerOptions standby_pointing_at(std::shared_ptr<std::string> active) {
    ServerOptions o;
    o.gate = [active](std::string_view, std::string_view) -> std::optional<Response> {
        Response r = json_response(503, nlohmann::json{{"error", "standby"}, {"active", *active}}.dump());
        if (!active->empty()) {
            r.headers.set("Gpupool-Active", *active);
        }
        return r;
    };
    return o;
}

std::string served_by(const Result<Response>& r) {
    REQUIRE(r.has_value());
    INFO(r->body);
    REQUIRE(r->status == 200);
    return nlohmann::json::parse(r->body).at("served_by").get<std::string>();
}

// A loopback port with nothing listening on it (a server started and stopped).
std::string dead_url() {
    Router r;
    HttpServer gone(ServerOptions{}, std::move(r));
    REQUIRE(gone.start());
    const std::string url = url_of(gone);
    gone.stop();
    return url;
}

} // namespace

TEST_CASE("url list: split, trimmed, and every URL must be http or https", "[net][failover]") {
    CHECK(split_url_list(" http://a:1/ , https://b:2,,") == std::vector<std::string>{"http://a:1", "https://b:2"});
    CHECK(is_http_url_list("http://a:1,https://b:2"));
    CHECK_FALSE(is_http_url_list("http://a:1,ftp://b"));
    CHECK_FALSE(is_http_url_list(" , "));
}

TEST_CASE("http client: a coordinator that cannot be reached is passed over, and the next one stays current",
          "[net][failover]") {
    Named active("active");
    const std::string dead = dead_url();
    HttpClient client(to(dead + "," + url_of(*active.server)));
    CHECK(client.current_url() == dead);
    CHECK(served_by(client.request("POST", "/v1/jobs", "{}")) == "active");
    CHECK(client.current_url() == url_of(*active.server));
    CHECK(served_by(client.request("POST", "/v1/jobs", "{}")) == "active");
    CHECK(*active.handled == 2);
}

TEST_CASE("http client: a standby's 503 sends the request to the active coordinator it names, once",
          "[net][failover]") {
    auto pointer = std::make_shared<std::string>();
    Named standby("standby", standby_pointing_at(pointer));
    Named other("other");
    Named active("active");
    *pointer = url_of(*active.server);
    // The active one is last in the list, the standby names it: straight there, past `other`.
    HttpClient client(to(url_of(*standby.server) + "," + url_of(*other.server) + "," + *pointer));
    CHECK(served_by(client.request("POST", "/v1/jobs", "{\"x\":1}")) == "active");
    CHECK(*standby.handled == 0); // the gate answered: its handler never ran
    CHECK(*other.handled == 0);
    CHECK(client.current_url() == *pointer);
}

TEST_CASE("http client: a standby naming a URL outside the list is not followed, the list is", "[net][failover]") {
    Named elsewhere("elsewhere");
    auto pointer = std::make_shared<std::string>(url_of(*elsewhere.server));
    Named standby("standby", standby_pointing_at(pointer));
    Named listed("listed");
    HttpClient client(to(url_of(*standby.server) + "," + url_of(*listed.server)));
    CHECK(served_by(client.request("POST", "/v1/jobs", "{}")) == "listed");
    CHECK(*elsewhere.handled == 0); // the token never went where the user did not send it
}

TEST_CASE("http client: when every coordinator stands by, the last answer is returned", "[net][failover]") {
    auto nobody = std::make_shared<std::string>();
    Named a("a", standby_pointing_at(nobody));
    Named b("b", standby_pointing_at(nobody));
    HttpClient client(to(url_of(*a.server) + "," + url_of(*b.server)));
    auto r = client.request("POST", "/v1/jobs", "{}");
    REQUIRE(r.has_value());
    CHECK(r->status == 503);
    CHECK(nlohmann::json::parse(r->body).at("error") == "standby");
    // One URL: a standby's answer is the caller's to see.
    HttpClient single(to(url_of(*a.server)));
    auto one = single.request("POST", "/v1/jobs", "{}");
    REQUIRE(one.has_value());
    CHECK(one->status == 503);
}

} // namespace test_http_failover
} // namespace
