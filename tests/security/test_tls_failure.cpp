// A worker or a command with the wrong CA certificate stops at once with exit 1 and says "TLS
// verification failed" (before, the worker called the pool unreachable and retried forever), and a
// SIGTERM during a retry wait stops the worker promptly.
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <boost/process.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_tls_failure {

using namespace gpupool;
namespace bp = boost::process;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// A self-signed certificate for 127.0.0.1 (key.pem, cert.pem) in `dir`; false without openssl.
bool make_cert(const fs::path& dir) {
    fs::create_directories(dir);
    return bp::system(bp::search_path("openssl"), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                      (dir / "key.pem").string(), "-out", (dir / "cert.pem").string(), "-days", "1", "-subj",
                      "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", bp::std_out > bp::null,
                      bp::std_err > bp::null) == 0;
}

std::string enroll_token(const std::string& url, const std::string& admin, const fs::path& ca) {
    net::ClientOptions o;
    o.base_url = url;
    o.token = admin;
    o.ca_cert = ca.string();
    net::HttpClient a(o);
    auto t = a.request("POST", "/v1/admin/teams", R"({"name": "owners"})");
    REQUIRE(t);
    REQUIRE(t->status == 201);
    auto e = a.request("POST", "/v1/admin/tokens", R"({"role": "enroll", "team": "owners"})");
    REQUIRE(e);
    REQUIRE(e->status == 201);
    return nlohmann::json::parse(e->body)["token"];
}

} // namespace

TEST_CASE("TLS failure: a worker or command with the wrong CA stops with exit 1 and says why", "[security][worker-cli]") {
    if (bp::search_path("openssl").empty()) {
        WARN("SKIPPED: the openssl command is not installed (package openssl)");
        return;
    }
    test::TempDir dir;
    REQUIRE(make_cert(dir.path() / "pool"));
    REQUIRE(make_cert(dir.path() / "other")); // a CA that did not sign the pool's certificate
    const auto pool_ca = dir.path() / "pool" / "cert.pem";
    const auto wrong_ca = dir.path() / "other" / "cert.pem";
    test::CoordinatorProcess coord(dir.path(), {"--tls-cert", pool_ca.string(), "--tls-key",
                                                (dir.path() / "pool" / "key.pem").string()});
    const std::string url = coord.url("https");
    const std::string enroll = enroll_token(url, coord.admin(), pool_ca);

    SECTION("a new worker: registration fails at once") {
        const auto started = std::chrono::steady_clock::now();
        test::WorkerProcess w(dir.path() / "w", url, enroll, {"--ca-cert", wrong_ca.string()});
        const int rc = w.wait_exit(10s);
        INFO(w.stderr_text());
        CHECK(rc == 1);
        CHECK(std::chrono::steady_clock::now() - started < 8s);
        CHECK_THAT(w.stderr_text(), Catch::Contains("TLS verification failed for " + url) &&
                                        Catch::Contains("check --ca-cert / ca_cert"));
        CHECK_THAT(w.stderr_text(), !Catch::Contains("unreachable"));
    }
    SECTION("a registered worker whose CA changed: its heartbeat fails and it stops") {
        {
            test::WorkerProcess good(dir.path() / "w", url, enroll, {"--ca-cert", pool_ca.string()});
            REQUIRE(test::eventually([&] { return fs::exists(dir.path() / "w" / "worker.json"); }, 15s));
            good.kill9();
        }
        test::WorkerProcess w(dir.path() / "w", url, enroll, {"--ca-cert", wrong_ca.string()});
        const int rc = w.wait_exit(10s);
        INFO(w.stderr_text());
        CHECK(rc == 1);
        CHECK_THAT(w.stderr_text(), Catch::Contains("TLS verification failed"));
    }
    SECTION("a client command") {
        auto r = test::run_gpupool({"--url", url, "--token", coord.admin(), "--ca-cert", wrong_ca.string(), "admin",
                                    "workers"});
        CHECK(r.exit_code == 1);
        CHECK_THAT(r.err, Catch::Contains("error: ") && Catch::Contains("TLS verification failed for " + url));
    }
}

TEST_CASE("TLS failure: SIGTERM during a worker's retry wait stops it promptly", "[security][worker-cli]") {
    test::TempDir dir;
    // Nothing listens on port 1: registration keeps failing as "unreachable" and backs off.
    test::WorkerProcess w(dir.path() / "w", "http://127.0.0.1:1", "gpp_enroll");
    REQUIRE(test::eventually([&] { return w.stderr_text().find("retrying registration") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(2s); // well into a backoff wait
    w.signal(SIGTERM);
    const auto signalled = std::chrono::steady_clock::now();
    const int rc = w.wait_exit(10s);
    INFO(w.stderr_text());
    CHECK(rc == 0); // a requested stop, not a failure
    CHECK(std::chrono::steady_clock::now() - signalled < 3s);
}

} // namespace test_tls_failure
} // namespace
