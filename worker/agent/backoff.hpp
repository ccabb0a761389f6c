// Backoff: how long the worker waits before it tries the coordinator again after a failure.
//
// Exponential backoff with "equal jitter" (half fixed, half random): the n-th consecutive failure
// waits a uniformly random time in [d/2, d] for d = initial*2^(n-1), capped at `max`. Pure apart
// from the seedable rng, so two workers do not retry in lockstep. Not thread-safe (one per thread).
#pragma once

#include <chrono>
#include <cstdint>

namespace gpupool::worker {

class Backoff {
public:
    Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, std::uint64_t seed);
    std::chrono::milliseconds next_delay(); // records a failure and returns the wait
    void reset();
    int failures() const { return m_failures; }

private:
    std::chrono::milliseconds m_initial;
    std::chrono::milliseconds m_max;
    std::uint64_t m_state;
    int m_failures = 0;
};

// A seed for a Backoff's jitter that differs between processes and between starts.
std::uint64_t backoff_seed();

} // namespace gpupool::worker
