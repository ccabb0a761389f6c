// A new worker against a coordinator that predates the batch routes (POST /v1/attempts/start and
// /v1/attempts/complete): a real HTTP server on loopback that knows only the single routes. The
// worker's link falls back to one request per attempt, in order, and keeps each answer.
#include "core/net/http_server.hpp"
#include "worker/agent/coordinator_link.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <mutex>
#include <string>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_old_coordinator {

using namespace gpupool;

namespace {

// The single routes only; attempt 2 is no longer current (409), as an old coordinator answers.
struct OldCoordinator {
    std::mutex mu;
    std::vector<std::string> seen; // "start 1", "complete 3", in arrival order

    net::Handler single(const std::string& what) {
        return [this, what](net::Request req, net::Responder respond) {
            const std::string id = req.param("id");
            {
                std::lock_guard lock(mu);
                seen.push_back(what + " " + id);
            }
            if (id == "2") {
                respond(net::json_response(409, R"({"error":"conflict","message":"attempt 2 is not current","field":""})"));
                return;
            }
            respond(net::json_response(200, nlohmann::json{{"attempt", std::stoll(id)}}.dump()));
        };
    }
    std::vector<std::string> calls() {
        std::lock_guard lock(mu);
        return seen;
    }
};

} // namespace

TEST_CASE("worker link: a coordinator without the batch routes gets starts and ends one by one", "[agent][wire]") {
    OldCoordinator old;
    net::Router router;
    router.add("POST", "/v1/attempts/{id}/start", old.single("start"));
    router.add("POST", "/v1/attempts/{id}/complete", old.single("complete"));
    net::HttpServer server(net::ServerOptions{}, std::move(router));
    REQUIRE(server.start());
    worker::HttpCoordinatorLink link("http://127.0.0.1:" + std::to_string(server.port()), "worker-token", "");

    auto started = link.start_many({AttemptId(1), AttemptId(2), AttemptId(3)});
    REQUIRE(started.has_value());
    REQUIRE(started->size() == 3);
    CHECK((*started)[0].attempt == AttemptId(1));
    CHECK_FALSE((*started)[0].error);
    REQUIRE((*started)[1].error);
    CHECK((*started)[1].error->code == ErrorCode::conflict); // fenced, as the single route said
    CHECK_FALSE((*started)[2].error);
    CHECK(old.calls() == std::vector<std::string>{"start 1", "start 2", "start 3"});

    const std::vector<api::AttemptEnd> ends{{AttemptId(3), {0, "", api::Outcome::exited}},
                                            {AttemptId(1), {1, "", api::Outcome::exited}}};
    auto ended = link.complete_many(ends);
    REQUIRE(ended.has_value());
    REQUIRE(ended->size() == 2);
    CHECK_FALSE((*ended)[0].error);
    CHECK_FALSE((*ended)[1].error);
    // Later batches go one by one too: nothing but single routes arrive, in order.
    auto again = link.start_many({AttemptId(4)});
    REQUIRE(again.has_value());
    CHECK_FALSE((*again)[0].error);
    CHECK(old.calls() == std::vector<std::string>{"start 1", "start 2", "start 3", "complete 3", "complete 1", "start 4"});
    server.stop();
}

} // namespace test_old_coordinator
} // namespace
