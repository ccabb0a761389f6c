// `gpupool login URL` against a real coordinator process: it checks the URL and the token, writes
// the client config (0600, other keys kept), and refuses what would leave a broken config.
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <sys/stat.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_login {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string new_token(const std::string& url, const std::string& admin, const std::string& body) {
    auto a = test::http_client(url, admin);
    auto t = a.request("POST", "/v1/admin/tokens", body);
    REQUIRE(t);
    REQUIRE(t->status == 201);
    return json::parse(t->body)["token"];
}

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 0777U;
}

} // namespace

TEST_CASE("login: checks the URL and the token, then writes the client config that later commands use",
          "[login][coordinator-cli]") {
    test::TempDir dir;
    test::CoordinatorProcess coord(dir.path());
    const std::string url = coord.url();
    auto a = test::http_client(url, coord.admin());
    REQUIRE(a.request("POST", "/v1/admin/teams", R"({"name": "fellows"})")->status == 201);
    const std::string member = new_token(url, coord.admin(), R"({"role": "member", "team": "fellows", "label": "alice"})");
    const fs::path config = dir.path() / "cfg" / "config.toml";
    // An existing config keeps its other keys (here a CA certificate).
    fs::create_directories(config.parent_path());
    const fs::path ca = dir.write("pool-ca.pem", "not read for an http URL\n");
    test::write_file(config, "ca_cert = \"" + ca.string() + "\"\nurl = \"http://old.example:7070\"\n");

    // The token on stdin (as a pipe: no prompt).
    auto r = test::run_gpupool_with_input({"--config", config.string(), "login", url}, member + "\n");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("logged in to " + url + " as member alice of team fellows") &&
                          Catch::Contains("wrote " + config.string()));
    const std::string text = test::slurp(config);
    CHECK_THAT(text, Catch::Contains("url = '" + url + "'") || Catch::Contains("url = \"" + url + "\""));
    CHECK_THAT(text, Catch::Contains(member) && Catch::Contains(ca.string()));
    CHECK_THAT(text, !Catch::Contains("old.example"));
    CHECK(mode_of(config) == 0600U);

    // Later commands need neither --url nor --token.
    auto credits = test::run_gpupool({"--config", config.string(), "--json", "credits"});
    INFO(credits.err);
    CHECK(credits.exit_code == 0);
    CHECK(json::parse(credits.out)["team"] == "fellows");

    // From a file, with --json.
    const fs::path token_file = dir.write("alice.token", member + "\n");
    auto from_file = test::run_gpupool({"--config", (dir.path() / "second.toml").string(), "--token-file",
                                        token_file.string(), "--json", "login", url});
    REQUIRE(from_file.exit_code == 0);
    const auto j = json::parse(from_file.out);
    CHECK(j["whoami"]["role"] == "member");
    CHECK(j["whoami"]["label"] == "alice");
    CHECK(j["whoami"]["team"] == "fellows");
}

TEST_CASE("login: a wrong token, an enrollment token, no coordinator or nothing on stdin change no config",
          "[login][coordinator-cli]") {
    test::TempDir dir;
    test::CoordinatorProcess coord(dir.path());
    const std::string url = coord.url();
    auto a = test::http_client(url, coord.admin());
    REQUIRE(a.request("POST", "/v1/admin/teams", R"({"name": "owners"})")->status == 201);
    const fs::path config = dir.path() / "config.toml";
    const std::string before = "url = \"http://kept.example:7070\"\n";
    test::write_file(config, before);
    auto login = [&](const std::string& to, const std::string& input) {
        return test::run_gpupool_with_input({"--config", config.string(), "login", to}, input);
    };

    auto wrong = login(url, "gpp_" + std::string(64, '0') + "\n");
    CHECK(wrong.exit_code == 1);
    CHECK_THAT(wrong.err, Catch::StartsWith("error: ") && Catch::Contains(url));

    const std::string enroll = new_token(url, coord.admin(), R"({"role": "enroll", "team": "owners"})");
    auto enrollment = login(url, enroll);
    CHECK(enrollment.exit_code == 1);
    CHECK_THAT(enrollment.err, Catch::Contains("enrollment token") && Catch::Contains("worker --share"));

    auto nobody = login("http://127.0.0.1:1", "gpp_x\n");
    CHECK(nobody.exit_code == 1);
    CHECK_THAT(nobody.err, Catch::Contains("no gpupool coordinator answers at http://127.0.0.1:1"));

    auto empty = login(url, "");
    CHECK(empty.exit_code == 2);
    CHECK_THAT(empty.err, Catch::Contains("the token read from stdin is empty"));
    auto two_words = login(url, "gpp_a gpp_b\n");
    CHECK(two_words.exit_code == 2);

    CHECK(test::slurp(config) == before);
    // A config file that does not parse is reported and left alone.
    test::write_file(config, "url = \n");
    const std::string member = new_token(url, coord.admin(), R"({"role": "member", "team": "owners"})");
    auto broken = login(url, member);
    CHECK(broken.exit_code == 1);
    CHECK_THAT(broken.err, Catch::Contains(config.string()));
    CHECK(test::slurp(config) == "url = \n");
}

} // namespace test_login
} // namespace
