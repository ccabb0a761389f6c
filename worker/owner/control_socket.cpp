#include "worker/owner/control_socket.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t k_max_answer = 4 * 1024 * 1024;
constexpr int k_server_io_timeout_s = 3;

std::string sys_error(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

bool fill_address(const fs::path& path, sockaddr_un& addr) {
    const std::string p = path.string();
    if (p.size() >= sizeof addr.sun_path) {
        return false;
    }
    std::memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
    return true;
}

void set_timeouts(int fd, std::chrono::milliseconds t) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(t.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool peer_allowed(int fd, uid_t& uid) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return false;
    }
    uid = cred.uid;
    return cred.uid == geteuid() || cred.uid == 0;
}

bool send_all(int fd, const std::string& data) {
    std::size_t sent = 0;
    while (sent < data.size()) {
        const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        sent += static_cast<std::size_t>(n);
    }
    return true;
}

// Reads until EOF or a newline; false on a timeout, an error or more than `max` bytes.
bool read_message(int fd, std::string& out, std::size_t max) {
    char buf[4096];
    for (;;) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return false;
        }
        if (n == 0) {
            return true;
        }
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > max) {
            return false;
        }
        if (out.find('\n') != std::string::npos) {
            return true;
        }
    }
}

json refusal(const std::string& why) {
    return json{{"ok", false}, {"error", why}};
}

// The work dir holds the socket: it must be this user's and closed to everyone else.
Status secure_dir(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        return make_error(ErrorCode::io, sys_error("cannot stat " + dir.string()));
    }
    if (st.st_uid != geteuid()) {
        return make_error(ErrorCode::forbidden, "the work dir " + dir.string() + " belongs to uid " +
                                                    std::to_string(st.st_uid) + ", not to this user");
    }
    if ((st.st_mode & 077) != 0) {
        if (::chmod(dir.c_str(), 0700) != 0) {
            return make_error(ErrorCode::io, sys_error("cannot make " + dir.string() + " private (0700)"));
        }
        spdlog::info("made the work dir {} private (0700): it holds the owner's control socket", dir.string());
    }
    return {};
}

} // namespace

fs::path control_socket_path(const fs::path& work_dir) {
    return work_dir / "control.sock";
}

Result<std::unique_ptr<ControlServer>> ControlServer::start(const fs::path& work_dir, Handler handler) {
    if (auto st = secure_dir(work_dir); !st) {
        return st.error();
    }
    const fs::path path = control_socket_path(work_dir);
    sockaddr_un addr{};
    if (!fill_address(path, addr)) {
        return make_error(ErrorCode::invalid_input,
                          "the control socket path " + path.string() + " is longer than " +
                              std::to_string(sizeof addr.sun_path - 1) + " bytes",
                          "--work-dir");
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            return make_error(ErrorCode::conflict, path.string() + " exists and is not a socket; remove it");
        }
        if (control_request(work_dir, json{{"op", "ping"}}, std::chrono::seconds(2))) {
            return make_error(ErrorCode::conflict, "another worker is running with the work dir " + work_dir.string());
        }
        ::unlink(path.c_str()); // left by a worker that was killed
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return make_error(ErrorCode::io, sys_error("socket"));
    }
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::chmod(path.c_str(), 0600) != 0 ||
        ::listen(fd, 8) != 0) {
        const Error e = make_error(ErrorCode::io, sys_error("cannot listen on " + path.string()));
        ::close(fd);
        return e;
    }
    const int wake = ::eventfd(0, EFD_CLOEXEC);
    if (wake < 0) {
        ::close(fd);
        ::unlink(path.c_str());
        return make_error(ErrorCode::io, sys_error("eventfd"));
    }
    return std::unique_ptr<ControlServer>(new ControlServer(fd, wake, path, std::move(handler)));
}

ControlServer::ControlServer(int listen_fd, int wake_fd, fs::path path, Handler handler)
    : m_listen(listen_fd), m_wake(wake_fd), m_path(std::move(path)), m_handler(std::move(handler)) {
    m_thread = std::thread([this] { serve(); });
}

