#include "core/recipe/image_ref.hpp"

#include "core/util/strings.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace gpupool::recipe {

namespace detail {

// Hand-written matchers for the grammar's five tokens (the header's rules). They replaced
// std::regex: one process per `gpupool submit` compiled the regexes anew each time, about a fifth
// of the whole command's instructions (callgrind, bench/README.md). tests/core/recipe/
// test_image_ref.cpp checks each against the regex it replaced, on random strings.

namespace {
bool lower_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool alnum(char c) {
    return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}
bool hex_digit(char c, bool upper_too) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (upper_too && c >= 'A' && c <= 'F');
}
// Skips a run of at least one character `keep` accepts; false when there is none at `i`.
template <typename Keep>
bool run_of(std::string_view s, std::size_t& i, Keep keep) {
    const std::size_t start = i;
    while (i < s.size() && keep(s[i])) {
        ++i;
    }
    return i > start;
}
} // namespace

bool is_path_component(std::string_view s) {
    std::size_t i = 0;
    if (!run_of(s, i, lower_alnum)) {
        return false;
    }
    while (i < s.size()) {
        // A separator: ".", "_", "__" or one or more "-"; then letters and digits again.
        if (s[i] == '.') {
            ++i;
        } else if (s[i] == '_') {
            i += (i + 1 < s.size() && s[i + 1] == '_') ? 2 : 1;
        } else if (!run_of(s, i, [](char c) { return c == '-'; })) {
            return false;
        }
        if (!run_of(s, i, lower_alnum)) {
            return false;
        }
    }
    return true;
}

bool is_host_name(std::string_view s) {
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = s.find('.', start);
        const std::string_view label =
            s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
        if (label.empty() || !alnum(label.front()) || !alnum(label.back()) ||
            !std::all_of(label.begin(), label.end(), [](char c) { return alnum(c) || c == '-'; })) {
            return false;
        }
        if (dot == std::string_view::npos) {
            return true;
        }
        start = dot + 1;
    }
}

bool is_ipv6_literal(std::string_view s) {
    return s.size() >= 3 && s.front() == '[' && s.back() == ']' &&
           std::all_of(s.begin() + 1, s.end() - 1, [](char c) { return hex_digit(c, true) || c == ':'; });
}

bool is_port(std::string_view s) {
    return !s.empty() && s.size() <= 5 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_tag(std::string_view s) {
    return !s.empty() && s.size() <= 128 && (alnum(s.front()) || s.front() == '_') &&
           std::all_of(s.begin() + 1, s.end(), [](char c) { return alnum(c) || c == '_' || c == '.' || c == '-'; });
}

} // namespace detail

bool is_lower_hex(std::string_view s, std::size_t digits) {
    return s.size() == digits && std::all_of(s.begin(), s.end(), [](char c) { return detail::hex_digit(c, false); });
}

namespace {

// Checked before anything else: a name, a tag and a sha512 digest fit in well under this.
constexpr std::size_t k_max_reference_length = 1024;

Error image_error(std::string message) {
    return make_error(ErrorCode::invalid_input, std::move(message), "image");
}

std::string quoted(std::string_view s) {
    return "`" + util::escape_control(s) + "`";
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t pos = s.find(sep, start);
        out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
        if (pos == std::string_view::npos) {
            return out;
        }
        start = pos + 1;
    }
}

// Bytes no reference holds; they get their own message, since they are what an attack looks like.
Status check_characters(std::string_view ref) {
    for (char c : ref) {
        const auto u = static_cast<unsigned char>(c);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            return image_error("an image reference has no spaces: " + quoted(ref));
        }
        if (u == 0) {
            return image_error("an image reference contains no NUL byte");
        }
        if (u < 0x20 || u == 0x7f) {
            return image_error("an image reference contains no control characters: " + quoted(ref));
        }
        if (u >= 0x80) {
            return image_error("an image reference is ASCII only: " + quoted(ref));
        }
    }
    return {};
}

Status check_digest(std::string_view digest) {
    const std::size_t colon = digest.find(':');
    if (colon == std::string_view::npos) {
        return image_error("the digest after `@` is `algorithm:hex`, like sha256:<64 hex digits>; got " +
                           quoted(digest));
    }
    const std::string_view algorithm = digest.substr(0, colon);
    const std::string_view hex = digest.substr(colon + 1);
    std::size_t digits = 0;
    if (algorithm == "sha256") {
        digits = 64;
    } else if (algorithm == "sha512") {
        digits = 128;
    } else {
        return image_error("digest algorithm " + quoted(algorithm) + " is not sha256 or sha512");
    }
    if (!is_lower_hex(hex, digits)) {
        return image_error("a " + std::string(algorithm) + " digest is " + std::to_string(digits) +
                           " lowercase hex digits; got " + quoted(hex));
    }
    return {};
}

