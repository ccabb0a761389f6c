// The wall-time texts (core/util/time_text.hpp): fixed epochs to exact strings, in UTC and in a
// time zone set for the test; and the UTC dates the CLI accepts.
#include "core/util/time_text.hpp"
#include "tests/time_zone.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_time_text {

using namespace gpupool;

namespace {

// Epochs computed outside the code under test (Python's calendar.timegm), in milliseconds.
constexpr std::int64_t k_leap_day_noonish = 1709210096'000; // 2024-02-29 12:34:56 UTC
constexpr std::int64_t k_year_end = 1798761599'000;         // 2026-12-31 23:59:59 UTC
constexpr std::int64_t k_winter_evening = 1796666400'000;   // 2026-12-07 18:00:00 UTC, a Monday
constexpr std::int64_t k_summer_noon = 1782907200'000;      // 2026-07-01 12:00:00 UTC, a Wednesday

} // namespace

TEST_CASE("utc_text writes UTC to the second, with and without the zone's name", "[time_text]") {
    CHECK(util::utc_text(0) == "1970-01-01 00:00:00");
    CHECK(util::utc_text_zoned(0) == "1970-01-01 00:00:00 UTC");
    CHECK(util::utc_text(k_leap_day_noonish) == "2024-02-29 12:34:56");
    CHECK(util::utc_text(k_leap_day_noonish + 999) == "2024-02-29 12:34:56"); // milliseconds are dropped, not rounded
    CHECK(util::utc_text_zoned(k_leap_day_noonish) == "2024-02-29 12:34:56 UTC");
    CHECK(util::utc_text(k_year_end) == "2026-12-31 23:59:59");
    CHECK(util::utc_text(k_year_end + 1000) == "2027-01-01 00:00:00");
}

TEST_CASE("utc_text_ms keeps the milliseconds, zero-padded", "[time_text]") {
    CHECK(util::utc_text_ms(0) == "1970-01-01 00:00:00.000 UTC");
    CHECK(util::utc_text_ms(k_leap_day_noonish + 42) == "2024-02-29 12:34:56.042 UTC");
    CHECK(util::utc_text_ms(k_year_end + 999) == "2026-12-31 23:59:59.999 UTC");
    CHECK(util::utc_text_ms(k_year_end + 1000) == "2027-01-01 00:00:00.000 UTC");
}

TEST_CASE("a time before 1970 is rounded down to its second, not towards zero", "[time_text]") {
    CHECK(util::utc_text(-1) == "1969-12-31 23:59:59");
    CHECK(util::utc_text_ms(-1) == "1969-12-31 23:59:59.999 UTC");
    CHECK(util::utc_text_ms(-1000) == "1969-12-31 23:59:59.000 UTC");
}

TEST_CASE("local_time_text writes the weekday, the minute and the zone of TZ", "[time_text]") {
    {
        test::ScopedTimeZone berlin("Europe/Berlin");
        CHECK(util::local_time_text(k_winter_evening) == "Mon 2026-12-07 19:00 CET");
        CHECK(util::local_time_text(k_summer_noon + 59'999) == "Wed 2026-07-01 14:00 CEST"); // seconds are dropped
        CHECK(util::local_time_text(k_year_end) == "Fri 2027-01-01 00:59 CET"); // the new year comes earlier
    }
    {
        test::ScopedTimeZone utc("UTC");
        CHECK(util::local_time_text(0) == "Thu 1970-01-01 00:00 UTC");
        CHECK(util::local_time_text(k_leap_day_noonish) == "Thu 2024-02-29 12:34 UTC");
    }
}

TEST_CASE("parse_utc_date_ms reads a date or a UTC time and names the field otherwise", "[time_text]") {
    auto day = util::parse_utc_date_ms("2024-02-29", "--expires");
    REQUIRE(day.has_value());
    CHECK(*day == 1709164800'000);
    auto evening = util::parse_utc_date_ms("2026-12-31T18:00:00Z", "--expires");
    REQUIRE(evening.has_value());
    CHECK(*evening == 1798740000'000);
    CHECK(util::utc_text(*evening) == "2026-12-31 18:00:00"); // and back

    for (const char* bad :
         {"2026-13-01", "2026-12-31T18:00:00", "2026-12-31 18:00:00Z", "2026-12-00", "yesterday", ""}) {
        INFO(bad);
        auto r = util::parse_utc_date_ms(bad, "--since");
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == ErrorCode::invalid_input);
        CHECK(r.error().field == "--since");
        CHECK(r.error().message ==
              "expected a UTC date like 2026-12-31 or 2026-12-31T18:00:00Z, got `" + std::string(bad) + "`");
    }
}

} // namespace test_time_text
} // namespace