ControlServer::~ControlServer() {
    const std::uint64_t one = 1;
    (void)!::write(m_wake, &one, sizeof one);
    m_thread.join();
    ::close(m_listen);
    ::close(m_wake);
    ::unlink(m_path.c_str());
}

void ControlServer::serve() {
    for (;;) {
        pollfd fds[2] = {{m_listen, POLLIN, 0}, {m_wake, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            spdlog::error("control socket: {}", sys_error("poll"));
            return;
        }
        if (fds[1].revents != 0) {
            return;
        }
        const int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        answer(fd);
        ::close(fd);
    }
}

void ControlServer::answer(int fd) {
    set_timeouts(fd, std::chrono::seconds(k_server_io_timeout_s));
    uid_t uid = 0;
    if (!peer_allowed(fd, uid)) {
        ++m_refused;
        spdlog::warn("control socket: refused a request from uid {} (only this worker's user or root may ask)", uid);
        (void)send_all(fd, refusal("only the worker's own user or root may control it").dump() + "\n");
        return;
    }
    std::string text;
    json reply;
    if (!read_message(fd, text, k_max_control_request)) {
        reply = refusal("expected one JSON request of at most " + std::to_string(k_max_control_request) +
                        " bytes, sent within " + std::to_string(k_server_io_timeout_s) + " s");
    } else if (json req = json::parse(text, nullptr, false); !req.is_object()) {
        reply = refusal("expected a JSON object");
    } else if (req.value("op", json()).is_string() && req["op"] == "ping") {
        reply = json{{"ok", true}};
    } else {
        try {
            reply = m_handler(req);
        } catch (const std::exception& e) {
            reply = refusal(std::string("internal error: ") + e.what());
        }
    }
    (void)send_all(fd, reply.dump() + "\n");
}

// Root asks a service that runs as its own user (`gpupool worker install`: gpupool-worker): the socket
// is that user's, in a folder of that user's that nobody else can write, so nobody else put it there.
bool root_may_ask(const fs::path& socket, const struct stat& sock) {
    struct stat dir {};
    return geteuid() == 0 && ::lstat(socket.parent_path().c_str(), &dir) == 0 && S_ISDIR(dir.st_mode) &&
           dir.st_uid == sock.st_uid && (dir.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

Result<json> control_request(const fs::path& work_dir, const json& request, std::chrono::milliseconds timeout) {
    const fs::path path = control_socket_path(work_dir);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        return make_error(ErrorCode::not_found, "no worker is running with the work dir " + work_dir.string());
    }
    if (!S_ISSOCK(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0 && !root_may_ask(path, st))) {
        return make_error(ErrorCode::forbidden, path.string() + " is not a socket of this user or root: not asking it");
    }
    sockaddr_un addr{};
    if (!fill_address(path, addr)) {
        return make_error(ErrorCode::invalid_input, "the control socket path " + path.string() + " is too long");
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return make_error(ErrorCode::io, sys_error("socket"));
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    set_timeouts(fd, timeout);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        if (errno == EACCES || errno == EPERM) {
            return make_error(ErrorCode::forbidden, sys_error("cannot reach " + path.string()));
        }
        return make_error(ErrorCode::not_found, "no worker is running with the work dir " + work_dir.string() + " (" +
                                                    sys_error(path.string()) + ")");
    }
    uid_t peer = 0;
    if (!peer_allowed(fd, peer)) {
        return make_error(ErrorCode::forbidden, "the process on " + path.string() + " runs as uid " +
                                                    std::to_string(peer) + ", not as this user or root: not asking it");
    }
    if (!send_all(fd, request.dump() + "\n")) {
        return make_error(ErrorCode::unavailable, sys_error("cannot send to the worker"));
    }
    ::shutdown(fd, SHUT_WR);
    std::string text;
    if (!read_message(fd, text, k_max_answer)) {
        return make_error(ErrorCode::unavailable,
                          "the worker did not answer within " + std::to_string(timeout.count() / 1000) + " s");
    }
    json reply = json::parse(text, nullptr, false);
    if (!reply.is_object()) {
        return make_error(ErrorCode::internal, "the worker's answer is not a JSON object");
    }
    return Result<json>(boost::system::in_place_value, std::move(reply));
}

} // namespace gpupool::worker