Status check_domain(std::string_view domain) {
    std::string_view host = domain;
    std::string_view port;
    bool has_port = false;
    if (!domain.empty() && domain.front() == '[') {
        const std::size_t close = domain.find(']');
        if (close == std::string_view::npos) {
            return image_error("registry " + quoted(domain) + " opens an IPv6 address with `[` but never closes it");
        }
        host = domain.substr(0, close + 1);
        if (close + 1 < domain.size()) {
            if (domain[close + 1] != ':') {
                return image_error("registry " + quoted(domain) + " has text after its IPv6 address");
            }
            has_port = true;
            port = domain.substr(close + 2);
        }
        if (!detail::is_ipv6_literal(host)) {
            return image_error("registry " + quoted(host) + " is not a bracketed IPv6 address");
        }
    } else {
        const std::size_t colon = domain.find(':');
        if (colon != std::string_view::npos) {
            host = domain.substr(0, colon);
            port = domain.substr(colon + 1);
            has_port = true;
        }
        if (!detail::is_host_name(host)) {
            return image_error("registry host " + quoted(host) +
                               " is not a host name (letters, digits and `-`, in parts joined by `.`)");
        }
    }
    if (has_port && !detail::is_port(port)) {
        return image_error("registry port " + quoted(port) + " is not a number");
    }
    return {};
}

Status check_path_component(std::string_view component) {
    if (component.empty()) {
        return image_error("an image name has no empty path components (`//`, or `/` at an end)");
    }
    if (detail::is_path_component(component)) {
        return {};
    }
    const bool upper = std::any_of(component.begin(), component.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    return image_error("image name component " + quoted(component) +
                       (upper ? " is not lowercase; a" : " is invalid; a") +
                       " component is lowercase letters and digits, joined by `.`, `_`, `__` or `-`");
}

bool is_domain(std::string_view first) {
    return first.find_first_of(".:") != std::string_view::npos || first == "localhost" ||
           (!first.empty() && first.front() == '[');
}

} // namespace

Status validate_image_reference(std::string_view ref) {
    if (ref.empty()) {
        return image_error("must not be empty");
    }
    if (ref.size() > k_max_reference_length) {
        return image_error("an image reference is at most " + std::to_string(k_max_reference_length) +
                           " characters; got " + std::to_string(ref.size()));
    }
    if (auto st = check_characters(ref); !st) {
        return st;
    }
    if (ref.front() == '-') {
        return image_error("an image reference never starts with `-` (the container engine would read " + quoted(ref) +
                           " as an option)");
    }
    std::string_view rest = ref;
    if (const std::size_t at = rest.find('@'); at != std::string_view::npos) {
        if (auto st = check_digest(rest.substr(at + 1)); !st) {
            return st;
        }
        rest = rest.substr(0, at);
    }
    // A tag follows the last `:` that comes after the last `/` (a `:` before it is a registry port).
    const std::size_t slash = rest.rfind('/');
    const std::size_t colon = rest.rfind(':');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
        const std::string_view tag = rest.substr(colon + 1);
        if (tag.empty()) {
            return image_error("ends its name with `:` but gives no tag: " + quoted(ref));
        }
        if (!detail::is_tag(tag)) {
            return image_error("tag " + quoted(tag) +
                               " is invalid; a tag is up to 128 letters, digits, `_`, `.` and `-`, not starting "
                               "with `.` or `-`");
        }
        rest = rest.substr(0, colon);
    }
    if (rest.empty()) {
        return image_error("names no image: " + quoted(ref));
    }
    if (rest.size() > k_max_image_name_length) {
        return image_error("an image name is at most " + std::to_string(k_max_image_name_length) + " characters; got " +
                           std::to_string(rest.size()));
    }
    std::vector<std::string_view> components = split(rest, '/');
    std::size_t first_path = 0;
    if (components.size() > 1 && is_domain(components.front())) {
        if (auto st = check_domain(components.front()); !st) {
            return st;
        }
        first_path = 1;
    }
    for (std::size_t i = first_path; i < components.size(); ++i) {
        if (auto st = check_path_component(components[i]); !st) {
            return st;
        }
    }
    return {};
}

namespace {

// The name with its registry spelled out, as docker and podman resolve a short one.
std::string qualified_name(std::string_view image) {
    const auto slash = image.find('/');
    if (slash != std::string_view::npos) {
        const std::string_view first = image.substr(0, slash);
        if (first == "docker.io" || first == "index.docker.io") {
            const std::string_view rest = image.substr(slash + 1);
            return "docker.io/" + std::string(rest.find('/') == std::string_view::npos ? "library/" : "") +
                   std::string(rest);
        }
        if (first.find_first_of(".:[") != std::string_view::npos || first == "localhost") {
            return std::string(image); // the first component names the registry
        }
        return "docker.io/" + std::string(image);
    }
    return "docker.io/library/" + std::string(image);
}

} // namespace

std::string qualified_image(std::string_view image) {
    std::string out = qualified_name(image);
    // No tag and no digest: the engines take `latest`; say so, so that nothing is left to resolve.
    const std::size_t slash = out.rfind('/');
    const std::size_t colon = out.rfind(':');
    const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
    if (!tagged && out.find('@') == std::string::npos) {
        out += ":latest";
    }
    return out;
}

} // namespace gpupool::recipe
