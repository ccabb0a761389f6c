// The coordinator process and its open-files limit: started from a shell whose soft limit is low,
// it raises its own to the hard one and serves more connections at once than the low limit held.
#include "tests/cli/processes.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <memory>
#include <sys/resource.h>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_coordinator_connections {

using namespace gpupool;

TEST_CASE("coordinator process: raises its open-files limit and holds more connections than the limit it was "
          "started with",
          "[coordinator-cli][open-files]") {
    constexpr rlim_t k_started_with = 256;
    constexpr std::size_t k_connections = 600; // each kept open after its answer, as workers' connections are
    rlimit saved{};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    if (saved.rlim_max == RLIM_INFINITY || saved.rlim_cur < k_connections + 256 ||
        saved.rlim_max < k_connections + 256) {
        SUCCEED("the limit on open files is too low for this test (it holds the connections' other ends)");
        return;
    }
    test::TempDir dir;
    // The child inherits the low soft limit, as from a login shell's `ulimit -Sn`.
    rlimit low = saved;
    low.rlim_cur = k_started_with;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    auto coord = std::make_unique<test::CoordinatorProcess>(
        dir.path(), std::vector<std::string>{"--max-connections-per-client", "0"});
    REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
    CHECK_THAT(coord->stderr_text(),
               Catch::Contains("open files: at most " + std::to_string(saved.rlim_max) + " (soft limit was 256"));

    // All open at once, each with a request sent, before any answer is read: past its old limit the
    // coordinator could accept no more, and the rest would wait unanswered in the listen backlog.
    boost::asio::io_context ioc;
    std::vector<std::unique_ptr<test::RawConnection>> conns;
    for (std::size_t i = 0; i < k_connections; ++i) {
        conns.push_back(std::make_unique<test::RawConnection>(ioc, coord->port()));
        conns.back()->send(test::raw_request("GET", "/v1/health"));
    }
    for (std::size_t i = 0; i < conns.size(); ++i) {
        INFO("connection " << i);
        auto r = conns[i]->read_response(std::chrono::seconds(5));
        REQUIRE(r);
        CHECK(r->status == 200);
    }
}

} // namespace test_coordinator_connections
} // namespace
