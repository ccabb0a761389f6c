// Exact credit amounts: parsing and printing of micro-credits.
//
// Credits are integers of micro-credits (1 credit = 1'000'000 micro) everywhere in gpupool: the
// ledger, the wire, the store. Decimal text such as "12.5" is parsed exactly (no floating point);
// amounts are printed with up to six decimals, trailing zeros trimmed ("12.5", "0.000001", "3").
// Pure and thread-safe; failures are Errors with ErrorCode::invalid_input.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace gpupool::credits {

using Micro = std::int64_t;

inline constexpr Micro k_micro_per_credit = 1'000'000;
// Amounts beyond this (a trillion credits) are refused: far from overflow in any sum we make.
inline constexpr Micro k_max_amount = Micro{1'000'000'000'000} * k_micro_per_credit;

// "12.5" -> 12'500'000; "-3" -> -3'000'000 when `allow_negative`. At most six decimals.
Result<Micro> parse_credits(std::string_view text, bool allow_negative = false);

// 12'500'000 -> "12.5"; -1 -> "-0.000001".
std::string format_credits(Micro amount);

} // namespace gpupool::credits
