#include "worker/agent/backoff.hpp"

#include <algorithm>

#include <unistd.h>

namespace gpupool::worker {

using std::chrono::milliseconds;

Backoff::Backoff(milliseconds initial, milliseconds max, std::uint64_t seed)
    : m_initial(initial), m_max(max), m_state(seed ? seed : 0x9e3779b97f4a7c15ULL) {}

milliseconds Backoff::next_delay() {
    ++m_failures;
    std::int64_t ceiling = m_initial.count();
    for (int i = 1; i < m_failures && ceiling < m_max.count(); ++i) {
        ceiling *= 2;
    }
    ceiling = std::min<std::int64_t>(ceiling, m_max.count());
    // xorshift64*: good enough for jitter, deterministic under a seed.
    m_state ^= m_state >> 12;
    m_state ^= m_state << 25;
    m_state ^= m_state >> 27;
    const std::uint64_t r = m_state * 0x2545F4914F6CDD1DULL;
    const std::int64_t half = ceiling / 2;
    const std::int64_t span = ceiling - half + 1;
    return milliseconds(half + static_cast<std::int64_t>(r % static_cast<std::uint64_t>(std::max<std::int64_t>(span, 1))));
}

void Backoff::reset() { m_failures = 0; }

std::uint64_t backoff_seed() {
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           static_cast<std::uint64_t>(getpid());
}

} // namespace gpupool::worker
