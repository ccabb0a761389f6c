#include "core/credits/money.hpp"

namespace gpupool::credits {

Result<Micro> parse_credits(std::string_view text, bool allow_negative) {
    auto bad = [&](const std::string& why) {
        return make_error(ErrorCode::invalid_input, "expected an amount of credits like 12 or 12.5 (" + why +
                                                        "), got `" + std::string(text) + "`");
    };
    std::string_view s = text;
    bool negative = false;
    if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
        negative = s.front() == '-';
        s.remove_prefix(1);
    }
    if (negative && !allow_negative) {
        return bad("it must not be negative");
    }
    Micro whole = 0;
    Micro frac = 0;
    int frac_digits = 0;
    bool seen_dot = false;
    bool seen_digit = false;
    for (char c : s) {
        if (c == '.') {
            if (seen_dot) {
                return bad("one decimal point at most");
            }
            seen_dot = true;
            continue;
        }
        if (c == '_' && !seen_dot) {
            continue; // 1_000 reads like TOML
        }
        if (c < '0' || c > '9') {
            return bad("digits and one decimal point only");
        }
        seen_digit = true;
        const Micro d = c - '0';
        if (seen_dot) {
            if (++frac_digits > 6) {
                return bad("at most six decimals: the smallest amount is 0.000001");
            }
            frac = frac * 10 + d;
        } else {
            whole = whole * 10 + d;
            if (whole > k_max_amount / k_micro_per_credit) {
                return bad("too large");
            }
        }
    }
    if (!seen_digit) {
        return bad("no digits");
    }
    for (int i = frac_digits; i < 6; ++i) {
        frac *= 10;
    }
    const Micro v = whole * k_micro_per_credit + frac;
    return negative ? -v : v;
}

std::string format_credits(Micro amount) {
    const bool negative = amount < 0;
    // |INT64_MIN| does not fit: amounts are bounded far below it.
    const Micro a = negative ? -amount : amount;
    std::string out = (negative ? "-" : "") + std::to_string(a / k_micro_per_credit);
    Micro frac = a % k_micro_per_credit;
    if (frac != 0) {
        std::string digits = std::to_string(frac);
        digits.insert(0, 6 - digits.size(), '0');
        while (!digits.empty() && digits.back() == '0') {
            digits.pop_back();
        }
        out += "." + digits;
    }
    return out;
}

} // namespace gpupool::credits
