// HTTPS: a self-signed certificate made in the test; the client trusts it only through ca_cert.
#include "core/net/http_client.hpp"
#include "core/net/http_server.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <nlohmann/json.hpp>

#include <mutex>
#include <optional>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_http_tls {

using namespace gpupool;
namespace fs = std::filesystem;
using namespace gpupool::net;
using gpupool::test::client_options;

namespace {
Router tls_router() {
    Router router;
    router.add("GET", "/whoami", [](Request req, Responder respond) {
        nlohmann::json j;
        j["tls"] = req.tls;
        j["port"] = req.remote_port;
        j["auth"] = req.header("Authorization");
        respond(json_response(200, j.dump()));
    });
    router.add("POST", "/echo", [](Request req, Responder respond) { respond(json_response(200, req.body)); });
    return router;
}
} // namespace

TEST_CASE("https: the client verifies the server with --ca-cert and refuses without it", "[net]") {
    test::TempDir dir;
    auto pool = test::make_self_signed(dir.path(), "pool");
    auto other = test::make_self_signed(dir.path(), "other");
    ServerOptions options;
    options.tls_cert_file = pool.cert.string();
    options.tls_key_file = pool.key.string();
    HttpServer server(options, tls_router());
    REQUIRE(server.start());
    CHECK(server.tls());
    std::string url = "https://127.0.0.1:" + std::to_string(server.port());

    HttpClient trusted(client_options(url, "tok", pool.cert.string()));
    auto a = trusted.get("/whoami");
    REQUIRE(a);
    CHECK(a->status == 200);
    auto ja = nlohmann::json::parse(a->body);
    CHECK(ja["tls"] == true);
    CHECK(ja["auth"] == "Bearer tok");
    // Keep-alive over TLS, with a body bigger than one TLS record.
    std::string big(100'000, 'b');
    auto echoed = trusted.post("/echo", big);
    REQUIRE(echoed);
    CHECK(echoed->body == big);
    auto b = trusted.get("/whoami");
    REQUIRE(b);
    CHECK(nlohmann::json::parse(b->body)["port"] == ja["port"]);

    auto untrusted = HttpClient(client_options(url, "", "")).get("/whoami");
    REQUIRE_FALSE(untrusted);
    // A verification failure is not "unreachable": retrying cannot fix it.
    CHECK(untrusted.error().code == ErrorCode::invalid_input);
    CHECK(is_tls_verification_failure(untrusted.error()));
    CHECK(untrusted.error().message.starts_with("TLS verification failed for " + url + "/whoami: "));
    CHECK(untrusted.error().message.find("certificate") != std::string::npos);
    CHECK(untrusted.error().message.find("check --ca-cert / ca_cert") != std::string::npos);

    auto wrong_ca = HttpClient(client_options(url, "", other.cert.string())).get("/whoami");
    REQUIRE_FALSE(wrong_ca);
    CHECK(is_tls_verification_failure(wrong_ca.error()));
    CHECK(wrong_ca.error().message.find(other.cert.string()) != std::string::npos);

    auto missing_ca =
        HttpClient(client_options(url, "", (dir.path() / "nope.pem").string())).get("/whoami");
    REQUIRE_FALSE(missing_ca);
    CHECK(missing_ca.error().code == ErrorCode::invalid_input);

    // Plain HTTP to the TLS port fails cleanly, and the server keeps serving.
    auto plain = HttpClient(client_options("http://127.0.0.1:" + std::to_string(server.port()), "", "", std::chrono::seconds(3)))
                     .get("/whoami");
    CHECK_FALSE(plain);
    CHECK(trusted.get("/whoami")->status == 200);
}

TEST_CASE("https: unusable certificate files are start errors", "[net]") {
    test::TempDir dir;
    auto pool = test::make_self_signed(dir.path(), "pool");
    auto other = test::make_self_signed(dir.path(), "other");

    ServerOptions missing;
    missing.tls_cert_file = (dir.path() / "missing.pem").string();
    missing.tls_key_file = pool.key.string();
    auto s = HttpServer(missing, tls_router()).start();
    REQUIRE_FALSE(s);
    CHECK(s.error().code == ErrorCode::invalid_input);
    CHECK(s.error().message.find("missing.pem") != std::string::npos);

    ServerOptions mismatched;
    mismatched.tls_cert_file = pool.cert.string();
    mismatched.tls_key_file = other.key.string();
    auto m = HttpServer(mismatched, tls_router()).start();
    REQUIRE_FALSE(m);
    CHECK(m.error().code == ErrorCode::invalid_input);
}

namespace {
// The files a server was started with, overwritten in place (as a renewal does).
void install_pair(const test::TlsFiles& from, const fs::path& cert, const fs::path& key) {
    fs::copy_file(from.cert, cert, fs::copy_options::overwrite_existing);
    fs::copy_file(from.key, key, fs::copy_options::overwrite_existing);
}

bool trusted_by(const std::string& url, const fs::path& ca) {
    auto r = HttpClient(client_options(url, "", ca.string())).get("/whoami");
    return r && r->status == 200;
}
} // namespace

TEST_CASE("https: reload_tls serves new connections the renewed certificate, a request in flight finishes",
          "[net][tls-reload]") {
    test::TempDir dir;
    auto a = test::make_self_signed(dir.path(), "a");
    auto b = test::make_self_signed(dir.path(), "b");
    const fs::path cert = dir.path() / "live-cert.pem";
    const fs::path key = dir.path() / "live-key.pem";
    install_pair(a, cert, key);

    Router router = tls_router();
    std::mutex held_mutex;
    std::optional<Responder> held; // the request in flight across the reload
    router.add("GET", "/slow", [&](Request, Responder respond) {
        std::lock_guard lock(held_mutex);
        held.emplace(std::move(respond));
    });
    ServerOptions options;
    options.tls_cert_file = cert.string();
    options.tls_key_file = key.string();
    HttpServer server(options, router);
    REQUIRE(server.start());
    const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
    REQUIRE(trusted_by(url, a.cert));
    REQUIRE_FALSE(trusted_by(url, b.cert));

    // A request over a connection made with A waits in its handler while the certificate changes.
    std::optional<Result<Response>> slow;
    std::thread client([&] { slow = HttpClient(client_options(url, "", a.cert.string())).get("/slow"); });
    REQUIRE(test::eventually([&] {
        std::lock_guard lock(held_mutex);
        return held.has_value();
    }));

    install_pair(b, cert, key);
    REQUIRE(server.reload_tls());
    // New connections: B is served, A no longer verifies.
    CHECK(trusted_by(url, b.cert));
    CHECK_FALSE(trusted_by(url, a.cert));

    {
        std::lock_guard lock(held_mutex);
        (*held)(json_response(200, R"({"late": true})"));
    }
    client.join();
    REQUIRE(slow.has_value());
    REQUIRE(slow->has_value());
    CHECK((*slow)->status == 200);
    CHECK((*slow)->body == R"({"late": true})");
}

TEST_CASE("https: a failed reload_tls keeps the certificate served and says why", "[net][tls-reload]") {
    test::TempDir dir;
    auto a = test::make_self_signed(dir.path(), "a");
    auto b = test::make_self_signed(dir.path(), "b");
    const fs::path cert = dir.path() / "live-cert.pem";
    const fs::path key = dir.path() / "live-key.pem";
    install_pair(a, cert, key);
    ServerOptions options;
    options.tls_cert_file = cert.string();
    options.tls_key_file = key.string();
    HttpServer server(options, tls_router());
    REQUIRE(server.start());
    const std::string url = "https://127.0.0.1:" + std::to_string(server.port());

    // B's certificate with A's key: they do not match.
    fs::copy_file(b.cert, cert, fs::copy_options::overwrite_existing);
    auto mismatched = server.reload_tls();
    REQUIRE_FALSE(mismatched);
    CHECK(mismatched.error().code == ErrorCode::invalid_input);
    CHECK_THAT(mismatched.error().message, Catch::Contains("live-key.pem"));
    CHECK(trusted_by(url, a.cert));
    CHECK_FALSE(trusted_by(url, b.cert));

    // An unreadable (here: missing) key.
    fs::remove(key);
    auto missing = server.reload_tls();
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message, Catch::Contains("live-key.pem"));
    CHECK(trusted_by(url, a.cert));

    // Not PEM at all.
    test::write_file(cert, "not a certificate\n");
    fs::copy_file(a.key, key);
    auto garbage = server.reload_tls();
    REQUIRE_FALSE(garbage);
    CHECK_THAT(garbage.error().message, Catch::Contains("live-cert.pem"));
    CHECK(trusted_by(url, a.cert));
}

TEST_CASE("https: reload_tls on a plain HTTP server is refused", "[net][tls-reload]") {
    HttpServer server(ServerOptions{}, tls_router());
    REQUIRE(server.start());
    auto r = server.reload_tls();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::conflict);
}

} // namespace test_http_tls
} // namespace
