// Sharing windows in real time zones: nights across midnight, the week's end, all-day windows, and
// the days the clocks change (Europe/London and America/New_York, spring and autumn).
#include "tests/time_zone.hpp"
#include "worker/owner/sharing_window.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_sharing_window {

using namespace gpupool;
using worker::ShareWindow;

namespace {

// Unix ms of a UTC wall time (computed without the code under test).
std::int64_t utc(int y, int mo, int d, int h, int mi) {
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

ShareWindow window(const char* days, int from_h, int from_m, int to_h, int to_m) {
    return {worker::parse_days(days).value(), from_h * 60 + from_m, to_h * 60 + to_m, false, 0};
}

ShareWindow all_day(const char* days) {
    return {worker::parse_days(days).value(), 0, 0, true, 0};
}

} // namespace

TEST_CASE("windows: no windows is always open, and so is a week with no gap", "[owner][window]") {
    test::ScopedTimeZone z("Europe/London");
    const auto none = worker::sharing_window_at({}, utc(2026, 12, 1, 12, 0));
    CHECK(none.open);
    CHECK_FALSE(none.changes_at_ms);
    const auto always = worker::sharing_window_at({all_day("all")}, utc(2026, 12, 1, 12, 0));
    CHECK(always.open);
    CHECK_FALSE(always.changes_at_ms);
    // Nights every day plus days every day: no gap either.
    const auto joined =
        worker::sharing_window_at({window("all", 19, 0, 8, 0), window("all", 8, 0, 19, 0)}, utc(2026, 12, 1, 12, 0));
    CHECK(joined.open);
    CHECK_FALSE(joined.changes_at_ms);
}

TEST_CASE("windows: weeknights cross midnight and belong to the day they start", "[owner][window]") {
    test::ScopedTimeZone z("Europe/London"); // December: GMT = UTC
    const std::vector<ShareWindow> nights{window("mon-fri", 19, 0, 8, 0)};
    // Tuesday 2026-12-01 noon: closed until 19:00.
    auto v = worker::sharing_window_at(nights, utc(2026, 12, 1, 12, 0));
    CHECK_FALSE(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 1, 19, 0));
    // Tuesday 20:00: open until Wednesday 08:00.
    v = worker::sharing_window_at(nights, utc(2026, 12, 1, 20, 0));
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 2, 8, 0));
    // Wednesday 07:59: still Tuesday's night.
    CHECK(worker::sharing_window_at(nights, utc(2026, 12, 2, 7, 59)).open);
    // Friday night runs into Saturday morning.
    v = worker::sharing_window_at(nights, utc(2026, 12, 5, 7, 0));
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 5, 8, 0));
    // Saturday 09:00: closed over the weekend, until Monday 19:00.
    v = worker::sharing_window_at(nights, utc(2026, 12, 5, 9, 0));
    CHECK_FALSE(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 7, 19, 0));
    // Monday 07:00: Sunday has no night, so closed.
    v = worker::sharing_window_at(nights, utc(2026, 12, 7, 7, 0));
    CHECK_FALSE(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 7, 19, 0));
}

TEST_CASE("windows: across the week's end, Sunday into Monday", "[owner][window]") {
    test::ScopedTimeZone z("Europe/London");
    // Sunday 22:00-24:00 and all of Monday join into one stretch.
    const std::vector<ShareWindow> w{window("sun", 22, 0, 24, 0), all_day("mon")};
    auto v = worker::sharing_window_at(w, utc(2026, 12, 6, 23, 0));
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 8, 0, 0));
    // Weekends all day: Sunday 23:59 is open until Monday 00:00; Monday 00:00 is closed until Saturday.
    const std::vector<ShareWindow> weekends{all_day("weekends")};
    v = worker::sharing_window_at(weekends, utc(2026, 12, 6, 23, 59));
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 7, 0, 0));
    v = worker::sharing_window_at(weekends, utc(2026, 12, 7, 0, 0));
    CHECK_FALSE(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 12, 0, 0));
    // A Sunday night window (sun 23:00-02:00) ends on Monday.
    v = worker::sharing_window_at({window("sun", 23, 0, 2, 0)}, utc(2026, 12, 7, 1, 0));
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 12, 7, 2, 0));
}

TEST_CASE("windows: London's spring-forward and fall-back days", "[owner][window]") {
    test::ScopedTimeZone z("Europe/London");
    // 2026-03-29 01:00 GMT the clocks jump to 02:00 BST: 01:30 never shows; the window opens at the jump.
    CHECK(worker::local_instant(2026, 3, 29, 90) * 1000 == utc(2026, 3, 29, 1, 0));
    const std::vector<ShareWindow> w{window("all", 1, 30, 3, 0)};
    auto v = worker::sharing_window_at(w, utc(2026, 3, 29, 0, 30));
    CHECK_FALSE(v.open);
    CHECK(v.changes_at_ms == utc(2026, 3, 29, 1, 0));
    v = worker::sharing_window_at(w, utc(2026, 3, 29, 1, 30)); // 02:30 BST
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 3, 29, 2, 0)); // 03:00 BST
    // A summer evening window is in BST: 19:00 BST = 18:00 UTC.
    v = worker::sharing_window_at({window("all", 19, 0, 23, 0)}, utc(2026, 6, 1, 12, 0));
    CHECK(v.changes_at_ms == utc(2026, 6, 1, 18, 0));
    // 2026-10-25 02:00 BST the clocks go back to 01:00 GMT: 01:30 shows twice; the first counts.
    CHECK(worker::local_instant(2026, 10, 25, 90) * 1000 == utc(2026, 10, 25, 0, 30));
    // A night across the change is an hour longer: Saturday 22:00 BST to Sunday 06:00 GMT.
    v = worker::sharing_window_at({window("sat", 22, 0, 6, 0)}, utc(2026, 10, 24, 21, 30));
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 10, 25, 6, 0));
}

TEST_CASE("windows: New York's spring-forward and fall-back days", "[owner][window]") {
    test::ScopedTimeZone z("America/New_York");
    // 2026-03-08 02:00 EST -> 03:00 EDT: 02:30 opens at 03:00 EDT (07:00 UTC).
    CHECK(worker::local_instant(2026, 3, 8, 150) * 1000 == utc(2026, 3, 8, 7, 0));
    // Saturday 22:00 EST to Sunday 06:00 EDT: seven hours, ending 10:00 UTC.
    const std::vector<ShareWindow> w{window("sat", 22, 0, 6, 0)};
    auto v = worker::sharing_window_at(w, utc(2026, 3, 8, 3, 30)); // Sat 22:30 EST
    CHECK(v.open);
    CHECK(v.changes_at_ms == utc(2026, 3, 8, 10, 0));
    // 2026-11-01 02:00 EDT -> 01:00 EST: the first 01:30 is 05:30 UTC.
    CHECK(worker::local_instant(2026, 11, 1, 90) * 1000 == utc(2026, 11, 1, 5, 30));
    // Weekdays 09:00-17:00 after the change: Monday 2026-11-02 09:00 EST = 14:00 UTC.
    v = worker::sharing_window_at({window("weekdays", 9, 0, 17, 0)}, utc(2026, 11, 1, 12, 0));
    CHECK_FALSE(v.open);
    CHECK(v.changes_at_ms == utc(2026, 11, 2, 14, 0));
}

} // namespace test_sharing_window
} // namespace
