// The owner's controls: a Unix socket, <work_dir>/control.sock, on which the running worker answers
// `gpupool worker status | pause | resume | reload`. One JSON request per connection (one object,
// then the client shuts its side), one JSON answer back.
//
// Who may ask: only the worker's own user or root. Three checks, each enough alone:
// - the work dir is 0700 and owned by the worker's user (start() tightens a looser dir it owns and
//   refuses one it does not own);
// - the socket is 0600 (chmod right after bind, inside the 0700 dir: never reachable looser);
// - each connection's peer is checked with SO_PEERCRED: another uid gets an error answer and is
//   logged.
// The client (control_request) checks the other way round: it talks only to a socket owned by its
// own user or root, so another user cannot plant a fake worker there.
//
// Requests are hostile until checked: at most k_max_control_request bytes, read within a few
// seconds, parsed with nlohmann (never throwing out of here). The handler runs on the server's
// thread (the agent hands it to its own thread). A second worker on the same work dir is refused
// (start() finds the socket answering); a stale socket left by a killed worker is replaced.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

namespace gpupool::worker {

inline constexpr std::size_t k_max_control_request = 64 * 1024;

std::filesystem::path control_socket_path(const std::filesystem::path& work_dir);

class ControlServer {
public:
    using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;

    // Listens on <work_dir>/control.sock and answers each request with `handler` on its own thread.
    static Result<std::unique_ptr<ControlServer>> start(const std::filesystem::path& work_dir, Handler handler);
    ~ControlServer(); // stops answering and removes the socket
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Connections refused because the peer was another user (for tests and logs).
    std::int64_t refused() const { return m_refused.load(); }

private:
    ControlServer(int listen_fd, int wake_fd, std::filesystem::path path, Handler handler);
    void serve();
    void answer(int fd);

    int m_listen = -1;
    int m_wake = -1; // an eventfd: written to stop serve()
    std::filesystem::path m_path;
    Handler m_handler;
    std::atomic<std::int64_t> m_refused{0};
    std::thread m_thread;
};

// Sends one request to the worker running on `work_dir` and returns its answer. not_found when no
// worker listens there (no socket, or nobody answering it); forbidden when the socket is not owned
// by this user or root; unavailable when the worker does not answer in time.
Result<nlohmann::json> control_request(const std::filesystem::path& work_dir, const nlohmann::json& request,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(10));

} // namespace gpupool::worker
