// The owner's control socket on its own: one request, one answer; the modes it makes; a stale
// socket replaced; another user refused by the directory's mode, and by SO_PEERCRED when the
// directory is opened up behind its back (needs root to act as another user).
#include "tests/support.hpp"
#include "worker/owner/control_socket.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_control_socket {

using namespace gpupool;
using nlohmann::json;

namespace {

constexpr uid_t k_nobody = 65534;

// In a child running as `uid`: connect, send a status request, read the answer. The child's exit
// code: 10 = could not connect, 11 = refused by the worker, 12 = answered, 13 = other.
int ask_as(uid_t uid, const std::filesystem::path& socket_path) {
    const pid_t pid = fork();
    if (pid == 0) {
        if (setgid(uid) != 0 || setuid(uid) != 0) {
            _exit(13);
        }
        const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            _exit(10);
        }
        const char req[] = "{\"op\":\"status\"}\n";
        (void)!::send(fd, req, sizeof req - 1, MSG_NOSIGNAL); // the worker may have refused and closed already
        ::shutdown(fd, SHUT_WR);
        char buf[512] = {};
        const ssize_t n = ::read(fd, buf, sizeof buf - 1);
        if (n <= 0) {
            _exit(13);
        }
        _exit(std::strstr(buf, "only the worker's own user") != nullptr ? 11 : 12);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace

TEST_CASE("control socket: one request, one answer, a private socket in a private dir", "[owner][control]") {
    test::TempDir dir;
    const auto work = dir.path() / "w";
    std::filesystem::create_directories(work);
    std::filesystem::permissions(work, std::filesystem::perms::all); // 0777: tightened at start
    auto server = worker::ControlServer::start(work, [](const json& req) { return json{{"ok", true}, {"echo", req}}; });
    REQUIRE(server.has_value());
    struct stat st {};
    REQUIRE(::stat(work.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    REQUIRE(::lstat(worker::control_socket_path(work).c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);

    auto answer = worker::control_request(work, json{{"op", "status"}, {"x", 1}});
    REQUIRE(answer.has_value());
    CHECK((*answer)["echo"]["x"] == 1);
    // Not JSON, or too big: refused, the server goes on.
    auto big = worker::control_request(work, json{{"op", std::string(worker::k_max_control_request, 'x')}});
    REQUIRE(big.has_value());
    CHECK((*big)["ok"] == false);
    CHECK(worker::control_request(work, json{{"op", "status"}}).has_value());

    // A second server on the same dir is refused: a worker answers there.
    auto second = worker::ControlServer::start(work, [](const json&) { return json(); });
    REQUIRE_FALSE(second.has_value());
    CHECK(second.error().code == ErrorCode::conflict);
    // Gone: the socket is removed and the client says nobody runs there.
    server->reset();
    CHECK_FALSE(std::filesystem::exists(worker::control_socket_path(work)));
    auto none = worker::control_request(work, json{{"op", "status"}});
    REQUIRE_FALSE(none.has_value());
    CHECK(none.error().code == ErrorCode::not_found);
}

TEST_CASE("control socket: a stale socket left by a killed worker is replaced", "[owner][control]") {
    test::TempDir dir;
    const auto path = worker::control_socket_path(dir.path());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    ::close(fd); // bound, never listening: what a SIGKILL leaves
    auto client = worker::control_request(dir.path(), json{{"op", "status"}});
    REQUIRE_FALSE(client.has_value());
    CHECK(client.error().code == ErrorCode::not_found);
    auto server = worker::ControlServer::start(dir.path(), [](const json&) { return json{{"ok", true}}; });
    REQUIRE(server.has_value());
    CHECK(worker::control_request(dir.path(), json{{"op", "status"}}).has_value());
}

TEST_CASE("control socket: another user is kept out by the modes, and refused by its uid when they are opened",
          "[owner][control]") {
    if (geteuid() != 0) {
        WARN("not root: cannot act as another user; the modes are checked in the test above");
        return;
    }
    test::TempDir dir;
    const auto work = dir.path() / "w";
    std::filesystem::permissions(dir.path(), std::filesystem::perms::all);
    auto server = worker::ControlServer::start(work, [](const json&) {
        return json{{"ok", true}, {"state", "sharing"}};
    });
    REQUIRE(server.has_value());
    const auto sock = worker::control_socket_path(work);
    CHECK(ask_as(k_nobody, sock) == 10); // the 0700 dir: nobody cannot even reach the socket
    CHECK((*server)->refused() == 0);
    // Opened behind the worker's back: the peer's uid still keeps nobody out.
    std::filesystem::permissions(work, std::filesystem::perms::all);
    std::filesystem::permissions(sock, std::filesystem::perms::all);
    CHECK(ask_as(k_nobody, sock) == 11);
    CHECK((*server)->refused() == 1);
    CHECK(ask_as(0, sock) == 12); // root may ask
}

TEST_CASE("control socket: root asks a worker service that runs as its own user", "[owner][control]") {
    if (::geteuid() != 0) {
        WARN("not root: cannot give the socket to another user; skipped");
        return;
    }
    test::TempDir dir;
    const auto work = dir.path() / "w";
    std::filesystem::create_directories(work);
    auto server = worker::ControlServer::start(work, [](const json&) { return json{{"ok", true}}; });
    REQUIRE(server.has_value());
    const auto socket = worker::control_socket_path(work);
    // As `worker install` leaves it: the service user's socket in the service user's 0700 folder.
    REQUIRE(::lchown(socket.parent_path().c_str(), k_nobody, k_nobody) == 0);
    REQUIRE(::lchown(socket.c_str(), k_nobody, k_nobody) == 0);
    auto answer = worker::control_request(work, json{{"op", "status"}});
    REQUIRE(answer.has_value());
    CHECK((*answer)["ok"] == true);
    // A folder others may write: whoever could, could have put the socket there; not asked.
    REQUIRE(::chmod(socket.parent_path().c_str(), 0770) == 0);
    auto refused = worker::control_request(work, json{{"op", "status"}});
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == ErrorCode::forbidden);
}

} // namespace test_control_socket
} // namespace
