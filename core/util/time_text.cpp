#include "core/util/time_text.hpp"

#include <cstdio>
#include <ctime>

namespace gpupool::util {

namespace {

// The whole seconds and the milliseconds past them, rounded down (so -1 ms is 23:59:59.999).
std::time_t seconds_of(std::int64_t unix_ms) {
    return static_cast<std::time_t>(unix_ms / 1000 - (unix_ms % 1000 < 0 ? 1 : 0));
}

int millis_of(std::int64_t unix_ms) {
    return static_cast<int>((unix_ms % 1000 + 1000) % 1000);
}

std::tm utc_tm(std::int64_t unix_ms) {
    const std::time_t t = seconds_of(unix_ms);
    std::tm tm{};
    gmtime_r(&t, &tm);
    return tm;
}

} // namespace

std::string utc_text(std::int64_t unix_ms) {
    const std::tm tm = utc_tm(unix_ms);
    char buf[32];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return std::string(buf, n);
}

std::string utc_text_zoned(std::int64_t unix_ms) {
    return utc_text(unix_ms) + " UTC";
}

std::string utc_text_ms(std::int64_t unix_ms) {
    char ms_part[8];
    std::snprintf(ms_part, sizeof ms_part, ".%03d", millis_of(unix_ms));
    return utc_text(unix_ms) + ms_part + " UTC";
}

std::string local_time_text(std::int64_t unix_ms) {
    const std::time_t t = seconds_of(unix_ms);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[64];
    const std::size_t n = std::strftime(buf, sizeof buf, "%a %Y-%m-%d %H:%M %Z", &tm);
    return std::string(buf, n);
}

Result<std::int64_t> parse_utc_date_ms(const std::string& text, const std::string& field) {
    std::tm tm{};
    int n = 0;
    char z = 0;
    const int got = std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n);
    bool ok = got == 3 && static_cast<std::size_t>(n) == text.size();
    if (!ok && got == 3) {
        int m = 0;
        ok = std::sscanf(text.c_str() + n, "T%2d:%2d:%2d%c%n", &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &z, &m) == 4 &&
             z == 'Z' && static_cast<std::size_t>(n + m) == text.size();
    }
    if (!ok || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31) {
        return make_error(ErrorCode::invalid_input,
                          "expected a UTC date like 2026-12-31 or 2026-12-31T18:00:00Z, got `" + text + "`", field);
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

} // namespace gpupool::util
