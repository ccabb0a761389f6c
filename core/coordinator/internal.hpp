// Helpers shared by the files that implement Coordinator (coordinator.cpp, tokens.cpp, jobs.cpp,
// workers.cpp, scheduling.cpp, budgets.cpp, credits.cpp): error constructors, time windows, credit
// amounts in words. Not part of the coordinator's interface; include it only from
// core/coordinator/*.cpp.
#pragma once

#include "core/credits/money.hpp"
#include "core/store/records.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace gpupool::coordinator::detail {

inline Error denied(const std::string& what) { return make_error(ErrorCode::forbidden, what); }
inline Error not_found(const std::string& what) { return make_error(ErrorCode::not_found, what); }
inline Error invalid(const std::string& what, const std::string& field = {}) {
    return make_error(ErrorCode::invalid_input, what, field);
}

using credits::format_credits;
using credits::Micro;

inline constexpr std::int64_t k_day_ms = 24LL * 3600 * 1000; // budget windows: rolling day and week
inline constexpr std::int64_t k_week_ms = 7 * k_day_ms;
inline constexpr Micro k_unlimited = std::numeric_limits<Micro>::max();

inline Error fenced(AttemptId id, const std::string& why) {
    return make_error(ErrorCode::conflict,
                      "attempt " + std::to_string(id.value()) + " is no longer current (" + why + "); refused");
}

inline bool is_active(store::AttemptState s) {
    return s == store::AttemptState::assigned || s == store::AttemptState::running;
}

// A successful attempt with both clocks: one run of its recipe for the history of runtimes (estimates).
inline bool counts_as_run(const store::AttemptRecord& a) {
    return a.state == store::AttemptState::succeeded && a.started_at && a.ended_at;
}
// Its runtime in whole seconds, rounded up.
inline std::int64_t run_seconds(const store::AttemptRecord& a) { return (*a.ended_at - *a.started_at + 999) / 1000; }

// How an attempt handed back by its GPU's owner (api::Outcome::owner_preempted) is worded; the
// coordinator tells those from its own preemptions by it (metrics, the avoid rule, the report).
inline constexpr std::string_view k_owner_preempted_reason = "preempted by the GPU's owner";
inline bool preempted_by_owner(const store::AttemptRecord& a) {
    return a.state == store::AttemptState::preempted && a.reason.starts_with(k_owner_preempted_reason);
}

inline std::string no_team_message(const std::string& name) {
    return "no team named `" + name + "`; create it first (`gpupool admin team create " + name +
           "`) or see `gpupool admin team list`";
}

// "0.5 credits", "1 credit".
inline std::string credits_text(Micro m) { return format_credits(m) + (m == 1'000'000 ? " credit" : " credits"); }

} // namespace gpupool::coordinator::detail
