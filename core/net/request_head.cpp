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

std::chrono::steady_clock::time_point body_deadline(const ServerOptions& options,
                                                    std::chrono::steady_clock::time_point start,
                                                    std::uint64_t bytes) {
    const auto rate = std::max<std::size_t>(options.min_body_rate, 1);
    return start + options.body_grace + std::chrono::milliseconds(bytes * 1000 / rate);
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
