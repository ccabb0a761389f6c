// `admin enroll`'s install command (cmd/admin_enroll.hpp), from GET /v1/dist answers: pinned
// SHA-256s, the CA only when the admin's matches, one line instead of a command that cannot work,
// and names from the network never reaching the shell unchecked.
#include "cmd/admin_enroll.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_admin_enroll {

using gpupool::cmd::join_command;
using json = nlohmann::json;

namespace {

const std::string k_a(64, 'a');
const std::string k_b(64, 'b');
const std::string k_c(64, 'c');

json served(json files, json ca = nullptr) {
    return {{"enabled", true},
            {"tls", true},
            {"files", std::move(files)},
            {"ca", std::move(ca)},
            {"install_script", {{"path", "/dist/install.sh"}, {"sha256", k_a}}}};
}

} // namespace

TEST_CASE("admin enroll: the command pins the script, the binary for this machine and the CA", "[dist]") {
    const json dist = served({{{"name", "gpupool-0.1.0-linux-aarch64"}, {"sha256", k_c}},
                              {{"name", "gpupool-0.1.0-linux-x86_64"}, {"sha256", k_b}}},
                             {{"name", "ca.pem"}, {"sha256", k_c}});
    auto j = join_command(dist, "https://pool.example.org:7443/", k_c, "x86_64");
    CHECK(j.note.empty());
    CHECK_THAT(j.command, Catch::Contains("'https://pool.example.org:7443'/dist/install.sh"));
    CHECK_THAT(j.command, Catch::Contains("= " + k_a + " ]"));
    CHECK_THAT(j.command,
               Catch::EndsWith("--binary gpupool-0.1.0-linux-x86_64 --sha256 " + k_b + " --ca-sha256 " + k_c));
    CHECK_THAT(j.command, Catch::Contains("curl -fsSLk") && Catch::Contains("wget -q --no-check-certificate"));
    // Without a CA of its own the downloads verify the certificate as usual.
    auto plain = join_command(served({{{"name", "gpupool-0.1.0-linux-x86_64"}, {"sha256", k_b}}}),
                              "https://pool.example.org", "", "x86_64");
    CHECK_THAT(plain.command, Catch::Contains("curl -fsSL -o") && !Catch::Contains("--ca-sha256"));
}

TEST_CASE("admin enroll: one line instead of a command that cannot work", "[dist]") {
    struct Case {
        const char* what;
        json dist;
        std::string admin_ca;
        const char* says;
    };
    const std::vector<Case> cases{
        {"an older coordinator, no /v1/dist", json(), "", "--dist DIR"},
        {"no --dist", {{"enabled", false}}, "", "--dist DIR"},
        {"no binary in the folder", served(json::array()), "", "no gpupool-VERSION-linux-ARCH file"},
        {"a hostile name", served({{{"name", "gpupool-1-linux-x86_64;reboot"}, {"sha256", k_b}}}), "", "no gpupool-"},
        {"a short hash", served({{{"name", "gpupool-1-linux-x86_64"}, {"sha256", "abc"}}}), "", "no gpupool-"},
        {"the admin's CA, not served", served({{{"name", "gpupool-1-linux-x86_64"}, {"sha256", k_b}}}), k_c,
         "as ca.pem"},
        {"another CA served", served({{{"name", "gpupool-1-linux-x86_64"}, {"sha256", k_b}}}, {{"sha256", k_a}}), k_c,
         "another file"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        auto j = join_command(c.dist, "https://pool.example.org", c.admin_ca, "x86_64");
        CHECK(j.command.empty());
        CHECK_THAT(j.note, Catch::Contains(c.says));
    }
    auto http = join_command(served({{{"name", "gpupool-1-linux-x86_64"}, {"sha256", k_b}}}), "http://10.0.0.1:7070",
                             "", "x86_64");
    CHECK(!http.command.empty());
    CHECK_THAT(http.note, Catch::Contains("plain HTTP"));
}

} // namespace test_admin_enroll
} // namespace
