#include "core/net/url.hpp"

#include <boost/url/encode.hpp>
#include <boost/url/encoding_opts.hpp>
#include <boost/url/params_view.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <boost/url/url.hpp>

#include <algorithm>
#include <cctype>

namespace gpupool::net {

namespace urls = boost::urls;

namespace {

// `text` as a pct_string_view: nullopt on a malformed escape ("%4", "%zz") or an encoded NUL. A
// valid pct_string_view starts an escape at every '%', so "%00" can only be an encoded NUL.
std::optional<urls::pct_string_view> checked_escapes(std::string_view text) {
    auto pct = urls::make_pct_string_view(urls::string_view(text.data(), text.size()));
    if (!pct || text.find("%00") != std::string_view::npos) {
        return std::nullopt;
    }
    return *pct;
}

} // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
    auto pct = checked_escapes(text);
    if (!pct) {
        return std::nullopt;
    }
    urls::encoding_opts opts;
    opts.space_as_plus = plus_is_space;
    return pct->decode(opts);
}

std::string percent_encode(std::string_view text) {
    return urls::encode(urls::string_view(text.data(), text.size()), urls::unreserved_chars);
}

std::string with_query(std::string_view path, const QueryParams& params) {
    urls::url url;
    url.set_encoded_path(urls::string_view(path.data(), path.size()));
    for (const auto& [key, value] : params) {
        // Everything but the unreserved characters escaped: Boost.URL's params() would leave a `+`
        // as it is, which a query's reader takes for a space.
        const std::string k = percent_encode(key);
        const std::string v = percent_encode(value);
        url.encoded_params().append({urls::pct_string_view(k), urls::pct_string_view(v)});
    }
    return std::string(url.buffer());
}

std::optional<std::map<std::string, std::string>> parse_query(std::string_view query) {
    auto pct = checked_escapes(query);
    if (!pct) {
        return std::nullopt;
    }
    // set_encoded_query keeps the escapes and escapes what a query may not hold raw (a space,
    // quotes, bytes over 0x7f), so such bytes read back as themselves, as they were sent.
    urls::url url;
    url.set_encoded_query(*pct);
    std::map<std::string, std::string> out;
    for (const auto& param : url.params(urls::encoding_opts(true))) {
        if (param.key.empty() && !param.has_value) {
            continue; // "a=1&&b=2", or an empty query
        }
        out[param.key] = param.value;
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

std::vector<std::string> split_url_list(std::string_view list) {
    std::vector<std::string> out;
    while (true) {
        const auto comma = list.find(',');
        std::string_view part = list.substr(0, comma);
        while (!part.empty() && std::isspace(static_cast<unsigned char>(part.front())) != 0) {
            part.remove_prefix(1);
        }
        while (!part.empty() && (std::isspace(static_cast<unsigned char>(part.back())) != 0 || part.back() == '/')) {
            part.remove_suffix(1);
        }
        if (!part.empty()) {
            out.emplace_back(part);
        }
        if (comma == std::string_view::npos) {
            return out;
        }
        list.remove_prefix(comma + 1);
    }
}

std::optional<UrlOrigin> url_origin(std::string_view url) {
    auto u = urls::parse_absolute_uri(urls::string_view(url.data(), url.size()));
    if (!u || !u->has_authority()) {
        return std::nullopt;
    }
    std::string host = u->host_address();
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    return UrlOrigin{std::string(u->scheme()), host};
}

bool is_http_url_list(std::string_view list) {
    const auto urls = split_url_list(list);
    return !urls.empty() && std::all_of(urls.begin(), urls.end(), [](const std::string& u) {
        return u.starts_with("http://") || u.starts_with("https://");
    });
}

} // namespace gpupool::net
