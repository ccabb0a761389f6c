// Sharing windows: whether the owner's weekly hours ([[share.window]] in worker.toml) are open at
// a given time, and when that next changes. Pure arithmetic over an explicit time point; the time
// zone is the process's (TZ, read through localtime_r/mktime), so tests set TZ to cover DST.
//
// Rules:
// - No windows: always open, and it never changes (changes_at_ms is nullopt).
// - A window is open from `from` to `to` on each of its days; one whose `to` is not after its
//   `from` crosses midnight and belongs to the day it starts on (Friday 19:00-08:00 ends Saturday
//   08:00); all_day covers the day from its midnight to the next. Overlapping and touching windows
//   join (Sunday 22:00-24:00 and Monday all day are one stretch).
// - Local times that do not exist (the hour skipped when clocks go forward) mean the first instant
//   the clock shows that time or later (02:30 on a spring-forward day opens at 03:00); a time that
//   happens twice (clocks go back) means its first occurrence.
// - When the windows leave no gap in a week, the verdict is open with no change.
// Thread-safe as far as localtime_r/mktime are (they read TZ; do not change TZ concurrently).
#pragma once

#include "worker/owner/owner_config.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace gpupool::worker {

struct WindowVerdict {
    bool open = true;
    std::optional<std::int64_t> changes_at_ms{}; // Unix ms when `open` flips next; nullopt: never
};

WindowVerdict sharing_window_at(const std::vector<ShareWindow>& windows, std::int64_t unix_ms);

// The first instant (Unix seconds) the local clock shows `minute` (0..1440) of the day `y-m-d` or
// later, by the rules above. Exposed for tests.
std::int64_t local_instant(int year, unsigned month, unsigned day, int minute);

} // namespace gpupool::worker
