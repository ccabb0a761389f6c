// The files a coordinator hands out to GPU owners (`coordinator --dist DIR`; dist.hpp,
// routes_dist.cpp) on a real service over loopback HTTP: what is served and with which SHA-256s,
// and what hostile requests and a hostile folder get (traversal, encoded dots and slashes, links,
// names outside the pattern, a file swapped for a link after start-up, HEAD).
#include "core/coordinator/dist.hpp"
#include "core/util/sha256.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/core/net/net_support.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_dist_routes {

using namespace gpupool;
using namespace gpupool::test::svc;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_binary = "gpupool-0.1.0-linux-x86_64";
constexpr const char* k_secret = "SECRET-OUTSIDE-THE-DIST-FOLDER";

std::string random_bytes(std::size_t n) {
    std::mt19937 gen(45);
    std::string out(n, '\0');
    for (auto& c : out) {
        c = static_cast<char>(gen() & 0xff);
    }
    return out;
}

// A --dist folder as an admin might leave it, with a few things a hostile user might have put there.
struct DistDir {
    test::TempDir root;
    fs::path dir = root.path() / "dist";
    std::string binary = random_bytes(300 * 1024);
    std::string ca = "-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n";

    DistDir() {
        fs::create_directories(dir);
        test::write_file(root.path() / "secret.txt", k_secret);
        test::write_file(dir / k_binary, binary);
        test::write_file(dir / "ca.pem", ca);
        test::write_file(dir / "notes.txt", "not a served name");
        fs::create_symlink(root.path() / "secret.txt", dir / "gpupool-0.1.0-linux-aarch64"); // a link: not served
        fs::create_directories(dir / "gpupool-0.2.0-linux-x86_64");                          // a folder: not served
    }
};

std::shared_ptr<const coordinator::DistFiles> open_dist(const fs::path& dir) {
    std::vector<std::string> warnings;
    auto d = coordinator::DistFiles::open(dir, warnings);
    REQUIRE(d);
    return *d;
}

} // namespace

TEST_CASE("dist: the static files, SHA256SUMS, the install script and /v1/dist, without a token", "[dist]") {
    DistDir d;
    std::vector<std::string> warnings;
    auto dist = coordinator::DistFiles::open(d.dir, warnings);
    REQUIRE(dist);
    // The link, the folder and the stray name are skipped, each with a warning.
    REQUIRE(warnings.size() == 3);
    CHECK_THAT(warnings[0], Catch::Contains("gpupool-0.1.0-linux-aarch64") && Catch::Contains("link"));
    CHECK_THAT(warnings[1], Catch::Contains("gpupool-0.2.0-linux-x86_64") && Catch::Contains("not a regular file"));
    CHECK_THAT(warnings[2], Catch::Contains("notes.txt"));
    Server s(30'000, std::int64_t{64} << 20, 60'000, [&](coordinator::ServiceOptions& o) { o.dist = *dist; });
    auto anyone = s.client();

    auto bin = anyone.request("GET", std::string("/dist/") + k_binary);
    REQUIRE(bin);
    CHECK(bin->status == 200);
    CHECK(bin->body == d.binary);
    CHECK(bin->content_type == "application/octet-stream");

    const std::string bin_sha = util::sha256_hex(d.binary);
    const std::string ca_sha = util::sha256_hex(d.ca);
    auto sums = anyone.request("GET", "/dist/SHA256SUMS");
    REQUIRE(sums);
    CHECK(sums->status == 200);
    // sha256sum's format, sorted by name; the link and the folder are not in it.
    CHECK(sums->body == ca_sha + "  ca.pem\n" + bin_sha + "  " + k_binary + "\n");

    auto script = anyone.request("GET", "/dist/install.sh");
    REQUIRE(script);
    CHECK(script->status == 200);
    CHECK(script->body == coordinator::install_script());
    CHECK(script->body.starts_with("#!/bin/sh"));

    auto described = anyone.request("GET", "/v1/dist");
    REQUIRE(described);
    REQUIRE(described->status == 200);
    const json j = json::parse(described->body);
    CHECK(j["enabled"] == true);
    CHECK(j["tls"] == false);
    REQUIRE(j["files"].size() == 1);
    CHECK(j["files"][0]["name"] == k_binary);
    CHECK(j["files"][0]["size"] == d.binary.size());
    CHECK(j["files"][0]["sha256"] == bin_sha);
    CHECK(j["ca"]["sha256"] == ca_sha);
    CHECK(j["install_script"]["sha256"] == util::sha256_hex(coordinator::install_script()));
    CHECK(j["sums"]["sha256"] == util::sha256_hex(sums->body));
}

