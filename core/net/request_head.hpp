// Between Boost.Beast's messages and the server's Request/Response values (internal to core/net).
//
// Pure functions over one request or response, used by the connection state machine
// (http_session.cpp): reading a parsed header into a Request, the answer to a request no route
// matches, the deadline a request body must keep up with, and writing a Response as Beast's.
// Thread-safe.
#pragma once

#include "core/net/http_server.hpp"
#include "core/net/http_types.hpp"
#include "core/net/router.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdint>

namespace gpupool::net::detail {

// A malformed request (as opposed to a closed, reset or timed-out connection).
bool is_parse_error(const boost::system::error_code& ec);

// The request line and headers as a Request (no body yet); false on bad percent-encoding.
bool fill_request_head(const boost::beast::http::request_header<>& msg, const Router::Match& match,
                       const boost::asio::ip::tcp::endpoint& remote, bool tls, Request& req);

// The answer to a request whose route did not match: 404, 405 with Allow, or 400 when the target's
// percent-encoding is malformed.
Response unmatched_response(const boost::beast::http::request_header<>& msg, const Router::Match& match);

// When a body that started at `start` and has `bytes` so far falls below the options' minimum
// rate (after body_grace): the connection is cut off then.
std::chrono::steady_clock::time_point body_deadline(const ServerOptions& options,
                                                    std::chrono::steady_clock::time_point start,
                                                    std::uint64_t bytes);

// `response` as Beast's, with our Server header; Content-Length, Transfer-Encoding and Connection
// are the server's own; 204 and 304 carry no body; a status outside 200..999 becomes 500.
void fill_beast_response(Response response, unsigned version, bool keep_alive,
                         boost::beast::http::response<boost::beast::http::string_body>& res);

} // namespace gpupool::net::detail
