// Wall times as people read them, written in one place: the UTC forms the CLI, the coordinator's
// restore and the worker's pause file print, the owner's local form, and the UTC dates the CLI
// accepts. Times are Unix milliseconds; a negative one (before 1970) is rounded down to its second.
// Pure functions, thread-safe as far as gmtime_r and localtime_r are (the local form reads TZ: do
// not change TZ while another thread formats).
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <string>

namespace gpupool::util {

// "2026-12-07 18:00:05": UTC, to the second.
std::string utc_text(std::int64_t unix_ms);

// "2026-12-07 18:00:05 UTC".
std::string utc_text_zoned(std::int64_t unix_ms);

// "2026-12-07 18:00:05.042 UTC": to the millisecond.
std::string utc_text_ms(std::int64_t unix_ms);

// "Mon 2026-12-07 19:00 CET": in the process's time zone (TZ), to the minute, for a worker's owner.
std::string local_time_text(std::int64_t unix_ms);

// "2026-12-31" (its 00:00 UTC) or "2026-12-31T18:00:00Z" as Unix milliseconds; anything else is an
// invalid_input Error that shows both forms and names `field`.
Result<std::int64_t> parse_utc_date_ms(const std::string& text, const std::string& field);

} // namespace gpupool::util
