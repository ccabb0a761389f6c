#include "core/client/api_client.hpp"

namespace gpupool::client {

using json = nlohmann::json;

namespace {
net::ClientOptions options_of(const config::ClientConfig& c) {
    net::ClientOptions o;
    o.base_url = c.url;
    o.token = c.token;
    o.ca_cert = c.ca_cert;
    return o;
}
} // namespace

ApiClient::ApiClient(const config::ClientConfig& config) : m_config(config), m_http(options_of(config)) {}

Error ApiClient::http_error(const net::Response& r, std::string_view method, std::string_view path) const {
    json body = json::parse(r.body, nullptr, false);
    std::string detail = body.is_object() ? body.value("detail", std::string()) : std::string();
    std::string field = body.is_object() ? body.value("field", std::string()) : std::string();
    if (detail.empty()) {
        detail = r.body.substr(0, 200);
    }
    std::string where = std::string(method) + " " + m_config.url + std::string(path);
    switch (r.status) {
    case 401:
        return make_error(ErrorCode::unauthorized,
                          "the coordinator at " + m_config.url + " (URL from " + m_config.url_source + ") refused " +
                              (m_config.token.empty() ? std::string("the request: no token was given")
                                                      : "the token from " + m_config.token_source) +
                              " (" + detail +
                              "); give a token with --token-file FILE, GPUPOOL_TOKEN or `token` in "
                              "~/.config/gpupool/config.toml, and the pool's URL with --url, GPUPOOL_URL or `url` there");
    case 403: return make_error(ErrorCode::forbidden, "not allowed: " + detail);
    case 400:
    case 404:
    case 409:
    case 413: return make_error(net::error_code_for_status(r.status), detail, field);
    default:
        return make_error(net::error_code_for_status(r.status),
                          where + " answered " + std::to_string(r.status) + ": " + detail, field);
    }
}

Result<net::Response> ApiClient::send(std::string_view method, std::string_view path, std::string_view body) {
    net::Headers headers;
    if (!body.empty()) {
        headers.set("Content-Type", "application/json");
    }
    return checked(m_http.request(method, path, body, headers), method, path);
}

Result<net::Response> ApiClient::checked(Result<net::Response> r, std::string_view method,
                                         std::string_view path) const {
    if (!r) {
        Error e = r.error();
        if (e.message.find(m_config.url) == std::string::npos) {
            e.message += " (coordinator " + m_config.url + " from " + m_config.url_source + ")";
        }
        return e;
    }
    if (r->status < 200 || r->status >= 300) {
        return http_error(*r, method, path);
    }
    return r;
}

namespace {
Result<json> as_json(const net::Response& r) {
    json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded()) {
        return make_error(ErrorCode::internal, "the coordinator answered with something that is not JSON");
    }
    return Result<json>(boost::system::in_place_value, std::move(j));
}
} // namespace

Result<json> ApiClient::get(std::string_view path) {
    auto r = send("GET", path, {});
    if (!r) {
        return r.error();
    }
    return as_json(*r);
}

Result<json> ApiClient::post(std::string_view path, const json& body) {
    auto r = send("POST", path, body.dump());
    if (!r) {
        return r.error();
    }
    return as_json(*r);
}

Result<json> ApiClient::del(std::string_view path) {
    auto r = send("DELETE", path, {});
    if (!r) {
        return r.error();
    }
    return as_json(*r);
}

Result<json> ApiClient::put_bytes(std::string_view path, std::string_view body) {
    auto r = send("PUT", path, body);
    if (!r) {
        return r.error();
    }
    return as_json(*r);
}

Status ApiClient::download(std::string_view method, std::string_view path, const std::filesystem::path& to,
                           std::chrono::milliseconds timeout) {
    auto r = checked(m_http.download(method, path, to, {}, timeout), method, path);
    return r ? Status{} : Status(r.error());
}

Result<std::string> ApiClient::get_bytes(std::string_view path) {
    auto r = send("GET", path, {});
    if (!r) {
        return r.error();
    }
    return std::move(r->body);
}

} // namespace gpupool::client
