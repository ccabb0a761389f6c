// The one table between error codes and HTTP statuses, read both ways.
#include "core/net/http_types.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_http_status {

using namespace gpupool;

TEST_CASE("http status table: a client reads back the code the server answered with", "[net]") {
    for (ErrorCode code : {ErrorCode::invalid_input, ErrorCode::unauthorized, ErrorCode::forbidden,
                           ErrorCode::not_found, ErrorCode::conflict}) {
        INFO(to_string(code));
        const int status = net::http_status_for(code);
        CHECK(status >= 400);
        CHECK(status < 500);
        CHECK(net::error_code_for_status(status) == code);
    }
    // The server's own failures are 5xx, and a client treats every 5xx as worth a retry.
    CHECK(net::http_status_for(ErrorCode::internal) == 500);
    CHECK(net::http_status_for(ErrorCode::io) == 500);
    CHECK(net::http_status_for(ErrorCode::unavailable) == 503);
    CHECK(net::http_status_for(ErrorCode::not_implemented) == 501);
    for (int status : {500, 501, 502, 503, 504}) {
        CHECK(net::error_code_for_status(status) == ErrorCode::unavailable);
    }
    CHECK(net::error_code_for_status(413) == ErrorCode::invalid_input); // a body over the route's limit
    CHECK(net::error_code_for_status(418) == ErrorCode::internal);      // not ours to interpret
}

} // namespace test_http_status
} // namespace
