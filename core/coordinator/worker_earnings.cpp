// The UTC day and week of worker_earnings.hpp (the sums themselves: credit_ops.cpp).
#include "core/coordinator/worker_earnings.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"

#include <set>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

constexpr std::int64_t k_day = 86'400'000;

// Floor division: times before 1970 still land on the day they fall in.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

} // namespace

std::int64_t utc_day_start_ms(std::int64_t now_ms) {
    return floor_div(now_ms, k_day) * k_day;
}

std::int64_t utc_week_start_ms(std::int64_t now_ms) {
    const std::int64_t day = floor_div(now_ms, k_day);
    // Day 0 (1970-01-01) was a Thursday: Monday is 3 days before it.
    const std::int64_t since_monday = ((day + 3) % 7 + 7) % 7;
    return (day - since_monday) * k_day;
}

} // namespace gpupool::coordinator
