#include "core/net/url.hpp"

namespace gpupool::net {

namespace {
int hex_value(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

bool is_unreserved(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}
} // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '%') {
            if (i + 2 >= text.size()) {
                return std::nullopt;
            }
            int hi = hex_value(text[i + 1]);
            int lo = hex_value(text[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                return std::nullopt;
            }
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string percent_encode(std::string_view text) {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (is_unreserved(c)) {
            out.push_back(c);
        } else {
            auto u = static_cast<unsigned char>(c);
            out.push_back('%');
            out.push_back(k_hex[u >> 4]);
            out.push_back(k_hex[u & 0x0f]);
        }
    }
    return out;
}

std::optional<std::map<std::string, std::string>> parse_query(std::string_view query) {
    std::map<std::string, std::string> out;
    while (!query.empty()) {
        std::size_t amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (pair.empty()) {
            continue;
        }
        std::size_t eq = pair.find('=');
        auto key = percent_decode(pair.substr(0, eq), true);
        auto value = eq == std::string_view::npos ? std::optional<std::string>(std::string())
                                                  : percent_decode(pair.substr(eq + 1), true);
        if (!key || !value) {
            return std::nullopt;
        }
        out[*key] = std::move(*value);
    }
    return out;
}

TargetParts split_target(std::string_view target) {
    std::size_t q = target.find('?');
    if (q == std::string_view::npos) {
        return {target, {}};
    }
    return {target.substr(0, q), target.substr(q + 1)};
}

} // namespace gpupool::net
