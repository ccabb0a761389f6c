#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <thread>

namespace gpupool::test {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

RawConnection::RawConnection(asio::io_context& ioc, std::uint16_t port) : m_ioc(ioc), m_socket(ioc) {
    m_socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
}

void RawConnection::send(const std::string& bytes) {
    asio::write(m_socket, asio::buffer(bytes));
}

std::optional<RawResponse> RawConnection::read_response(std::chrono::milliseconds timeout) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    bool done = false;
    boost::system::error_code result;
    http::async_read(m_socket, m_buffer, parser, [&](const boost::system::error_code& ec, std::size_t) {
        done = true;
        result = ec;
    });
    m_ioc.restart();
    m_ioc.run_for(timeout);
    if (!done) {
        m_socket.cancel();
        m_ioc.restart();
        m_ioc.run();
        return std::nullopt;
    }
    if (result) {
        return std::nullopt;
    }
    auto& msg = parser.get();
    RawResponse out;
    out.status = static_cast<int>(msg.result_int());
    for (const auto& f : msg) {
        std::string name(f.name_string());
        for (char& c : name) {
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        out.headers[name] = std::string(f.value());
    }
    out.body = msg.body();
    out.keep_alive = msg.keep_alive();
    return out;
}

bool RawConnection::closed_by_peer(std::chrono::milliseconds timeout) {
    bool done = false;
    boost::system::error_code result;
    char byte = 0;
    m_socket.async_read_some(asio::buffer(&byte, 1), [&](const boost::system::error_code& ec, std::size_t) {
        done = true;
        result = ec;
    });
    m_ioc.restart();
    m_ioc.run_for(timeout);
    if (!done) {
        m_socket.cancel();
        m_ioc.restart();
        m_ioc.run();
        return false;
    }
    return static_cast<bool>(result);
}

void RawConnection::close() {
    boost::system::error_code ignored;
    m_socket.shutdown(tcp::socket::shutdown_both, ignored);
    m_socket.close(ignored);
}

nlohmann::json expect_call(net::HttpClient& c, const std::string& method, const std::string& path,
                           const std::string& body, int expect) {
    auto r = c.request(method, path, body);
    REQUIRE(r);
    INFO(method << " " << path << " -> " << r->status << " " << r->body);
    REQUIRE(r->status == expect);
    return nlohmann::json::parse(r->body, nullptr, false);
}

std::string raw_request(const std::string& method, const std::string& target, const std::string& body,
                        const std::string& extra_headers) {
    std::string out = method + " " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers;
    if (!body.empty() || method == "POST" || method == "PUT") {
        out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    out += "\r\n" + body;
    return out;
}

namespace {
void add_extension(X509* cert, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (ext == nullptr || X509_add_ext(cert, ext, -1) != 1) {
        throw std::runtime_error("could not add a certificate extension");
    }
    X509_EXTENSION_free(ext);
}
} // namespace

TlsFiles make_self_signed(const std::filesystem::path& dir, const std::string& stem) {
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
    X509* cert = X509_new();
    if (key == nullptr || cert == nullptr) {
        throw std::runtime_error("OpenSSL could not make a key");
    }
    X509_set_version(cert, 2);
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    std::string cn = "gpupool test " + stem;
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                               0);
    X509_set_issuer_name(cert, name);
    add_extension(cert, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
    if (X509_sign(cert, key, EVP_sha256()) == 0) {
        throw std::runtime_error("OpenSSL could not sign the certificate");
    }
    TlsFiles files{dir / (stem + "-cert.pem"), dir / (stem + "-key.pem")};
    FILE* f = std::fopen(files.cert.c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
    f = std::fopen(files.key.c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    X509_free(cert);
    EVP_PKEY_free(key);
    return files;
}

} // namespace gpupool::test
