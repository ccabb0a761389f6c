#include "core/net/server_core.hpp"

namespace gpupool::net::detail {

std::shared_ptr<void> Core::take_file_slot() {
    auto counter = file_bodies;
    std::size_t n = counter->load();
    do {
        if (n >= options.max_file_bodies) {
            return nullptr;
        }
    } while (!counter->compare_exchange_weak(n, n + 1));
    return std::shared_ptr<void>(counter.get(), [counter](void*) { counter->fetch_sub(1); });
}

bool BodyReservation::reserve(std::size_t bytes) {
    if (bytes <= m_bytes) {
        return true;
    }
    const std::size_t more = bytes - m_bytes;
    const std::size_t cap = m_memory->cap_for(bytes);
    std::size_t now = m_memory->reserved.load();
    do {
        if (now > cap || more > cap - now) {
            return false;
        }
    } while (!m_memory->reserved.compare_exchange_weak(now, now + more));
    m_bytes = bytes;
    return true;
}

std::shared_ptr<BodyReservation> Core::reserve_body(std::size_t bytes) {
    auto r = std::make_shared<BodyReservation>(body_memory);
    if (!r->reserve(bytes)) {
        return nullptr;
    }
    return r;
}

bool Core::admit_client_locked(std::uint64_t id, const std::string& address) {
    std::size_t& n = per_client[address];
    if (options.max_connections_per_client != 0 && n >= options.max_connections_per_client) {
        if (n == 0) {
            per_client.erase(address);
        }
        return false;
    }
    ++n;
    session_client.emplace(id, address);
    return true;
}

std::shared_ptr<SessionBase> Core::add(const std::string& address,
                                       const std::function<std::shared_ptr<SessionBase>(std::uint64_t)>& make) {
    util::MutexLock lock(sessions_mutex);
    std::uint64_t id = next_id;
    if (!admit_client_locked(id, address)) {
        return nullptr;
    }
    ++next_id;
    auto session = make(id);
    sessions.emplace(id, session);
    return session;
}

std::size_t Core::session_count() {
    util::MutexLock lock(sessions_mutex);
    return sessions.size();
}

std::vector<std::shared_ptr<SessionBase>> Core::snapshot() {
    util::MutexLock lock(sessions_mutex);
    std::vector<std::shared_ptr<SessionBase>> out;
    out.reserve(sessions.size());
    for (auto& [id, s] : sessions) {
        out.push_back(s);
    }
    return out;
}

SessionMap Core::take_all() {
    SessionMap out;
    util::MutexLock lock(sessions_mutex);
    out.swap(sessions);
    return out;
}

void Core::remove(std::uint64_t id) {
    std::shared_ptr<SessionBase> doomed; // destroyed outside the lock
    {
        util::MutexLock lock(sessions_mutex);
        auto it = sessions.find(id);
        if (it == sessions.end()) {
            return;
        }
        doomed = std::move(it->second);
        sessions.erase(it);
        if (auto c = session_client.find(id); c != session_client.end()) {
            if (auto p = per_client.find(c->second); p != per_client.end() && --p->second == 0) {
                per_client.erase(p);
            }
            session_client.erase(c);
        }
        if (sessions.empty()) {
            sessions_cv.notify_all();
        }
    }
}

bool Core::wait_empty(std::chrono::steady_clock::time_point deadline) {
    util::MutexLock lock(sessions_mutex);
    // wait_until with a predicate, spelt out so that the analysis sees `sessions` read under the lock.
    while (!sessions.empty()) {
        if (sessions_cv.wait_until(lock, deadline) == std::cv_status::timeout) {
            return sessions.empty();
        }
    }
    return true;
}

void ReplyState::answer(Response response, bool dropped) {
    if (answered.exchange(true)) {
        return;
    }
    gate->run([&] {
        if (auto s = session.lock()) {
            s->post_reply(seq, std::move(response), dropped);
        }
    });
}

ReplyState::~ReplyState() {
    if (!answered.load()) {
        answer(Response{}, true);
    }
}

void AdmitState::decide(std::optional<Response> refusal) {
    if (decided.exchange(true)) {
        return;
    }
    gate->run([&] {
        if (auto s = session.lock()) {
            s->post_admitted(seq, std::move(refusal));
        }
    });
}

AdmitState::~AdmitState() {
    if (!decided.load()) {
        decide(json_error(500, "no_response", "the server dropped this request without deciding on it"));
    }
}

} // namespace gpupool::net::detail
