// HttpClient: how gpupool's CLI and workers talk to the coordinator (libcurl underneath).
//
// One client holds one libcurl handle and so one connection cache: consecutive requests to the same
// server reuse the connection (keep-alive). It sends "Authorization: Bearer <token>" when a token is
// set, and verifies TLS certificates against the system CAs, or against ClientOptions::ca_cert
// alone when that is set (a pool with a self-signed certificate). It never follows redirects.
//
// Failure behaviour: request() returns an Error only when no HTTP response came back:
//   - refused connection, unknown host, timeout, connection dropped -> ErrorCode::unavailable, with
//     the URL in the message;
//   - a TLS certificate that cannot be verified, or a CA file that cannot be used ->
//     ErrorCode::invalid_input with field `ca_cert` and a message starting "TLS verification
//     failed for URL: <libcurl's detail>; check --ca-cert / ca_cert" (is_tls_verification_failure()).
//     Not retryable: workers and commands stop on it instead of treating the pool as unreachable;
//   - a malformed base URL or header -> ErrorCode::invalid_input; anything else -> ErrorCode::io.
// Every HTTP status, 4xx and 5xx included, is a successful Result: callers map statuses themselves.
//
// Several coordinators (an active one and standbys on one PostgreSQL store): base_url may list
// several URLs separated by commas. Requests go to the one that answered last. A request that
// could not reach it (refused connection, unknown host, failed TLS handshake: nothing was sent) or
// that a standby answered (503 with a `Gpupool-Active` header or the error "standby": nothing was
// done) goes to the next URL, or straight to the active one the standby names when that one is in
// the list (never to a URL that is not: the token is only ever sent where the user said), each at
// most once per request. The last answer or error is returned when none serves.
//
// Thread safety: none. Use one client per thread (they are cheap); moving a client is fine.
// libcurl's global initialisation happens once, thread-safely, the first time any client is made.
#pragma once

#include "core/net/http_types.hpp"
#include "core/util/result.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::net {

inline constexpr std::string_view k_tls_failure = "TLS verification failed";
inline constexpr std::string_view k_tls_field = "ca_cert";

// True for the Error request() returns when TLS verification failed (see the header comment).
bool is_tls_verification_failure(const Error& e);

struct ClientOptions {
    std::string base_url;  // "https://pool.example.org:8443" (a path prefix is allowed), or several, comma-separated
    std::string token;     // bearer token; empty: no Authorization header
    std::string ca_cert;   // PEM file with the CA (or self-signed certificate) to trust instead of the system's
    std::chrono::milliseconds timeout{30'000};          // whole request; long-polls pass their own
    std::chrono::milliseconds connect_timeout{10'000};
    // A body kept in memory longer than this ends the transfer with an invalid_input Error naming
    // the URL (a small file from a server nobody vouches for). 0: no limit.
    std::int64_t max_body_bytes = 0;
    // Redirects libcurl follows (http and https only); 0: none, a 3xx is the answer. When it follows
    // them, the token goes by libcurl's own rule: to the first URL's scheme, host and port only.
    int max_redirects = 0;
    // Who answers there, as a failed connection's hint names it ("is the coordinator running and reachable?").
    std::string server_name = "the coordinator";
};

class HttpClient {
public:
    explicit HttpClient(ClientOptions options);
    ~HttpClient();
    HttpClient(HttpClient&&) noexcept;
    HttpClient& operator=(HttpClient&&) noexcept;
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // `path` is appended to base_url ("/v1/jobs?state=queued"). `timeout` overrides
    // ClientOptions::timeout for this request (e.g. a long-poll). The Response carries the status,
    // Content-Type, body and every response header.
    Result<Response> request(std::string_view method, std::string_view path, std::string_view body = {},
                             const Headers& headers = {}, std::optional<std::chrono::milliseconds> timeout = {});

    // As request(), but a 2xx answer's body is written to the new file `to` (0600; refused if it exists)
    // as it arrives, never whole in memory; Response::body is then empty. Any other answer's body
    // is in Response::body as usual (and `to` is left empty: the caller removes it).
    Result<Response> download(std::string_view method, std::string_view path, const std::filesystem::path& to,
                              std::string_view body = {}, std::optional<std::chrono::milliseconds> timeout = {});
    Result<Response> get(std::string_view path) { return request("GET", path); }
    Result<Response> post(std::string_view path, std::string_view body) { return request("POST", path, body); }

    const ClientOptions& options() const { return m_options; }
    // The coordinator URL requests go to now (the first of base_url's until another answered).
    const std::string& current_url() const;

private:
    struct Handle;
    // One request to each URL in turn, as the header comment says, until one serves it.
    Result<Response> send(std::string_view method, std::string_view path, std::string_view body,
                          const Headers& headers, std::optional<std::chrono::milliseconds> timeout,
                          std::FILE* body_file);
    // One request to the current URL; sets `unsent` (the caller's false) when it failed before it was sent.
    Result<Response> perform(std::string_view method, std::string_view path, std::string_view body,
                             const Headers& headers, std::optional<std::chrono::milliseconds> timeout,
                             std::FILE* body_file, bool& unsent);
    ClientOptions m_options;
    std::vector<std::string> m_urls; // base_url's, each without a trailing '/'
    std::size_t m_current = 0;
    std::unique_ptr<Handle> m_handle;
};

} // namespace gpupool::net
