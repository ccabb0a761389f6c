#include "worker/agent/drain.hpp"

#include <algorithm>

namespace gpupool::worker {

Drain::Step Drain::step(std::int64_t now_ms, bool hurry, int active, bool settled) {
    Step s;
    if (hurry && (!m_deadline_ms || *m_deadline_ms > now_ms)) {
        m_deadline_ms = now_ms;
        m_give_up_at_ms.reset();
        s.hurried = true;
    }
    if (!m_deadline_ms) {
        m_deadline_ms = now_ms + m_grace.count();
        s.started = true;
    }
    s.stop_running = now_ms >= *m_deadline_ms;
    if (settled) {
        s.done = true;
        return s;
    }
    if (active == 0) {
        if (!m_give_up_at_ms) {
            m_give_up_at_ms = now_ms + (hurry ? std::min(m_give_up_after, k_hurried_give_up) : m_give_up_after).count();
        } else if (now_ms >= *m_give_up_at_ms) {
            s.done = true;
            s.gave_up = true;
        }
    }
    return s;
}

} // namespace gpupool::worker
