#include "core/util/strings.hpp"

#include <algorithm>
#include <limits>

namespace gpupool::util {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1);
    std::vector<std::size_t> cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        prev[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates) {
    std::optional<std::string> best;
    std::size_t best_score = std::numeric_limits<std::size_t>::max();
    const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
    for (const auto& c : candidates) {
        std::size_t d = edit_distance(word, c);
        bool prefix = word.size() >= 3 && c.size() >= 3 &&
                      (c.find(word) != std::string::npos || word.find(c) != std::string_view::npos);
        if (d <= limit || prefix) {
            // Prefer real near-misses; prefix matches rank after them by distance.
            std::size_t score = d <= limit ? d : limit + d;
            if (score < best_score) {
                best_score = score;
                best = c;
            }
        }
    }
    return best;
}

bool is_identifier(std::string_view s) {
    if (s.empty()) {
        return false;
    }
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (!alpha(s[0])) {
        return false;
    }
    return std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) {
            out += sep;
        }
        out += parts[i];
    }
    return out;
}

std::string_view trim(std::string_view s) {
    const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!s.empty() && space(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && space(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

std::string shell_quote(std::string_view s) {
    bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
    });
    if (plain) {
        return std::string(s);
    }
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') {
            out += "'\\''";
        } else {
            out += c;
        }
    }
    out += '\'';
    return out;
}

namespace {

void append_hex(std::string& out, const char* prefix, unsigned value, int digits) {
    static constexpr char k_hex[] = "0123456789abcdef";
    out += prefix;
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) {
        out += k_hex[(value >> shift) & 0xfu];
    }
}

// Length of the valid UTF-8 sequence starting at s[i], or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
        return 0;
    }
    for (std::size_t k = 1; k < n; ++k) {
        if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) {
            return 0;
        }
    }
    // Overlong two-byte forms (0xc0, 0xc1) could hide an ASCII control character.
    if (n == 2 && c < 0xc2) {
        return 0;
    }
    return n;
}

} // namespace

std::string escape_control(std::string_view s, bool keep_lines) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const std::size_t n = utf8_length(s, i);
        if (n == 0) {
            append_hex(out, "\\x", c, 2);
            ++i;
            continue;
        }
        if (n == 1) {
            if (c >= 0x20 && c != 0x7f) {
                out += static_cast<char>(c);
            } else if (keep_lines && (c == '\n' || c == '\t')) {
                out += static_cast<char>(c);
            } else if (c == '\n') {
                out += "\\n";
            } else if (c == '\r') {
                out += "\\r";
            } else if (c == '\t') {
                out += "\\t";
            } else {
                append_hex(out, "\\x", c, 2);
            }
        } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {
            append_hex(out, "\\u", static_cast<unsigned char>(s[i + 1]), 4); // a C1 control
        } else {
            out.append(s.substr(i, n));
        }
        i += n;
    }
    return out;
}

} // namespace gpupool::util
