// Exact parsing and printing of the pool's resource quantities.
//
// Resources are fixed-point integers everywhere in gpupool: GPU share and CPU in milli-units
// (1000 = one GPU or one core), memory and disk in MiB, durations in seconds. They are parsed
// from decimal text exactly (never through a truncated double: "0.57" is 570 milli, not 569) and
// a double that came from a TOML float is rounded to the nearest unit, refusing values finer than
// the unit. Memory rounds up to whole MiB so a request is never under-provisioned.
// All functions are pure and thread-safe; failures are Errors with ErrorCode::invalid_input and a
// message that says what was expected.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace gpupool::resources {

inline constexpr std::int64_t k_milli_per_unit = 1000;
inline constexpr std::int64_t k_milli_per_gpu = k_milli_per_unit; // a whole GPU, in milli-GPU

// The share of a GPU with `gpu_total_mib` of memory that `memory_mib` of it is, in milli-GPU,
// rounded up (a job asking for memory never gets less than it asked for). The one place this
// rounding lives: the scheduler packs with it, the ledger bills with it, the worker caps with it.
// `gpu_total_mib` must be positive.
constexpr std::int64_t gpu_milli_for_memory(std::int64_t memory_mib, std::int64_t gpu_total_mib) {
    return (memory_mib * k_milli_per_gpu + gpu_total_mib - 1) / gpu_total_mib;
}
inline constexpr std::int64_t k_max_units = 1'000'000'000'000; // largest milli-unit quantity, in units
inline constexpr std::int64_t k_max_memory_mib = std::int64_t{1} << 30; // 1 PiB
inline constexpr std::int64_t k_max_duration_s = 30LL * 24 * 3600;      // 30 days

// "0.25", "1", "25%" -> milli-units (250, 1000, 250). At most three significant decimals (trailing
// zeros are fine), at most 18 digits, at most k_max_units.
Result<std::int64_t> parse_milli(std::string_view text);

// A TOML float or integer -> milli-units, rounded to the nearest milli; values that need more than
// three decimals (0.0005) are refused rather than silently rounded to something else.
Result<std::int64_t> milli_from_double(double value);

// "16GiB", "512MiB", "1.5GiB", "16GB", "16G" (= GiB, as docker), "16 GiB" -> MiB, rounded up. A
// unit is required: a bare number is ambiguous.
Result<std::int64_t> parse_memory_mib(std::string_view text);

// "90m", "1h30m", "45s", "2d", "1.5h", "5 min", "1h 30m" -> seconds. A unit is required on every
// part: s, m, h, d or a word for one (sec, second, min, minute, hr, hour, day, each also with a
// plural s), in lower case ("M" could be read as months). Blanks may stand between a number and
// its unit and between parts.
Result<std::int64_t> parse_duration_s(std::string_view text);

// Printing, in the shortest exact form: 250 -> "0.25", 1000 -> "1"; 16384 -> "16GiB",
// 1536 -> "1.5GiB"; 5400 -> "1h30m".
std::string format_milli(std::int64_t milli);
std::string format_memory_mib(std::int64_t mib);
std::string format_duration_s(std::int64_t seconds);

} // namespace gpupool::resources
