// Clock: where the coordinator and the worker get the time, so that leases, timeouts and sharing
// windows can be tested without waiting. Times are Unix milliseconds. SystemClock is the real one;
// ManualClock is set by tests. Both are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpupool::util {

class Clock {
public:
    virtual ~Clock() = default;
    virtual std::int64_t now_ms() const = 0;
};

class SystemClock final : public Clock {
public:
    std::int64_t now_ms() const override {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    }
};

class ManualClock final : public Clock {
public:
    explicit ManualClock(std::int64_t start_ms = 1'000'000) : m_now(start_ms) {}
    std::int64_t now_ms() const override { return m_now.load(); }
    void advance_ms(std::int64_t ms) { m_now += ms; }
    void set_ms(std::int64_t ms) { m_now = ms; }

private:
    std::atomic<std::int64_t> m_now;
};

} // namespace gpupool::util
