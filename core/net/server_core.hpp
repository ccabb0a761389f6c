// What HttpServer and its connections share (internal to core/net; http_server.hpp is the API).
//
// Core holds the options, the router and the registry of live sessions with the per-address
// connection counts, the upload (spooled body) slots and the budget of bodies in memory
// (BodyMemory, shared out as BodyReservations). Gate lets Responders post into the server only
// while it runs; ReplyState and AdmitState are the shared state behind one Responder and one
// admission decision.
// Thread safety: every member of Core may be used from any thread; the registry is guarded by
// sessions_mutex. A session itself runs on its own strand (http_session.cpp).
#pragma once

#include "core/net/http_server.hpp"
#include "core/net/http_types.hpp"
#include "core/net/router.hpp"
#include "core/util/claimed_dir.hpp"
#include "core/util/thread_safety.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpupool::net::detail {

// Responders post into the server only while this is open; stop() closes it before the io_context
// goes away, so a Responder called later (from any thread) does nothing.
class Gate {
public:
    template <class F>
    void run(F&& f) EXCLUDES(m_mutex) {
        util::MutexLock lock(m_mutex);
        if (m_open) {
            f();
        }
    }
    void close() EXCLUDES(m_mutex) {
        util::MutexLock lock(m_mutex);
        m_open = false;
    }

private:
    util::Mutex m_mutex;
    bool m_open GUARDED_BY(m_mutex) = true;
};

class SessionBase : public std::enable_shared_from_this<SessionBase> {
public:
    virtual ~SessionBase() = default;
    // Posted from any thread.
    virtual void post_start() = 0;
    virtual void post_reply(std::uint64_t seq, Response response, bool dropped) = 0;
    virtual void post_admitted(std::uint64_t seq, std::optional<Response> refusal) = 0;
    virtual void post_begin_stop() = 0;
    virtual void post_force_stop() = 0;
};

using SessionMap = std::unordered_map<std::uint64_t, std::shared_ptr<SessionBase>>;

// Bodies of at most this many bytes (heartbeats, most API calls) may use the whole budget; larger
// ones only seven eighths of it, so that they cannot crowd the small ones out.
inline constexpr std::size_t k_small_body = 64 * 1024;

// The bytes that in-memory bodies have reserved, against ServerOptions::max_body_memory. Shared
// by the server and every reservation, which may outlive it (a handler may keep its Request).
struct BodyMemory {
    explicit BodyMemory(std::size_t l) : limit(l) {}
    const std::size_t limit;
    std::atomic<std::size_t> reserved{0};
    // The most all bodies may reserve together while one of them has `bytes`.
    std::size_t cap_for(std::size_t bytes) const { return bytes > k_small_body ? limit - limit / 8 : limit; }
};

// One body's share of the BodyMemory: it grows as the body is known to need more and is given
// back, whole, when the reservation is destroyed. Used from one thread at a time.
class BodyReservation {
public:
    explicit BodyReservation(std::shared_ptr<BodyMemory> memory) : m_memory(std::move(memory)) {}
    ~BodyReservation() { m_memory->reserved.fetch_sub(m_bytes); }
    BodyReservation(const BodyReservation&) = delete;
    BodyReservation& operator=(const BodyReservation&) = delete;

    // Grows the share to `bytes` (a smaller number changes nothing); false, and nothing changed,
    // when the others' shares leave no room for it.
    bool reserve(std::size_t bytes);
    std::size_t bytes() const { return m_bytes; }

private:
    std::shared_ptr<BodyMemory> m_memory;
    std::size_t m_bytes = 0;
};

// What the server and its sessions share.
struct Core {
    ServerOptions options;
    Router router;
    std::shared_ptr<Gate> gate = std::make_shared<Gate>();
    std::atomic<bool> stopping{false};

    Core(ServerOptions o, Router r) : options(std::move(o)), router(std::move(r)) {}

    // Where spooled bodies are written: claimed by start() before any session exists; each spooled
    // body holds it too, so it is removed once the server and the last body are gone.
    std::shared_ptr<const util::ClaimedDir> spool;

    // One of max_file_bodies slots, released when the last copy is dropped; null when all are taken.
    std::shared_ptr<void> take_file_slot();
    // A reservation of `bytes` of max_body_memory; null when that much is not free.
    std::shared_ptr<BodyReservation> reserve_body(std::size_t bytes);
    std::shared_ptr<BodyMemory> body_memory = std::make_shared<BodyMemory>(options.max_body_memory);

    // Registers the session `make(id)` builds under a fresh id, unless `address` already has
    // max_connections_per_client sessions: then returns null without calling `make`.
    std::shared_ptr<SessionBase> add(const std::string& address,
                                     const std::function<std::shared_ptr<SessionBase>(std::uint64_t)>& make)
        EXCLUDES(sessions_mutex);
    // Forgets session `id` (its last reference is dropped outside the lock).
    void remove(std::uint64_t id) EXCLUDES(sessions_mutex);
    std::size_t session_count() EXCLUDES(sessions_mutex);
    std::vector<std::shared_ptr<SessionBase>> snapshot() EXCLUDES(sessions_mutex);
    // Every session still registered, which the registry forgets.
    SessionMap take_all() EXCLUDES(sessions_mutex);
    // Waits until no session is left or `deadline` passes; true when none is left.
    bool wait_empty(std::chrono::steady_clock::time_point deadline) EXCLUDES(sessions_mutex);

private:
    // Counts a session for `address` unless it already has max_connections_per_client.
    bool admit_client_locked(std::uint64_t id, const std::string& address) REQUIRES(sessions_mutex);

    util::Mutex sessions_mutex;
    std::condition_variable_any sessions_cv;
    SessionMap sessions GUARDED_BY(sessions_mutex);
    std::unordered_map<std::uint64_t, std::string> session_client GUARDED_BY(sessions_mutex); // id -> address
    std::unordered_map<std::string, std::size_t> per_client GUARDED_BY(sessions_mutex); // address -> sessions
    std::uint64_t next_id GUARDED_BY(sessions_mutex) = 1;
    // Spooled bodies alive (being received or handled); shared with the slots, which may outlive us.
    std::shared_ptr<std::atomic<std::size_t>> file_bodies = std::make_shared<std::atomic<std::size_t>>(0);
};

// One Responder's shared state: answered at most once; answering when the last copy is dropped.
struct ReplyState {
    std::shared_ptr<Gate> gate;
    std::weak_ptr<SessionBase> session;
    std::uint64_t seq = 0;
    std::atomic<bool> answered{false};

    void answer(Response response, bool dropped);
    ~ReplyState();
};

// One admission's shared state: decided at most once; refused (500) when the last copy is dropped.
struct AdmitState {
    std::shared_ptr<Gate> gate;
    std::weak_ptr<SessionBase> session;
    std::uint64_t seq = 0;
    std::atomic<bool> decided{false};

    void decide(std::optional<Response> refusal);
    ~AdmitState();
};

} // namespace gpupool::net::detail
