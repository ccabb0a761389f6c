// Between Boost.Beast's messages and the server's Request/Response values (internal to core/net).
//
// Pure functions over one request or response, used by the connection state machine
// (http_session.cpp): reading a parsed header into a Request, the answer to a request no route
// matches, the pace a request body must keep up (BodyPace), and writing a Response as Beast's.
// The functions are thread-safe; a BodyPace belongs to one session.
#pragma once

#include "core/net/http_server.hpp"
#include "core/net/http_types.hpp"
#include "core/net/router.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdint>
#include <deque>

namespace gpupool::net::detail {

// A malformed request (as opposed to a closed, reset or timed-out connection).
bool is_parse_error(const boost::system::error_code& ec);

// The request line and headers as a Request (no body yet); false on bad percent-encoding.
bool fill_request_head(const boost::beast::http::request_header<>& msg, const Router::Match& match,
                       const boost::asio::ip::tcp::endpoint& remote, bool tls, Request& req);

// The answer to a request whose route did not match: 404, 405 with Allow, or 400 when the target's
// percent-encoding is malformed.
Response unmatched_response(const boost::beast::http::request_header<>& msg, const Router::Match& match);

// The pace a request body must keep (ServerOptions::min_body_rate, body_grace, body_rate_window):
// from body_grace after its header on, the bytes that arrived in the last window must be at least
// min_body_rate x window (within the body's first window, the bytes so far must average the rate
// since it began). A fast start buys a window at most, never an average for ever. The bytes are
// kept in slices of a tenth of a window, at most eleven of them, whatever the client sends. One
// body's, used from one thread.
class BodyPace {
public:
    using Clock = std::chrono::steady_clock;

    BodyPace() = default;
    BodyPace(const ServerOptions& options, Clock::time_point start);
    void add(Clock::time_point now, std::uint64_t bytes);
    // When the body falls behind if nothing more arrives (now or earlier: it is behind already):
    // the connection is cut off then.
    Clock::time_point deadline(Clock::time_point now) const;

private:
    struct Slice {
        Clock::time_point first; // its first bytes: a slice spans a tenth of a window from here
        Clock::time_point last;  // its last bytes, which leave the window one window later
        std::uint64_t bytes = 0;
    };
    Clock::duration m_window{};
    Clock::time_point m_start{};
    Clock::time_point m_check_from{};
    std::uint64_t m_rate = 1; // bytes per second
    std::uint64_t m_need = 1; // bytes per window
    std::deque<Slice> m_slices;
};

// `response` as Beast's, with our Server header; Content-Length, Transfer-Encoding and Connection
// are the server's own; 204 and 304 carry no body; a status outside 200..999 becomes 500.
void fill_beast_response(Response response, unsigned version, bool keep_alive,
                         boost::beast::http::response<boost::beast::http::string_body>& res);

} // namespace gpupool::net::detail
