// HttpServer: gpupool's asynchronous HTTP/1.1 server (Boost.Beast on Asio, optional TLS via OpenSSL).
//
// It parses requests, routes them through a Router (router.hpp) and writes whatever Response the
// handlers give; it knows nothing about JSON beyond json_error(). A few io threads (ServerOptions::
// threads) serve every connection: an idle keep-alive connection or a pending long-poll costs a
// socket and a few KiB, never a thread. Handlers run on those io threads, so they must not block
// (nor spend long on the CPU: a handler with heavy work, such as parsing a large body, hands it to a
// thread of its own and answers from there); they answer through their Responder, from any thread,
// now or later (see http_types.hpp).
//
// Ownership: the server owns its router, its io threads and every connection. Responders hold only
// weak references: using one after the connection or the server is gone does nothing.
//
// Failure behaviour, per connection (the server keeps serving others):
//   - malformed request -> 400 JSON and close; header too large -> 431 and close;
//   - body over the route's limit -> 413 JSON and close (checked on Content-Length before reading);
//   - in-memory bodies are bounded all together (ServerOptions::max_body_memory): a body that would
//     take their total past it -> 503 "busy" with Retry-After and close, before its body is read
//     (a chunked body: as soon as it grows past it); one that could never fit -> 413;
//   - a route's admission (RouteOptions::admit) runs once the header is in and before the body is
//     read; a refusal is answered and the connection closed, the body never read;
//   - unknown path -> 404 and wrong method -> 405 without reading the body;
//   - a body slower than ServerOptions::min_body_rate over the last body_rate_window (once
//     body_grace has passed) -> the connection is closed;
//   - more than max_connections_per_client connections from one address: the new one is closed;
//   - more than max_file_bodies spooled uploads at once -> 503 "busy" with Retry-After;
//   - unknown path -> 404, wrong method -> 405 with Allow (the connection stays open when there
//     is no body);
//   - handler throws -> 500 JSON; handler drops its Responder -> 500 "no_response";
//   - a client slower than the timeouts is disconnected; TLS handshake failures close quietly.
// start() reports problems (bad address, port in use, unreadable certificate) as an Error.
//
// Certificate renewal: reload_tls() reads the two TLS files again (same paths) into a new context.
// Connections accepted afterwards use it; a connection already open keeps the context it started
// with (it holds a reference) and is not interrupted. A reload that fails (a file unreadable, not
// PEM, or a key that does not match its certificate) changes nothing: the old certificate is
// still served and the Error says why.
//
// Stopping: stop() (also run by the destructor) closes the listener, closes idle keep-alive
// connections, lets requests in flight finish for up to ServerOptions::stop_grace (answers written
// meanwhile carry "Connection: close"), then answers still-pending Responders with 503
// "shutting_down", closes the rest, and joins the io threads. It is idempotent and may be called
// from any thread that is not one of the server's io threads (e.g. a signal-waiting thread); it
// joins the io threads, so do not call it while holding a lock that handlers take.
// Thread safety: start/stop/reload_tls/port/running may be called from any thread.
#pragma once

#include "core/net/http_types.hpp"
#include "core/net/router.hpp"
#include "core/util/result.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gpupool::net {

// One request as the server answered it, for metrics: its method and the pattern of the route it
// matched ("" when none did: a 404, a 405, a request too malformed to route), the status sent and the
// time from its whole header being read to its response being ready (a long poll's wait included).
struct Exchange {
    std::string_view method;
    std::string_view route;
    int status = 0;
    std::chrono::nanoseconds duration{0};
};

