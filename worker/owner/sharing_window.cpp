#include "worker/owner/sharing_window.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <tuple>

namespace gpupool::worker {

namespace {

using std::chrono::days;
using std::chrono::sys_days;
using std::chrono::year_month_day;

constexpr int k_horizon_days = 9; // today - 1 .. today + 8: one full week after any window's start

std::tm local_tm(std::time_t t) {
    std::tm tm{};
    localtime_r(&t, &tm);
    return tm;
}

auto wall_of(const std::tm& tm) {
    return std::make_tuple(tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::int64_t instant_of(sys_days day, int minute) {
    const year_month_day ymd{day};
    return local_instant(static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                         static_cast<unsigned>(ymd.day()), minute);
}

struct Span {
    std::int64_t start = 0;
    std::int64_t end = 0;
};

} // namespace

std::int64_t local_instant(int year, unsigned month, unsigned day, int minute) {
    if (minute >= 24 * 60) {
        const sys_days next =
            sys_days{std::chrono::year{year} / std::chrono::month{month} / std::chrono::day{day}} + days{1};
        return instant_of(next, minute - 24 * 60);
    }
    std::tm want{};
    want.tm_year = year - 1900;
    want.tm_mon = static_cast<int>(month) - 1;
    want.tm_mday = static_cast<int>(day);
    want.tm_hour = minute / 60;
    want.tm_min = minute % 60;
    const auto target = wall_of(want);
    std::optional<std::time_t> best;
    std::time_t lo = 0;
    std::time_t hi = 0;
    bool first = true;
    for (int dst : {0, 1}) {
        std::tm c = want;
        c.tm_isdst = dst;
        const std::time_t t = std::mktime(&c);
        lo = first ? t : std::min(lo, t);
        hi = first ? t : std::max(hi, t);
        first = false;
        if (wall_of(local_tm(t)) == target && (!best || t < *best)) {
            best = t; // the clock shows exactly this time then (the earlier one when it shows it twice)
        }
    }
    if (best) {
        return *best;
    }
    // Skipped by the clock: the first instant it shows the time or later. Within a few hours of a
    // gap the local clock only moves forward, so the predicate is monotonic there.
    lo -= 3 * 3600;
    hi += 3 * 3600;
    while (lo + 1 < hi) {
        const std::time_t mid = lo + (hi - lo) / 2;
        if (wall_of(local_tm(mid)) >= target) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return hi;
}

WindowVerdict sharing_window_at(const std::vector<ShareWindow>& windows, std::int64_t unix_ms) {
    if (windows.empty()) {
        return {true, std::nullopt};
    }
    const std::int64_t now = unix_ms >= 0 ? unix_ms / 1000 : -((-unix_ms + 999) / 1000);
    const std::tm today_tm = local_tm(static_cast<std::time_t>(now));
    const sys_days today{std::chrono::year{today_tm.tm_year + 1900} /
                         std::chrono::month{unsigned(today_tm.tm_mon + 1)} /
                         std::chrono::day{unsigned(today_tm.tm_mday)}};
    std::vector<Span> spans;
    for (int k = -1; k < k_horizon_days; ++k) {
        const sys_days d = today + days{k};
        const unsigned wd = std::chrono::weekday{d}.c_encoding();
        for (const auto& w : windows) {
            if ((w.days & (1u << wd)) == 0) {
                continue;
            }
            Span s;
            if (w.all_day) {
                s = {instant_of(d, 0), instant_of(d + days{1}, 0)};
            } else {
                s.start = instant_of(d, w.from_min);
                s.end = w.to_min > w.from_min ? instant_of(d, w.to_min) : instant_of(d + days{1}, w.to_min);
            }
            if (s.end > s.start) {
                spans.push_back(s);
            }
        }
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    std::vector<Span> joined;
    for (const auto& s : spans) {
        if (!joined.empty() && s.start <= joined.back().end) {
            joined.back().end = std::max(joined.back().end, s.end);
        } else {
            joined.push_back(s);
        }
    }
    const std::int64_t horizon = instant_of(today + days{k_horizon_days - 1}, 0);
    for (const auto& s : joined) {
        if (s.start <= now && now < s.end) {
            if (s.end >= horizon) {
                return {true, std::nullopt}; // open for a week on end: the week has no gap
            }
            return {true, s.end * 1000};
        }
        if (s.start > now) {
            return {false, s.start * 1000};
        }
    }
    return {false, std::nullopt};
}

} // namespace gpupool::worker
