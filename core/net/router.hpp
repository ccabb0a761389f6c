// Router: maps (method, path) to a Handler for HttpServer.
//
// Patterns are absolute paths whose segments are literals or whole-segment parameters:
// "/v1/jobs/{id}/logs". Matching compares percent-decoded segments; a parameter matches any one
// non-empty segment and its decoded value lands in Request::path_params. When several patterns match
// a path, the most specific wins (a literal beats a parameter at the first position where they
// differ), so "/v1/jobs/stats" can live next to "/v1/jobs/{id}". Trailing slashes are significant.
//
// Rules:
//   - routes() lists every (method, pattern) in registration order: the complete surface of the API,
//     used by the authorization-matrix test. It never changes once the server runs.
//   - A path no pattern matches is 404; a path some pattern matches with another method is 405,
//     with Allow listing the methods any matching pattern accepts.
//   - Each route may raise or lower the request body limit (uploads); otherwise the server's
//     ServerOptions::max_body_bytes applies.
//   - A route may admit or refuse a request from its request line and headers alone, before the
//     server reads a byte of its body (RouteOptions::admit: authentication, so that nobody without a
//     token can make the server hold a body), and may have its body spooled to a temporary file
//     instead of memory (RouteOptions::body_to_file: large uploads).
// Registering a malformed pattern or the same (method, pattern) twice is a programming error:
// add() throws std::invalid_argument. Thread safety: build it on one thread, then hand it to the
// server; lookups (const) are safe from any thread.
#pragma once

#include "core/net/http_types.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::net {

// Decides from the request line and headers (Request::body is still empty) whether the server may
// read the body. Called on an io thread; must call `decide` exactly once, from any thread, now or
// later: nullopt = read the body and run the handler; a Response = answer it and close the
// connection without reading the body. Dropping `decide` uncalled refuses the request (500).
using Decide = std::function<void(std::optional<Response>)>;
using Admission = std::function<void(const Request& head, Decide decide)>;

struct RouteOptions {
    RouteOptions() = default;
    explicit RouteOptions(std::size_t max_body) : max_body_bytes(max_body) {}

    std::optional<std::size_t> max_body_bytes; // overrides ServerOptions::max_body_bytes
    Admission admit;                           // empty: every request is read
    bool body_to_file = false;                 // spool the body to Request::body_file
};

struct RouteInfo {
    std::string method;
    std::string pattern;
    bool operator==(const RouteInfo&) const = default;
};

class Router {
public:
    // `method` is an HTTP method token ("GET", "POST", ...), compared case-sensitively.
    Router& add(std::string method, std::string pattern, Handler handler, RouteOptions options = {});

    std::vector<RouteInfo> routes() const;

    struct Match {
        enum class Kind { found, not_found, method_not_allowed };
        Kind kind = Kind::not_found;
        const Handler* handler = nullptr;  // for found
        const RouteOptions* options = nullptr;
        std::string pattern;
        std::map<std::string, std::string> params;
        std::vector<std::string> allowed; // for method_not_allowed (sorted, unique)
    };
    // `path` is the raw (still percent-encoded) path; a segment that does not decode matches
    // nothing.
    Match match(std::string_view method, std::string_view path) const;

private:
    struct Segment {
        std::string text;
        bool param = false;
    };
    struct Route {
        std::string method;
        std::string pattern;
        std::vector<Segment> segments;
        Handler handler;
        RouteOptions options;
    };
    std::vector<Route> m_routes;
};

} // namespace gpupool::net
