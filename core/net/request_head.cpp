#include "core/net/request_head.hpp"

#include "core/net/url.hpp"
#include "core/util/strings.hpp"

#include <algorithm>

namespace gpupool::net::detail {

namespace http = boost::beast::http;

namespace {

bool is_sane_status(int status) {
    return status >= 200 && status <= 999;
}

} // namespace

bool is_parse_error(const boost::system::error_code& ec) {
    return ec.category() == http::make_error_code(http::error::bad_method).category() &&
           ec != http::error::end_of_stream && ec != http::error::partial_message;
}

bool fill_request_head(const http::request_header<>& msg, const Router::Match& match,
                       const boost::asio::ip::tcp::endpoint& remote, bool tls, Request& req) {
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    auto parts = split_target(req.target);
    auto path = percent_decode(parts.path);
    auto query = parse_query(parts.query);
    if (!path || !query) {
        return false;
    }
    req.path = std::move(*path);
    req.query = std::move(*query);
    req.route = match.pattern;
    req.path_params = match.params;
    for (const auto& field : msg) {
        req.headers.add(std::string(field.name_string()), std::string(field.value()));
    }
    req.remote_address = remote.address().to_string();
    req.remote_port = remote.port();
    req.tls = tls;
    return true;
}

Response unmatched_response(const http::request_header<>& msg, const Router::Match& match) {
    const std::string method(msg.method_string());
    auto parts = split_target(std::string_view(msg.target().data(), msg.target().size()));
    auto path = percent_decode(parts.path);
    if (!path) {
        return json_error(400, "bad_request", "malformed percent-encoding in the request target");
    }
    const std::string shown = util::escape_control(*path);
    if (match.kind == Router::Match::Kind::not_found) {
        return json_error(404, "not_found", "no endpoint " + method + " " + shown);
    }
    std::string allow;
    for (const auto& m : match.allowed) {
        allow += (allow.empty() ? "" : ", ") + m;
    }
    Response r = json_error(405, "method_not_allowed", method + " is not allowed on " + shown + " (allowed: " + allow + ")");
    r.headers.set("Allow", allow);
    return r;
}

BodyPace::BodyPace(const ServerOptions& options, Clock::time_point start)
    : m_window(std::max<Clock::duration>(options.body_rate_window, std::chrono::milliseconds(1))) {
    const auto window_ms = std::chrono::duration_cast<std::chrono::milliseconds>(m_window).count();
    m_rate = std::max<std::size_t>(options.min_body_rate, 1);
    m_need = std::max<std::uint64_t>(m_rate * static_cast<std::uint64_t>(window_ms) / 1000, 1);
    m_start = start;
    m_check_from = start + options.body_grace;
}

void BodyPace::add(Clock::time_point now, std::uint64_t bytes) {
    while (!m_slices.empty() && m_slices.front().last + m_window <= now) {
        m_slices.pop_front(); // out of the window for good
    }
    if (bytes == 0) {
        return;
    }
    if (!m_slices.empty() && now - m_slices.back().first < m_window / 10) {
        m_slices.back().last = now;
        m_slices.back().bytes += bytes;
        return;
    }
    m_slices.push_back({now, now, bytes});
}

BodyPace::Clock::time_point BodyPace::deadline(Clock::time_point now) const {
    Clock::time_point from = std::max(now, m_check_from);
    // Within the first window nothing has left it: the body so far must average the rate.
    if (const Clock::time_point full = m_start + m_window; from < full) {
        std::uint64_t total = 0;
        for (const auto& slice : m_slices) {
            total += slice.bytes;
        }
        const auto behind = m_start + std::chrono::milliseconds(total * 1000 / m_rate);
        if (behind < full) {
            return std::max(from, behind);
        }
        from = full;
    }
    // The window ending at t holds the slices whose last bytes came after t - window; as t grows
    // with nothing new, the oldest leave it one by one. The first t (from now, and from when
    // checking starts) at which what is left falls short of m_need is the deadline.
    std::uint64_t in_window = 0;
    for (const auto& slice : m_slices) {
        if (slice.last + m_window > from) {
            in_window += slice.bytes;
        }
    }
    if (in_window < m_need) {
        return from;
    }
    for (const auto& slice : m_slices) {
        if (slice.last + m_window <= from) {
            continue;
        }
        in_window -= slice.bytes;
        if (in_window < m_need) {
            return slice.last + m_window;
        }
    }
    return from; // not reached: the last slice leaving empties the window
}

void fill_beast_response(Response response, unsigned version, bool keep_alive,
                         http::response<http::string_body>& res) {
    int status = is_sane_status(response.status) ? response.status : 500;
    res.version(version);
    res.result(static_cast<unsigned>(status));
    res.set(http::field::server, "gpupool/" GPUPOOL_VERSION);
    for (const auto& [name, value] : response.headers) {
        if (iequals(name, "Content-Length") || iequals(name, "Transfer-Encoding") || iequals(name, "Connection")) {
            continue;
        }
        res.insert(name, value);
    }
    if (status != 204 && status != 304) {
        if (!response.content_type.empty()) {
            res.set(http::field::content_type, response.content_type);
        }
        res.body() = std::move(response.body);
    }
    res.keep_alive(keep_alive);
    res.prepare_payload();
}

} // namespace gpupool::net::detail
