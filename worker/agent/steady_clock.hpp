// SteadyClock: the worker's real util::Clock. The agent measures only intervals (heartbeats,
// backoff, grace periods, max_runtime), so it reads a monotonic clock: a wall clock stepped by NTP
// must not kill a job for max_runtime or stall its heartbeats. Its epoch is arbitrary (not Unix
// time, unlike util::SystemClock). Thread-safe.
#pragma once

#include "core/util/clock.hpp"

#include <chrono>

namespace gpupool::worker {

class SteadyClock final : public util::Clock {
public:
    std::int64_t now_ms() const override {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
};

} // namespace gpupool::worker
