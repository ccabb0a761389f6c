// HandedOut: the assignments the poll thread has handed to the agent, said as `known` in the next
// polls (POST /v1/workers/poll `{known: [ids]}`) so that the coordinator, which re-sends an assignment
// until its start report arrives, does not answer a poll with one the worker holds already.
//
// An id is kept for `keep_ms` (by then its start has reached the coordinator) and at most the newest
// `k_max` are said: the coordinator refuses a poll naming more than 1,024, and at a hundred jobs a
// second a minute of them is thousands (#12: a busy worker's polls were refused until they aged out).
// One forgotten too early costs at most a repeated answer that take() ignores. Pure; one thread.
#pragma once

#include "core/util/ids.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace gpupool::worker {

class HandedOut {
public:
    static constexpr std::size_t k_max = 1024; // the coordinator's cap on `known`

    explicit HandedOut(std::int64_t keep_ms) : m_keep_ms(keep_ms) {}

    // Notes an assignment handed over at `now_ms`; true when it was not held already.
    bool note(AttemptId id, std::int64_t now_ms) {
        auto [it, fresh] = m_at.try_emplace(id, now_ms);
        if (fresh) {
            m_order.emplace(now_ms, id);
        }
        return fresh;
    }

    // The ids to say as `known` now, newest first: drops those older than keep_ms, then all but the
    // newest k_max.
    std::vector<AttemptId> known(std::int64_t now_ms) {
        while (!m_order.empty() && (now_ms - m_order.begin()->first > m_keep_ms || m_order.size() > k_max)) {
            m_at.erase(m_order.begin()->second);
            m_order.erase(m_order.begin());
        }
        std::vector<AttemptId> out;
        out.reserve(m_order.size());
        for (auto it = m_order.rbegin(); it != m_order.rend(); ++it) {
            out.push_back(it->second);
        }
        return out;
    }

    std::size_t size() const { return m_at.size(); }

private:
    std::int64_t m_keep_ms;
    std::map<AttemptId, std::int64_t> m_at;                  // id -> when handed
    std::set<std::pair<std::int64_t, AttemptId>> m_order; // (when, id), oldest first
};

} // namespace gpupool::worker
