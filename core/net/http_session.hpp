// One HTTP/1.1 connection of HttpServer (internal to core/net; http_server.hpp is the API).
//
// A session reads requests one at a time (header, then admission, then the body into memory or a
// spooled file), hands each to its route's handler and writes the answer, keeping the connection
// alive between requests; see http_server.hpp for the failure behaviour it implements. All its
// work runs on its own strand; the post_* methods of SessionBase may be called from any thread.
#pragma once

#include "core/net/server_core.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include <cstdint>
#include <memory>

namespace gpupool::net::detail {

// Whether this build has TLS sessions. The fuzz build (core/CMakeLists.txt) defines
// GPUPOOL_HTTP_PLAIN_ONLY: its fuzzer speaks plain HTTP, and the TLS session's instantiation was about
// three quarters of that build's costliest file (http_session.cpp: 227 CPU s with it, 60 without;
// bench/README.md, "Build times"). HttpServer::start then refuses a certificate rather than serve
// it as plain HTTP.
#ifdef GPUPOOL_HTTP_PLAIN_ONLY
inline constexpr bool k_tls_sessions = false;
#else
inline constexpr bool k_tls_sessions = true;
#endif

// A plain session, or a TLS one when `tls` is not null (the session keeps that context alive for as
// long as it lives, whatever context later connections get). Not started: call post_start() once it
// is registered with `core`.
std::shared_ptr<SessionBase> make_session(std::shared_ptr<Core> core, std::uint64_t id,
                                          boost::asio::ip::tcp::endpoint remote, boost::asio::ip::tcp::socket socket,
                                          std::shared_ptr<boost::asio::ssl::context> tls);

} // namespace gpupool::net::detail
