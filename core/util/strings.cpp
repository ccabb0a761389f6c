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

} // namespace gpupool::util
