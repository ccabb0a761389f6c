#include "core/recipe/image_ref.hpp"

#include "core/util/strings.hpp"

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

namespace gpupool::recipe {

namespace {

// Checked before any regex runs: a name, a tag and a sha512 digest fit in well under this.
constexpr std::size_t k_max_reference_length = 1024;

Error image_error(std::string message) {
    return make_error(ErrorCode::invalid_input, std::move(message), "image");
}

std::string quoted(std::string_view s) {
    return "`" + util::escape_control(s) + "`";
}

bool matches(std::string_view s, const std::regex& re) {
    return std::regex_match(s.begin(), s.end(), re);
}

const std::regex& path_component_re() {
    static const std::regex re("[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*");
    return re;
}

const std::regex& domain_name_re() {
    static const std::regex re("(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
                               "(?:\\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*");
    return re;
}

const std::regex& ipv6_re() {
    static const std::regex re("\\[[a-fA-F0-9:]+\\]");
    return re;
}

const std::regex& port_re() {
    static const std::regex re("[0-9]{1,5}");
    return re;
}

const std::regex& tag_re() {
    static const std::regex re("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
    return re;
}

const std::regex& hex_re(std::size_t digits) {
    static const std::regex sha256("[a-f0-9]{64}");
    static const std::regex sha512("[a-f0-9]{128}");
    return digits == 64 ? sha256 : sha512;
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
    if (!matches(hex, hex_re(digits))) {
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
        if (!matches(host, ipv6_re())) {
            return image_error("registry " + quoted(host) + " is not a bracketed IPv6 address");
        }
    } else {
        const std::size_t colon = domain.find(':');
        if (colon != std::string_view::npos) {
            host = domain.substr(0, colon);
            port = domain.substr(colon + 1);
            has_port = true;
        }
        if (!matches(host, domain_name_re())) {
            return image_error("registry host " + quoted(host) +
                               " is not a host name (letters, digits and `-`, in parts joined by `.`)");
        }
    }
    if (has_port && !matches(port, port_re())) {
        return image_error("registry port " + quoted(port) + " is not a number");
    }
    return {};
}

Status check_path_component(std::string_view component) {
    if (component.empty()) {
        return image_error("an image name has no empty path components (`//`, or `/` at an end)");
    }
    if (matches(component, path_component_re())) {
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
        if (!matches(tag, tag_re())) {
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

std::string qualified_image(std::string_view image) {
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

} // namespace gpupool::recipe
