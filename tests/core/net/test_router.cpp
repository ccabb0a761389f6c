#include "core/net/router.hpp"
#include "core/net/url.hpp"
#include "tests/support.hpp"

#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_router {

using namespace gpupool::net;

namespace {
Handler noop() {
    return [](Request, Responder) {};
}
} // namespace

TEST_CASE("router: literal and parameter segments", "[net]") {
    Router r;
    r.add("GET", "/v1/jobs", noop());
    r.add("GET", "/v1/jobs/{id}", noop());
    r.add("DELETE", "/v1/jobs/{id}", noop());
    r.add("GET", "/v1/jobs/stats", noop());
    r.add("GET", "/v1/jobs/{id}/logs", noop());

    auto m = r.match("GET", "/v1/jobs/42/logs");
    REQUIRE(m.kind == Router::Match::Kind::found);
    CHECK(m.pattern == "/v1/jobs/{id}/logs");
    CHECK(m.params == std::map<std::string, std::string>{{"id", "42"}});

    // The literal beats the parameter.
    CHECK(r.match("GET", "/v1/jobs/stats").pattern == "/v1/jobs/stats");
    CHECK(r.match("GET", "/v1/jobs/7").pattern == "/v1/jobs/{id}");

    // Parameters are percent-decoded; an empty segment is no parameter; trailing slash matters.
    CHECK(r.match("GET", "/v1/jobs/a%20b").params.at("id") == "a b");
    CHECK(r.match("GET", "/v1/jobs//logs").kind == Router::Match::Kind::not_found);
    CHECK(r.match("GET", "/v1/jobs/").kind == Router::Match::Kind::not_found);
    CHECK(r.match("GET", "/v1/jobs/%zz").kind == Router::Match::Kind::not_found);
    CHECK(r.match("GET", "/nope").kind == Router::Match::Kind::not_found);
}

TEST_CASE("router: wrong method is 405 with every allowed method", "[net]") {
    Router r;
    r.add("GET", "/v1/jobs/{id}", noop());
    r.add("DELETE", "/v1/jobs/{id}", noop());
    r.add("POST", "/v1/jobs/stats", noop());
    auto m = r.match("PUT", "/v1/jobs/stats");
    REQUIRE(m.kind == Router::Match::Kind::method_not_allowed);
    CHECK(m.allowed == std::vector<std::string>{"DELETE", "GET", "POST"});
    // DELETE /v1/jobs/stats is served by the parameter route.
    CHECK(r.match("DELETE", "/v1/jobs/stats").pattern == "/v1/jobs/{id}");
}

TEST_CASE("router: routes() lists every route in registration order", "[net]") {
    Router r;
    r.add("POST", "/v1/jobs", noop());
    r.add("GET", "/v1/jobs/{id}", noop(), RouteOptions{1024});
    r.add("GET", "/metrics", noop());
    std::vector<RouteInfo> expected{{"POST", "/v1/jobs"}, {"GET", "/v1/jobs/{id}"}, {"GET", "/metrics"}};
    CHECK(r.routes() == expected);
    CHECK(r.match("GET", "/v1/jobs/1").options->max_body_bytes == 1024u);
}

TEST_CASE("router: malformed patterns and duplicates are programming errors", "[net]") {
    Router r;
    r.add("GET", "/v1/jobs/{id}", noop());
    CHECK_THROWS_AS(r.add("GET", "/v1/jobs/{job}", noop()), std::invalid_argument); // same shape
    CHECK_THROWS_AS(r.add("GET", "v1/jobs", noop()), std::invalid_argument);
    CHECK_THROWS_AS(r.add("GET", "/v1/{a}/{a}", noop()), std::invalid_argument);
    CHECK_THROWS_AS(r.add("GET", "/v1/x{id}", noop()), std::invalid_argument);
    CHECK_THROWS_AS(r.add("GET", "/v1/{}", noop()), std::invalid_argument);
    CHECK_THROWS_AS(r.add("G T", "/v1", noop()), std::invalid_argument);
    CHECK_THROWS_AS(r.add("GET", "/v1", Handler{}), std::invalid_argument);
    CHECK_NOTHROW(r.add("POST", "/v1/jobs/{job}", noop()));
}

TEST_CASE("url: percent decoding and query strings", "[net]") {
    CHECK(percent_decode("a%20b%2Fc") == std::optional<std::string>("a b/c"));
    CHECK(percent_decode("a+b") == std::optional<std::string>("a+b"));
    CHECK(percent_decode("a+b", true) == std::optional<std::string>("a b"));
    CHECK_FALSE(percent_decode("%4"));
    CHECK_FALSE(percent_decode("%"));
    CHECK_FALSE(percent_decode("%zz"));
    CHECK_FALSE(percent_decode("%00"));
    CHECK(percent_encode("job 1/ä~") == "job%201%2F%C3%A4~");
    CHECK(percent_decode(percent_encode("x?&=%+")) == std::optional<std::string>("x?&=%+"));

    auto q = parse_query("offset=10&follow&name=a%20b&offset=20&&x=1+2");
    REQUIRE(q);
    CHECK(*q == std::map<std::string, std::string>{{"offset", "20"}, {"follow", ""}, {"name", "a b"}, {"x", "1 2"}});
    CHECK_FALSE(parse_query("a=%zz"));
    CHECK(split_target("/a/b?c=d").path == "/a/b");
    CHECK(split_target("/a/b?c=d").query == "c=d");
    CHECK(split_target("/a").query.empty());
}

TEST_CASE("json_error: the API's error body", "[net]") {
    Response r = json_error(422, "invalid", "gpu must be \"positive\"", "resources.gpu");
    CHECK(r.status == 422);
    CHECK(r.content_type == "application/json");
    auto j = nlohmann::json::parse(r.body);
    CHECK(j["error"] == "invalid");
    CHECK(j["detail"] == "gpu must be \"positive\"");
    CHECK(j["field"] == "resources.gpu");
    CHECK_FALSE(nlohmann::json::parse(json_error(404, "not_found", "x").body).contains("field"));
}

TEST_CASE("headers: case-insensitive lookup", "[net]") {
    Headers h;
    h.add("Content-Type", "text/plain");
    h.add("X-A", "1");
    h.add("x-a", "2");
    CHECK(h.get("content-type") == "text/plain");
    CHECK(h.get("X-A") == "1");
    CHECK(h.get("missing", "fallback") == "fallback");
    h.set("X-a", "3");
    CHECK(h.get("x-A") == "3");
    CHECK(h.fields().size() == 2);
}

} // namespace test_router
} // namespace
