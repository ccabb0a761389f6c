// Percent-encoding and query strings for request targets (RFC 3986). Pure functions, thread-safe.
// Decoding fails (nullopt) on a malformed escape ("%4", "%zz") or an encoded NUL, so the server can
// answer 400 instead of guessing.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::net {

// Decodes %XX escapes; with `plus_is_space` (query strings) '+' becomes ' '.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space = false);

// Encodes everything but RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~): for one path
// segment or one query key/value.
std::string percent_encode(std::string_view text);

// A request target: `path` (already a valid path) and the query `params` in their order, each key
// and value percent-encoded by Boost.URL ("&", "=", "+", "#" and spaces in a value stay inside
// it). No params: the path alone.
using QueryParams = std::vector<std::pair<std::string, std::string>>;
std::string with_query(std::string_view path, const QueryParams& params);

// "a=1&b=x%20y&flag" -> {a: "1", b: "x y", flag: ""}; a repeated key keeps its last value.
std::optional<std::map<std::string, std::string>> parse_query(std::string_view query);

// Splits a request target into its path and query parts (without the '?').
struct TargetParts {
    std::string_view path;
    std::string_view query;
};
TargetParts split_target(std::string_view target);

// A coordinator URL list, `URL1,URL2` (an active coordinator and its standbys): the URLs, blanks
// around them and trailing '/' removed, empty ones dropped.
std::vector<std::string> split_url_list(std::string_view list);
// Whether `list` names at least one URL and every one starts with http:// or https://.
bool is_http_url_list(std::string_view list);

// The scheme and host of an absolute URL ("http", "10.0.0.5" for http://10.0.0.5:7443/x; an IPv6
// host without its brackets); nullopt when `url` is not one.
struct UrlOrigin {
    std::string scheme;
    std::string host;
};
std::optional<UrlOrigin> url_origin(std::string_view url);

} // namespace gpupool::net
