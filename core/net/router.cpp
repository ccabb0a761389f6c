#include "core/net/router.hpp"

#include "core/net/url.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace gpupool::net {

namespace {
std::vector<std::string_view> split_path(std::string_view path) {
    std::vector<std::string_view> parts;
    // path starts with '/': each '/' starts a segment.
    std::size_t pos = 1;
    while (true) {
        std::size_t slash = path.find('/', pos);
        parts.push_back(path.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos));
        if (slash == std::string_view::npos) {
            break;
        }
        pos = slash + 1;
    }
    return parts;
}

bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
}
} // namespace

Router& Router::add(std::string method, std::string pattern, Handler handler, RouteOptions options) {
    if (!is_token(method)) {
        throw std::invalid_argument("route method '" + method + "' is not an HTTP method token");
    }
    if (pattern.empty() || pattern.front() != '/' || pattern.find('?') != std::string::npos) {
        throw std::invalid_argument("route pattern '" + pattern + "' must be an absolute path without a query");
    }
    if (!handler) {
        throw std::invalid_argument("route " + method + " " + pattern + " has no handler");
    }
    Route route;
    std::set<std::string> names;
    for (std::string_view seg : split_path(pattern)) {
        Segment s;
        if (!seg.empty() && seg.front() == '{') {
            if (seg.size() < 3 || seg.back() != '}' || !is_token(seg.substr(1, seg.size() - 2))) {
                throw std::invalid_argument("route pattern '" + pattern + "': bad parameter segment '" +
                                            std::string(seg) + "' (want {name})");
            }
            s.param = true;
            s.text = std::string(seg.substr(1, seg.size() - 2));
            if (!names.insert(s.text).second) {
                throw std::invalid_argument("route pattern '" + pattern + "' repeats parameter {" + s.text + "}");
            }
        } else {
            if (seg.find_first_of("{}") != std::string_view::npos) {
                throw std::invalid_argument("route pattern '" + pattern + "': braces must enclose a whole segment");
            }
            auto decoded = percent_decode(seg);
            if (!decoded) {
                throw std::invalid_argument("route pattern '" + pattern + "' has a bad percent escape");
            }
            s.text = std::move(*decoded);
        }
        route.segments.push_back(std::move(s));
    }
    for (const Route& r : m_routes) {
        if (r.method != method || r.segments.size() != route.segments.size()) {
            continue;
        }
        bool same_shape = true;
        for (std::size_t i = 0; i < r.segments.size() && same_shape; ++i) {
            const Segment& a = r.segments[i];
            const Segment& b = route.segments[i];
            same_shape = a.param == b.param && (a.param || a.text == b.text);
        }
        if (same_shape) {
            throw std::invalid_argument("route " + method + " " + pattern + " duplicates " + r.method + " " +
                                        r.pattern);
        }
    }
    route.method = std::move(method);
    route.pattern = std::move(pattern);
    route.handler = std::move(handler);
    route.options = options;
    m_routes.push_back(std::move(route));
    return *this;
}

std::vector<RouteInfo> Router::routes() const {
    std::vector<RouteInfo> out;
    out.reserve(m_routes.size());
    for (const Route& r : m_routes) {
        out.push_back({r.method, r.pattern});
    }
    return out;
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
    Match result;
    if (path.empty() || path.front() != '/') {
        return result;
    }
    std::vector<std::string> segments;
    for (std::string_view raw : split_path(path)) {
        auto decoded = percent_decode(raw);
        if (!decoded) {
            return result;
        }
        segments.push_back(std::move(*decoded));
    }

    const Route* best = nullptr;
    std::vector<bool> best_shape;
    std::set<std::string> allowed;
    for (const Route& r : m_routes) {
        if (r.segments.size() != segments.size()) {
            continue;
        }
        std::vector<bool> shape; // true = literal
        bool ok = true;
        for (std::size_t i = 0; i < segments.size() && ok; ++i) {
            const Segment& s = r.segments[i];
            ok = s.param ? !segments[i].empty() : s.text == segments[i];
            shape.push_back(!s.param);
        }
        if (!ok) {
            continue;
        }
        allowed.insert(r.method);
        // Lexicographic on "literal first": literals beat parameters at the first difference.
        if (r.method == method && (best == nullptr || shape > best_shape)) {
            best = &r;
            best_shape = std::move(shape);
        }
    }
    if (best != nullptr) {
        result.kind = Match::Kind::found;
        result.handler = &best->handler;
        result.options = &best->options;
        result.pattern = best->pattern;
        for (std::size_t i = 0; i < segments.size(); ++i) {
            if (best->segments[i].param) {
                result.params[best->segments[i].text] = segments[i];
            }
        }
    } else if (!allowed.empty()) {
        result.kind = Match::Kind::method_not_allowed;
        result.allowed.assign(allowed.begin(), allowed.end());
    }
    return result;
}

} // namespace gpupool::net
