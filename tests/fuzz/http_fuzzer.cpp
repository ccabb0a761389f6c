// libFuzzer entry point for the coordinator's HTTP request path: each input is raw bytes (request
// line, headers, body; several pipelined requests are fine) written over a loopback socket into a
// real CoordinatorService: the Beast parser, the router, admission from the headers, the JSON
// limits, the handlers, the ledger and SQLite (in a temporary directory). "@A@", "@M@" and "@W@"
// in the input become an admin's, a member's and a worker's token, so the fuzzer reaches the
// handlers behind authentication, not only the refusals.
// Checked beyond "no crash, no sanitizer report in any server thread": after every input the
// server still answers GET /v1/health with 200.
#include "core/coordinator/service.hpp"
#include "core/store/open_store.hpp"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace {

using gpupool::coordinator::CoordinatorService;
using gpupool::coordinator::ServiceOptions;

std::unique_ptr<CoordinatorService> g_service;
std::uint16_t g_port = 0;
std::string g_admin, g_member, g_worker;

// Writes `request` and reads until the server closes. With `half_close`, our sending side is shut
// right after the bytes (fuzz inputs need not ask for Connection: close; the server then treats
// the client as gone once it has read the requests, and their handlers still run); without it,
// the request must say Connection: close (set-up and the health check, whose answers we need).
std::string exchange(std::string_view request, bool half_close) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        std::abort();
    }
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(g_port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return {};
    }
    std::size_t sent = 0;
    while (sent < request.size()) {
        const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
            break; // the server may close early (a refusal before the body): that is fine
        }
        sent += static_cast<std::size_t>(n);
    }
    if (half_close) {
        ::shutdown(fd, SHUT_WR);
    }
    std::string out;
    char buf[4096];
    for (;;) {
        const auto n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            break;
        }
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return out;
}

std::string post(const std::string& path, const std::string& token, const nlohmann::json& body) {
    const std::string text = body.dump();
    const std::string answer =
        exchange("POST " + path + " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\nAuthorization: Bearer " + token +
                 "\r\nContent-Length: " + std::to_string(text.size()) + "\r\n\r\n" + text,
                 false);
    const auto at = answer.find("\r\n\r\n");
    return at == std::string::npos ? std::string() : answer.substr(at + 4);
}

std::string token_from(const std::string& answer) {
    auto j = nlohmann::json::parse(answer, nullptr, false);
    if (!j.is_object() || !j.contains("token")) {
        std::fprintf(stderr, "http_fuzzer: set-up failed: %s\n", answer.c_str());
        std::abort();
    }
    return j["token"].get<std::string>();
}

void replace_all(std::string& s, std::string_view from, const std::string& to) {
    for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
        s.replace(at, from.size(), to);
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    char dir_template[] = "/tmp/gpupool-http-fuzz-XXXXXX";
    const char* dir = ::mkdtemp(dir_template);
    if (dir == nullptr) {
        std::abort();
    }
    ServiceOptions o;
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.http.header_timeout = std::chrono::milliseconds(1000);
    o.http.io_timeout = std::chrono::milliseconds(1000);
    o.http.body_grace = std::chrono::milliseconds(500);
    o.http.spool_dir = dir;
    o.http.max_connections_per_client = 0; // every input comes from loopback, hundreds a second
    o.tick = std::chrono::milliseconds(50);
    o.max_poll_wait = std::chrono::milliseconds(100);
    auto opened = gpupool::store::open_store((std::filesystem::path(dir) / "pool.db").string());
    if (!opened) {
        std::abort();
    }
    g_service = std::make_unique<CoordinatorService>(o, std::move(*opened), gpupool::coordinator::system_clock());
    if (!g_service->start(&g_admin)) {
        std::abort();
    }
    g_port = g_service->port();
    post("/v1/admin/teams", g_admin, {{"name", "fuzz"}});
    g_member = token_from(post("/v1/admin/tokens", g_admin, {{"role", "member"}, {"team", "fuzz"}}));
    const std::string enroll =
        token_from(post("/v1/admin/tokens", g_admin, {{"role", "enroll"}, {"team", "fuzz"}, {"uses", 10}}));
    const nlohmann::json inventory = {{"cpu_milli", 4000},
                                      {"memory_mib", 8192},
                                      {"gpus", nlohmann::json::array({{{"index", 0}, {"model", "L4"}, {"memory_mib", 24576}}})}};
    g_worker = token_from(post("/v1/workers/register", enroll, {{"name", "fuzz-box"}, {"inventory", inventory}}));
    post("/v1/admin/grants", g_admin, {{"team", "fuzz"}, {"amount_micro", 1'000'000'000}});
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string request(reinterpret_cast<const char*>(data), size);
    replace_all(request, "@A@", g_admin);
    replace_all(request, "@M@", g_member);
    replace_all(request, "@W@", g_worker);
    exchange(request, true);
    // A few tries: on a loaded machine (sanitizers, two cores) one answer can take longer than the
    // 2 s a read waits; a server that is stuck or gone fails all of them.
    std::string health;
    for (int attempt = 0; attempt < 5 && health.rfind("HTTP/1.1 200", 0) != 0; ++attempt) {
        health = exchange("GET /v1/health HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n", false);
    }
    if (health.rfind("HTTP/1.1 200", 0) != 0) {
        std::fprintf(stderr, "http_fuzzer: the server stopped answering /v1/health: %s\n", health.c_str());
        std::abort();
    }
    return 0;
}