TEST_CASE("dist: hostile paths, links, other names and HEAD get nothing from outside the served files",
          "[dist][security]") {
    DistDir d;
    Server s(30'000, std::int64_t{64} << 20, 60'000,
             [&](coordinator::ServiceOptions& o) { o.dist = open_dist(d.dir); });
    boost::asio::io_context ioc;
    const std::vector<std::string> targets{
        "/dist/../secret.txt",
        "/dist/%2e%2e/secret.txt",
        "/dist/%2E%2E%2Fsecret.txt",
        "/dist/..%2fsecret.txt",
        "/dist/..%2F..%2Fetc%2Fpasswd",
        "/dist/%2e%2e",
        "/dist/.",
        "/dist/./gpupool-0.1.0-linux-x86_64/",
        "/dist/gpupool-0.1.0-linux-aarch64", // a link in the folder
        "/dist/gpupool-0.2.0-linux-x86_64",  // a folder
        "/dist/gpupool-0.2.0-linux-x86_64%2F..%2F..%2Fsecret.txt",
        "/dist/notes.txt", // not a served name
        "/dist/gpupool-0.1.0-linux-x86_64%00",
        "/dist/gpupool-0.1.0-linux-x86_64/..",
        "/dist/",
        "/dist",
        "/dist/%2fetc%2fpasswd",
        "/dist/gpupool-..-linux-x86_64",
    };
    for (const auto& target : targets) {
        INFO(target);
        test::RawConnection c(ioc, s.service->port());
        c.send(test::raw_request("GET", target, {}, "Connection: close\r\n"));
        auto r = c.read_response();
        REQUIRE(r);
        CHECK((r->status == 404 || r->status == 400));
        CHECK(r->body.find(k_secret) == std::string::npos);
        CHECK(r->body.find("root:") == std::string::npos);
    }
    // HEAD is not served (the server answers GET only): 405, never the file.
    {
        test::RawConnection c(ioc, s.service->port());
        c.send(test::raw_request("HEAD", std::string("/dist/") + k_binary, {}, "Connection: close\r\n"));
        auto r = c.read_response();
        REQUIRE(r);
        CHECK(r->status == 405);
        CHECK(r->headers["allow"] == "GET");
        CHECK(r->body.find(d.binary.substr(0, 64)) == std::string::npos);
    }
    // The served file swapped for a link after start-up: refused (503), the link not followed.
    auto anyone = s.client();
    fs::create_symlink(d.root.path() / "secret.txt", d.dir / "swap");
    fs::rename(d.dir / "swap", d.dir / k_binary);
    auto swapped = anyone.request("GET", std::string("/dist/") + k_binary);
    REQUIRE(swapped);
    CHECK(swapped->status == 503);
    CHECK(swapped->body.find(k_secret) == std::string::npos);
    // And one rewritten in place: its published SHA-256 would lie, so it is not served either.
    fs::remove(d.dir / k_binary);
    test::write_file(d.dir / k_binary, "another build");
    auto rewritten = anyone.request("GET", std::string("/dist/") + k_binary);
    REQUIRE(rewritten);
    CHECK(rewritten->status == 503);
    CHECK_THAT(rewritten->body, Catch::Contains("restart the coordinator"));
}

TEST_CASE("dist: without --dist the files are 404 with how to serve them, and /v1/dist says so", "[dist]") {
    Server s;
    auto anyone = s.client();
    for (const std::string& path : {std::string("/dist/") + k_binary, std::string("/dist/SHA256SUMS")}) {
        auto r = anyone.request("GET", path);
        REQUIRE(r);
        CHECK(r->status == 404);
        CHECK_THAT(r->body, Catch::Contains("--dist DIR"));
    }
    auto j = json::parse(anyone.request("GET", "/v1/dist")->body);
    CHECK(j["enabled"] == false);
    CHECK_THAT(j["detail"].get<std::string>(), Catch::Contains("--dist DIR"));
    CHECK(anyone.request("GET", "/dist/install.sh")->status == 200);
}

TEST_CASE("dist: the served names are gpupool-VERSION-linux-ARCH and ca.pem, nothing else", "[dist]") {
    using coordinator::DistFiles;
    for (const char* good : {"gpupool-0.1.0-linux-x86_64", "gpupool-1.2.3+deb12-linux-aarch64", "ca.pem"}) {
        INFO(good);
        CHECK(DistFiles::is_dist_name(good));
    }
    for (const char* bad : {"", ".", "..", "gpupool", "gpupool--linux-x86_64", "gpupool-0.1.0-linux-",
                            "gpupool-0.1.0-linux-x86/64", "gpupool-../x-linux-x86_64", "gpupool-0.1.0-linux-x86_64.sig",
                            "gpupool-0.1.0-linux-x86-64", "SHA256SUMS", "install.sh", "CA.pem",
                            "gpupool-0.1.0-darwin-arm64", "gpupool-0.1.0-linux-x86_64\n", "gpupool-v1-linux-x86_64"}) {
        INFO(bad);
        CHECK_FALSE(DistFiles::is_dist_name(bad));
    }
}

} // namespace test_dist_routes
} // namespace
