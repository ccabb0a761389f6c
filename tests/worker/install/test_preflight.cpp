// What would make an installed service fail, refused before install writes anything
// (worker/install/preflight.hpp): the binary's place and permissions, the container engine (looked
// up through an injected FindProgram), and the coordinator and the token, against a real
// coordinator on loopback.
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"
#include "worker/install/preflight.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_preflight {

using namespace gpupool;
using namespace gpupool::worker;
namespace fs = std::filesystem;

namespace {

// A folder beside the build's binary, outside any temporary directory, removed at the end.
struct BuildDir {
    fs::path path = fs::path(GPUPOOL_BINARY).parent_path() /
                    ("preflight-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    BuildDir() { fs::create_directories(path); }
    ~BuildDir() {
        std::error_code ec;
        fs::permissions(path, fs::perms::owner_all, ec);
        fs::remove_all(path, ec);
    }
    static int& counter() {
        static int n = 0;
        return n;
    }
};

fs::path copy_binary(const fs::path& dir) {
    const fs::path to = dir / "gpupool";
    fs::copy_file(GPUPOOL_BINARY, to, fs::copy_options::overwrite_existing);
    fs::permissions(to, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
    return to;
}

std::optional<fs::path> no_engine(const std::string&) {
    return std::nullopt;
}

std::optional<fs::path> any_engine(const std::string& name) {
    return fs::path("/usr/bin") / name;
}

} // namespace

TEST_CASE("preflight: a binary under /tmp, closed to the service's user or not executable by it is refused",
          "[install]") {
    test::TempDir tmp; // under the temporary directory
    const fs::path in_tmp = copy_binary(tmp.path());
    if (in_tmp.string().starts_with("/tmp/")) {
        auto st = check_service_binary(in_tmp, "gpupool-worker");
        REQUIRE_FALSE(st);
        CHECK_THAT(st.error().message, Catch::Contains(in_tmp.string()) && Catch::Contains("under /tmp") &&
                                           Catch::Contains("install -m 0755"));
        CHECK_FALSE(check_service_binary(in_tmp, "")); // whoever runs it: /tmp is private to services
    }
    CHECK_FALSE(check_service_binary("/var/tmp/x/gpupool", ""));
    CHECK_FALSE(check_service_binary("/dev/shm/gpupool", ""));

    BuildDir b;
    const fs::path closed = b.path / "closed";
    fs::create_directories(closed);
    const fs::path hidden = copy_binary(closed);
    fs::permissions(closed, fs::perms::owner_all); // 0700, like /root
    auto st = check_service_binary(hidden, "gpupool-worker");
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message,
               Catch::Contains("gpupool-worker cannot reach: " + closed.string() + " is closed to other users"));
    CHECK(check_service_binary(hidden, "")); // root, or the owner who ran install, can

    fs::permissions(closed, fs::perms::owner_all | fs::perms::others_exec | fs::perms::others_read);
    fs::permissions(hidden, fs::perms::owner_all);
    st = check_service_binary(hidden, "gpupool-coordinator");
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains("gpupool-coordinator cannot execute"));

    CHECK_FALSE(check_service_binary(b.path / "missing", ""));
    CHECK(check_service_binary(GPUPOOL_BINARY, "gpupool-worker"));
}

TEST_CASE("preflight: no container engine for the runtime is refused, naming it, before the network is asked",
          "[install]") {
    WorkerPreflight p;
    p.coordinator = "http://127.0.0.1:1";
    p.token = "gpp_x";
    p.find = no_engine;
    for (const char* runtime : {"podman", "docker"}) {
        p.runtime = runtime;
        auto r = preflight_worker(p);
        REQUIRE_FALSE(r);
        CHECK(r.error().field == "--runtime");
        CHECK_THAT(r.error().message, Catch::Contains(std::string("`") + runtime + "`, which is not on PATH"));
    }
}

TEST_CASE("preflight: an unreachable coordinator, a refused token or one that does not enroll is refused, and plain "
          "HTTP off this machine is a warning",
          "[install]") {
    test::svc::Pool pool;
    WorkerPreflight p;
    p.find = any_engine;
    p.token = pool.enroll;

    p.coordinator = "http://127.0.0.1:1"; // nothing listens there
    auto unreachable = preflight_worker(p);
    REQUIRE_FALSE(unreachable);
    CHECK(unreachable.error().field == "--coordinator");
    CHECK_THAT(unreachable.error().message, Catch::Contains("cannot be reached") && Catch::Contains("127.0.0.1:1"));

    p.coordinator = pool.server.url;
    p.token = "gpp_0123456789abcdef0123456789abcdef";
    auto refused = preflight_worker(p);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().field == "--token-file");
    CHECK_THAT(refused.error().message, Catch::Contains("refuses the enrollment token"));

    p.token = pool.member;
    auto member = preflight_worker(p);
    REQUIRE_FALSE(member);
    CHECK_THAT(member.error().message, Catch::Contains("a member token, not an enrollment token"));

    p.token = pool.enroll;
    auto ok = preflight_worker(p);
    REQUIRE(ok);
    CHECK(ok->empty()); // http://127.0.0.1 stays on this machine

    p.coordinator = "not a url";
    CHECK(preflight_worker(p).error().field == "--coordinator");
}

TEST_CASE("preflight: plain http:// to another machine and a coordinator serving HTTP off loopback are warned about",
          "[install]") {
    for (const char* clear : {"http://192.0.2.1:7443", "http://pool.example.org", "http://[2001:db8::1]:7443/"}) {
        INFO(clear);
        auto w = plain_http_warning(clear);
        REQUIRE(w);
        CHECK_THAT(*w, Catch::Contains(clear) && Catch::Contains("plain HTTP") && Catch::Contains("https://"));
    }
    for (const char* fine :
         {"https://pool.example.org", "http://127.0.0.1:7443", "http://localhost:7443", "http://[::1]:7443"}) {
        INFO(fine);
        CHECK_FALSE(plain_http_warning(fine));
    }
    CHECK(preflight_coordinator("0.0.0.0:7443", false).size() == 1);
    CHECK_THAT(preflight_coordinator("0.0.0.0:7443", false)[0], Catch::Contains("plain HTTP"));
    CHECK(preflight_coordinator("0.0.0.0:7443", true).empty());
    CHECK(preflight_coordinator("127.0.0.1:7443", false).empty());
    CHECK(preflight_coordinator("[::1]:7443", false).empty());
}

} // namespace test_preflight
} // namespace
