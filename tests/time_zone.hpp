// Tests that read the process's local time: sets TZ for one scope and puts the old value back.
// Not thread-safe (TZ is the process's); tests run one at a time within a process.
#pragma once

#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

namespace gpupool::test {

class ScopedTimeZone {
public:
    explicit ScopedTimeZone(const char* tz) {
        if (const char* old = std::getenv("TZ")) {
            m_old = old;
        }
        setenv("TZ", tz, 1);
        tzset();
    }
    ~ScopedTimeZone() {
        if (m_old) {
            setenv("TZ", m_old->c_str(), 1);
        } else {
            unsetenv("TZ");
        }
        tzset();
    }
    ScopedTimeZone(const ScopedTimeZone&) = delete;
    ScopedTimeZone& operator=(const ScopedTimeZone&) = delete;

private:
    std::optional<std::string> m_old;
};

} // namespace gpupool::test
