// OwnerDesk: where the owner's requests wait for the agent's thread. It runs the control socket
// (control_socket.hpp); each request the socket reads is queued here and the agent is woken; the
// agent answers them all (answer_all) between its other steps, and the socket's thread passes each
// answer back. A request the agent has not taken within 5 s (its thread is held up, say by a
// coordinator that does not answer) is withdrawn and answered "busy": nothing was done, and nothing
// will be done later. Agent::reload() (SIGHUP) queues a request nobody waits for.
// Thread-safe: the socket's thread posts, the agent's thread answers.
#pragma once

#include "core/util/thread_safety.hpp"
#include "worker/owner/control_socket.hpp"
#include "worker/owner/owner_requests.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

namespace gpupool::worker {

class OwnerDesk {
public:
    OwnerDesk() = default;
    ~OwnerDesk() { close(); }
    OwnerDesk(const OwnerDesk&) = delete;
    OwnerDesk& operator=(const OwnerDesk&) = delete;

    // Opens <work_dir>/control.sock; `wake` is called (on the socket's thread) when a request waits.
    // A conflict (another worker answers there) is returned; any other failure is logged and the
    // worker goes on without the socket (pause/resume still work through the files).
    Status open(const std::filesystem::path& work_dir, std::function<void()> wake);
    // Stops the socket; requests still queued are answered "the worker is stopping".
    void close();
    // Queues a request; `wait` false: nobody waits for its answer.
    std::shared_ptr<std::promise<nlohmann::json>> post(nlohmann::json request, bool wait);
    // Queues a request and waits for its answer (what the socket's thread does). One the agent has
    // not taken within `wait` is withdrawn from the queue and answered {"ok": false, "error": "the
    // worker is busy ..."}, so that it is never done later; one it has taken is waited for to the end.
    nlohmann::json ask(nlohmann::json request, std::chrono::milliseconds wait);
    static constexpr std::chrono::milliseconds k_answer_wait{5'000};
    bool pending() const { return m_pending.load(); }
    // Answers every queued request with `answer`, on the caller's thread; how many there were.
    std::size_t answer_all(const std::function<nlohmann::json(const nlohmann::json&)>& answer);

private:
    util::Mutex m_mu;
    std::vector<PendingRequest> m_queue GUARDED_BY(m_mu);
    std::atomic<bool> m_pending{false};
    std::function<void()> m_wake;
    std::unique_ptr<ControlServer> m_server;
};

} // namespace gpupool::worker