struct ServerOptions {
    std::string host = "127.0.0.1"; // an IP address or a name to resolve; "0.0.0.0" / "::" for all
    std::uint16_t port = 0;          // 0: an ephemeral port, reported by port()
    std::size_t max_body_bytes = 8 * 1024 * 1024;
    std::size_t max_header_bytes = 16 * 1024;
    // A new connection's TLS handshake and first request header must arrive within this.
    std::chrono::milliseconds header_timeout{10'000};
    // Once a request has started, each read or write must make progress within this.
    std::chrono::milliseconds io_timeout{30'000};
    // And a body must arrive at this rate at least, measured over the last body_rate_window (over
    // all of it within its first window), from body_grace after its header on: a client that
    // trickles bytes cannot hold a connection (and its buffers) for ever, a fast start buys no more
    // than a window, and a large upload over a slow home line still gets through.
    std::size_t min_body_rate = 32 * 1024; // bytes per second
    std::chrono::milliseconds body_grace{30'000};
    std::chrono::milliseconds body_rate_window{10'000};
    // All request bodies held in memory at once (being received, or held by a Request not yet
    // dropped), together, by their Content-Length (a chunked body: by what it has grown to): more is
    // answered 503 "busy" with Retry-After before the body is read. Bodies over 64 KiB may take
    // seven eighths of it, so that they cannot crowd out small ones (a worker's heartbeat). Bodies
    // spooled to files (RouteOptions::body_to_file) are on disk and bounded by max_file_bodies.
    std::size_t max_body_memory = std::size_t{256} << 20;
    // A keep-alive connection may sit idle this long between requests.
    std::chrono::milliseconds idle_timeout{75'000};
    // stop(): how long requests in flight (including pending long-polls) may take to finish.
    std::chrono::milliseconds stop_grace{5'000};
    unsigned threads = 2;
    std::size_t max_connections = 10'000; // more are accepted and closed at once
    // Per remote address; 0 = no cap. Each connection may hold a body (and a few KiB of buffers):
    // workers behind one NAT share an address (each holds one or two connections).
    std::size_t max_connections_per_client = 64;
    // Bodies spooled to files (RouteOptions::body_to_file) being received or handled at once;
    // more are answered 503 before their body is read.
    std::size_t max_file_bodies = 4;
    // The parent of this server's own directory for spooled bodies (util::ClaimedDir: made at
    // start(), removed with the server; what servers killed mid-upload left there is removed at
    // start). Empty: util::default_spool_parent(), `<temporary directory>/gpupool-spool-<uid>`.
    std::filesystem::path spool_dir;
    // TLS: PEM files; both set = HTTPS only, both empty = plain HTTP.
    std::string tls_cert_file;
    std::string tls_key_file;
    // Called on an io thread as each response is about to be written (empty: nothing is called);
    // must be quick and must not throw.
    std::function<void(const Exchange&)> observe{};
    // Called on an io thread once a request's header has matched a route, before anything else is
    // done with it (admission, its body); a response it returns is sent instead, and a body that was
    // not read closes the connection after it. A standby coordinator answers with it. Must be quick
    // and must not throw; empty: every request goes on.
    std::function<std::optional<Response>(std::string_view method, std::string_view path)> gate{};
};

// Whether start() would accept these PEM files (readable, a certificate chain and its matching
// private key); the Error names the file and what is wrong. For checks made before a server runs.
Status check_tls_files(const std::string& cert_file, const std::string& key_file);

class HttpServer {
public:
    HttpServer(ServerOptions options, Router router);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds, listens and starts the io threads. Fails with ErrorCode::io (address in use, cannot
    // bind), ErrorCode::invalid_input (bad host, unusable TLS files, bad options) or
    // ErrorCode::conflict (already started). A stopped server cannot be started again.
    Status start();
    void stop();
    // Re-reads options().tls_cert_file and tls_key_file for new connections (see above). Fails with
    // ErrorCode::invalid_input (unusable files: the old certificate stays) or ErrorCode::conflict
    // (a plain HTTP server, or one that is not running).
    Status reload_tls();

    bool running() const;
    // The bound port (the ephemeral one when options.port was 0); 0 before start().
    std::uint16_t port() const;
    bool tls() const;
    const Router& router() const;
    const ServerOptions& options() const;
    // Connections open right now (for metrics and tests).
    std::size_t connection_count() const;
    // Bytes of max_body_memory reserved right now by the bodies in memory (for metrics and tests).
    std::size_t body_bytes_reserved() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace gpupool::net
