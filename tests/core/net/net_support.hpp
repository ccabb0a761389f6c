// Helpers for the HTTP tests: a raw HTTP/1.1 connection (Beast parser, Asio socket) for what a
// well-behaved client cannot do (pipelining, garbage, stalling, closing early), a self-signed TLS
// certificate made with OpenSSL, and polling.
#pragma once

#include "core/net/http_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace gpupool::test {

struct RawResponse {
    int status = 0;
    std::map<std::string, std::string> headers; // lower-case names
    std::string body;
    bool keep_alive = false;
};

class RawConnection {
public:
    RawConnection(boost::asio::io_context& ioc, std::uint16_t port);
    void send(const std::string& bytes);
    // One response, or nullopt when the connection closed or nothing came within `timeout`.
    std::optional<RawResponse> read_response(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    // True when the server closed the connection (EOF or reset) within `timeout`.
    bool closed_by_peer(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    void close();
    boost::asio::ip::tcp::socket& socket() { return m_socket; }
    boost::beast::flat_buffer& buffer() { return m_buffer; }

private:
    boost::asio::io_context& m_ioc;
    boost::asio::ip::tcp::socket m_socket;
    boost::beast::flat_buffer m_buffer;
};

// "GET /path HTTP/1.1\r\nHost: test\r\n...".
std::string raw_request(const std::string& method, const std::string& target, const std::string& body = {},
                        const std::string& extra_headers = {});

struct TlsFiles {
    std::filesystem::path cert;
    std::filesystem::path key;
};
// A self-signed certificate (CA:TRUE, subjectAltName IP:127.0.0.1 and DNS:localhost) and its key.
TlsFiles make_self_signed(const std::filesystem::path& dir, const std::string& stem);

// One request that must answer `expect` (the test stops otherwise, showing the answer); its body
// as JSON, discarded (not an error) when it is not JSON.
nlohmann::json expect_call(net::HttpClient& c, const std::string& method, const std::string& path,
                           const std::string& body, int expect);

inline net::ClientOptions client_options(std::string base_url, std::string token, std::string ca_cert,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    net::ClientOptions o;
    o.base_url = std::move(base_url);
    o.token = std::move(token);
    o.ca_cert = std::move(ca_cert);
    o.timeout = timeout;
    return o;
}

} // namespace gpupool::test
