// net::listen_host and net::is_loopback_host: what --metrics-listen (the coordinator and its
// installer) accepts for a listener that serves without a token.
#include "core/net/loopback.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_loopback {

using gpupool::net::is_loopback_host;
using gpupool::net::listen_host;

TEST_CASE("listen_host takes the host of HOST:PORT, brackets off an IPv6 literal", "[net][loopback]") {
    CHECK(listen_host("127.0.0.1:9464") == "127.0.0.1");
    CHECK(listen_host("[::1]:9464") == "::1");
    CHECK(listen_host("localhost:0") == "localhost");
    CHECK(listen_host("::1") == ":"); // an unbracketed IPv6 literal has no port to take off
    CHECK(listen_host("9464").empty());
}

TEST_CASE("only loopback hosts count as loopback", "[net][loopback]") {
    for (const char* yes : {"127.0.0.1", "127.8.9.10", "::1", "localhost"}) {
        INFO(yes);
        CHECK(is_loopback_host(yes));
    }
    for (const char* no : {"0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.org", "localhost.example.org",
                           "127.0.0.1.example.org", "", "[::1]"}) {
        INFO(no);
        CHECK_FALSE(is_loopback_host(no));
    }
}

} // namespace test_loopback
} // namespace
