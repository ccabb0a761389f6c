#include "core/resources/quantity.hpp"

#include "core/util/strings.hpp"

#include <array>
#include <cctype>
#include <cmath>

namespace gpupool::resources {
namespace {

using util::trim;

// 128-bit intermediates keep unit conversions exact (GCC and clang both have them).
__extension__ typedef __int128 i128; // NOLINT(modernize-use-using): __extension__ needs typedef

Error invalid(std::string message) { return make_error(ErrorCode::invalid_input, std::move(message)); }

// A non-negative decimal number as mantissa / 10^frac_digits, parsed exactly.
struct Decimal {
    std::int64_t mantissa = 0;
    int frac_digits = 0;
};

constexpr int k_max_digits = 18;

// Parses the leading decimal number of `text`; `consumed` receives its length.
Result<Decimal> parse_decimal_prefix(std::string_view text, std::size_t& consumed) {
    Decimal d;
    std::size_t i = 0;
    int digits = 0;
    bool any = false;
    bool dot = false;
    while (i < text.size()) {
        char c = text[i];
        if (c >= '0' && c <= '9') {
            if (digits >= k_max_digits) {
                return invalid("number `" + std::string(text) + "` has too many digits");
            }
            if (d.mantissa != 0 || c != '0') {
                ++digits;
            }
            if (dot && d.frac_digits >= k_max_digits) {
                // Leading fractional zeros count here even though they are not significant:
                // the scale 10^frac_digits must fit in 64 bits.
                return invalid("number `" + std::string(text) + "` has too many decimal places");
            }
            d.mantissa = d.mantissa * 10 + (c - '0');
            if (dot) {
                ++d.frac_digits;
            }
            any = true;
        } else if (c == '.' && !dot) {
            dot = true;
        } else {
            break;
        }
        ++i;
    }
    if (!any) {
        return invalid("expected a number, got `" + std::string(text) + "`");
    }
    if (dot && (i == 0 || text[i - 1] == '.')) {
        return invalid("malformed number `" + std::string(text.substr(0, i)) + "`");
    }
    consumed = i;
    return d;
}

// n <= k_max_digits (parse_decimal_prefix guarantees it), so 10^n fits in 64 bits.
std::int64_t pow10(int n) {
    std::int64_t r = 1;
    for (int i = 0; i < n; ++i) {
        r *= 10;
    }
    return r;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

// mantissa * multiplier / (10^frac * divisor), rounded up; i128 keeps it exact.
std::int64_t ceil_div_scaled(const Decimal& d, i128 multiplier, i128 divisor) {
    i128 num = static_cast<i128>(d.mantissa) * multiplier;
    i128 den = static_cast<i128>(pow10(d.frac_digits)) * divisor;
    i128 q = (num + den - 1) / den;
    if (q > static_cast<i128>(k_max_memory_mib) + 1) {
        q = static_cast<i128>(k_max_memory_mib) + 1;
    }
    return static_cast<std::int64_t>(q);
}

} // namespace

Result<std::int64_t> parse_milli(std::string_view text) {
    std::string_view t = trim(text);
    if (!t.empty() && t.front() == '-') {
        return invalid("expected a non-negative number, got `" + std::string(t) + "`");
    }
    std::size_t used = 0;
    auto d = parse_decimal_prefix(t, used);
    if (!d) {
        return d.error();
    }
    std::string_view rest = trim(t.substr(used));
    int scale = 3;
    if (rest == "%") {
        scale = 1; // 25% = 0.25 -> 250 milli: percent has one fewer decimal of room
    } else if (!rest.empty()) {
        return invalid("expected a number like 0.25 or a percentage like 25%, got `" + std::string(t) + "`");
    }
    if (d->frac_digits > scale) {
        // Allow trailing zeros beyond the resolution ("0.2500").
        std::int64_t extra = pow10(d->frac_digits - scale);
        if (d->mantissa % extra != 0) {
            return invalid("`" + std::string(t) + "` is finer than the resolution of 0.001 (milli-units)");
        }
        return d->mantissa / extra;
    }
    // mantissa < 10^18 and the factor is at most 1000: the product needs 128 bits before the cap.
    i128 milli = static_cast<i128>(d->mantissa) * pow10(scale - d->frac_digits);
    if (milli > static_cast<i128>(k_max_units) * k_milli_per_unit) {
        return invalid("number `" + std::string(t) + "` is too large");
    }
    return static_cast<std::int64_t>(milli);
}

Result<std::int64_t> milli_from_double(double value) {
    if (!std::isfinite(value)) {
        return invalid("expected a finite number");
    }
    if (value < 0) {
        return invalid("expected a non-negative number");
    }
    if (value > static_cast<double>(k_max_units)) {
        return invalid("number is too large");
    }
    double scaled = value * static_cast<double>(k_milli_per_unit);
    double rounded = std::nearbyint(scaled);
    if (std::fabs(scaled - rounded) > 1e-6 * std::max(1.0, std::fabs(scaled))) {
        return invalid("value is finer than the resolution of 0.001 (milli-units)");
    }
    return static_cast<std::int64_t>(rounded);
}

Result<std::int64_t> parse_memory_mib(std::string_view text) {
    std::string_view t = trim(text);
    if (!t.empty() && t.front() == '-') {
        return invalid("expected a non-negative size, got `" + std::string(t) + "`");
    }
    std::size_t used = 0;
    auto d = parse_decimal_prefix(t, used);
    if (!d) {
        return invalid("expected a size like \"16GiB\" or \"512MiB\", got `" + std::string(t) + "`");
    }
    std::string_view unit = trim(t.substr(used));
    if (unit.empty()) {
        return invalid("size `" + std::string(t) + "` needs a unit, like \"" + std::string(t) + "GiB\" or \"" +
                       std::string(t) + "MiB\"");
    }
    struct Unit {
        std::string_view name;
        i128 bytes;
    };
    constexpr i128 kib = 1024;
    const std::array<Unit, 17> units{{
        {"B", 1},
        {"KB", 1000},
        {"MB", 1000 * 1000},
        {"GB", static_cast<i128>(1000) * 1000 * 1000},
        {"TB", static_cast<i128>(1000) * 1000 * 1000 * 1000},
        {"KiB", kib},
        {"MiB", kib * kib},
        {"GiB", kib * kib * kib},
        {"TiB", kib * kib * kib * kib},
        {"Ki", kib},
        {"Mi", kib * kib},
        {"Gi", kib * kib * kib},
        {"Ti", kib * kib * kib * kib},
        {"K", kib},
        {"M", kib * kib},
        {"G", kib * kib * kib},
        {"T", kib * kib * kib * kib},
    }};
    for (const auto& u : units) {
        if (iequals(unit, u.name)) {
            std::int64_t mib = ceil_div_scaled(*d, u.bytes, kib * kib);
            if (mib > k_max_memory_mib) {
                return invalid("size `" + std::string(t) + "` is larger than 1PiB");
            }
            return mib;
        }
    }
    return invalid("unknown size unit `" + std::string(unit) + "` in `" + std::string(t) +
                   "`; use B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)");
}

namespace {

bool is_blank(char c) {
    return c == ' ' || c == '\t';
}

std::string_view skip_blanks(std::string_view s) {
    while (!s.empty() && is_blank(s.front())) {
        s.remove_prefix(1);
    }
    return s;
}

// Seconds in one `unit`, or 0 for an unknown unit. Lower case only: "M" would read as months.
std::int64_t duration_unit_s(std::string_view unit) {
    struct Unit {
        std::string_view name;
        std::int64_t seconds;
    };
    static constexpr std::array<Unit, 18> units{{
        {"s", 1},
        {"sec", 1},
        {"secs", 1},
        {"second", 1},
        {"seconds", 1},
        {"m", 60},
        {"min", 60},
        {"mins", 60},
        {"minute", 60},
        {"minutes", 60},
        {"h", 3600},
        {"hr", 3600},
        {"hrs", 3600},
        {"hour", 3600},
        {"hours", 3600},
        {"d", 86400},
        {"day", 86400},
        {"days", 86400},
    }};
    for (const auto& u : units) {
        if (u.name == unit) {
            return u.seconds;
        }
    }
    return 0;
}

} // namespace

Result<std::int64_t> parse_duration_s(std::string_view text) {
    std::string_view t = trim(text);
    if (t.empty()) {
        return invalid("expected a duration like \"90m\" or \"1h30m\", got an empty string");
    }
    if (t.front() == '-') {
        return invalid("expected a positive duration, got `" + std::string(t) + "`");
    }
    // Sum of parts, each exact: total = sum(mantissa * unit_seconds / 10^frac), kept in
    // thousandths of a second so "1.5h" and "0.5s" stay exact before the final rounding.
    // Blanks may separate a number from its unit and one part from the next ("5 min", "1h 30m").
    i128 total_ms = 0;
    std::string_view rest = t;
    while (!rest.empty()) {
        std::size_t used = 0;
        auto d = parse_decimal_prefix(rest, used);
        if (!d) {
            return invalid("expected a duration like \"90m\" or \"1h30m\", got `" + std::string(t) + "`");
        }
        rest = skip_blanks(rest.substr(used));
        std::size_t unit_len = 0;
        while (unit_len < rest.size() && std::isalpha(static_cast<unsigned char>(rest[unit_len])) != 0) {
            ++unit_len;
        }
        const std::string_view unit = rest.substr(0, unit_len);
        rest = skip_blanks(rest.substr(unit_len));
        const std::int64_t unit_s = duration_unit_s(unit);
        if (unit.empty()) {
            return invalid("duration `" + std::string(t) + "` needs a unit on every number: s, m, h or d (e.g. \"90m\")");
        }
        if (unit_s == 0) {
            return invalid("unknown duration unit `" + std::string(unit) + "` in `" + std::string(t) +
                           "`; use s, m, h or d (or sec, min, hour, day)");
        }
        total_ms += static_cast<i128>(d->mantissa) * unit_s * 1000 / pow10(d->frac_digits);
        if (total_ms > static_cast<i128>(k_max_duration_s) * 1000 * 2) {
            break;
        }
    }
    std::int64_t seconds = static_cast<std::int64_t>((total_ms + 500) / 1000);
    if (seconds <= 0) {
        return invalid("duration `" + std::string(t) + "` is shorter than one second");
    }
    if (seconds > k_max_duration_s) {
        return invalid("duration `" + std::string(t) + "` is longer than the 30-day maximum");
    }
    return seconds;
}

std::string format_milli(std::int64_t milli) {
    std::string out = std::to_string(milli / k_milli_per_unit);
    std::int64_t frac = milli % k_milli_per_unit;
    if (frac != 0) {
        std::string f = std::to_string(frac);
        f.insert(0, 3 - f.size(), '0');
        while (!f.empty() && f.back() == '0') {
            f.pop_back();
        }
        out += '.' + f;
    }
    return out;
}

std::string format_memory_mib(std::int64_t mib) {
    constexpr std::array<std::string_view, 3> names{"MiB", "GiB", "TiB"};
    // Largest unit in which the value is exact to at most two decimals.
    for (int i = 2; i >= 1; --i) {
        std::int64_t unit = std::int64_t{1} << (10 * i);
        if (mib >= unit && (mib * 100) % unit == 0) {
            std::int64_t hundredths = mib * 100 / unit;
            std::string out = std::to_string(hundredths / 100);
            std::int64_t frac = hundredths % 100;
            if (frac != 0) {
                out += '.';
                out += static_cast<char>('0' + frac / 10);
                if (frac % 10 != 0) {
                    out += static_cast<char>('0' + frac % 10);
                }
            }
            return out + std::string(names[static_cast<std::size_t>(i)]);
        }
    }
    return std::to_string(mib) + "MiB";
}

std::string format_duration_s(std::int64_t seconds) {
    if (seconds == 0) {
        return "0s";
    }
    std::string out;
    const std::array<std::pair<std::int64_t, char>, 4> parts{{{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}}};
    for (const auto& [size, name] : parts) {
        if (seconds >= size) {
            out += std::to_string(seconds / size) + name;
            seconds %= size;
        }
    }
    return out;
}

} // namespace gpupool::resources
