// HTTPS: a self-signed certificate made in the test; the client trusts it only through ca_cert.
#include "core/net/http_client.hpp"
#include "core/net/http_server.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <nlohmann/json.hpp>

using namespace gpupool;
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
