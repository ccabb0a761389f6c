#include "core/net/http_client.hpp"

#include "core/net/url.hpp"

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <unistd.h>

namespace gpupool::net {

namespace {

void global_init_once() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Where a response body goes: memory, or (for a 2xx answer to download()) a file.
struct BodySink {
    BodySink(CURL* c, std::FILE* f, std::int64_t max) : curl(c), file(f), max_body(max) {}
    CURL* curl = nullptr;
    std::string body;
    std::FILE* file = nullptr; // download(): written here when the status is 2xx
    bool file_failed = false;
    std::int64_t max_body = 0; // ClientOptions::max_body_bytes
    bool too_large = false;
};

size_t take_body(char* data, size_t size, size_t count, void* user) {
    auto* sink = static_cast<BodySink*>(user);
    const size_t n = size * count;
    long status = 0;
    if (sink->file != nullptr && curl_easy_getinfo(sink->curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
        status >= 200 && status < 300) {
        if (std::fwrite(data, 1, n, sink->file) != n) {
            sink->file_failed = true;
            return 0; // stops the transfer: CURLE_WRITE_ERROR
        }
        return n;
    }
    if (sink->max_body > 0 && sink->body.size() + n > static_cast<std::size_t>(sink->max_body)) {
        sink->too_large = true;
        return 0; // stops the transfer: CURLE_WRITE_ERROR
    }
    sink->body.append(data, n);
    return n;
}

// Why the body could not be kept (written to its file, or held under max_body), if it could not.
std::optional<Error> sink_failure(const BodySink& sink, const std::string& url) {
    if (sink.file_failed) {
        return make_error(ErrorCode::io, std::string("cannot write the downloaded body: ") + std::strerror(errno));
    }
    if (sink.too_large) {
        return make_error(ErrorCode::invalid_input,
                          "the answer from " + url + " is larger than " + std::to_string(sink.max_body) + " bytes");
    }
    return std::nullopt;
}

bool has_line_break(std::string_view s) {
    return s.find_first_of("\r\n") != std::string_view::npos;
}

Error transfer_error(CURLcode code, const std::string& url, const char* detail, const ClientOptions& o,
                     std::chrono::milliseconds timeout) {
    std::string why = detail[0] != '\0' ? std::string(detail) : std::string(curl_easy_strerror(code));
    switch (code) {
    case CURLE_COULDNT_CONNECT:
        return make_error(ErrorCode::unavailable,
                          "could not connect to " + url + ": " + why + " (is " + o.server_name +
                                                      " running and reachable?)");
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return make_error(ErrorCode::unavailable, "could not resolve the host of " + url + ": " + why);
    case CURLE_OPERATION_TIMEDOUT:
        return make_error(ErrorCode::unavailable, "no answer from " + url + " within " +
                                                      std::to_string(timeout.count()) + " ms: " + why);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        // Retrying cannot help: the certificate or the CA is wrong until someone changes them.
        return make_error(ErrorCode::invalid_input,
                          std::string(k_tls_failure) + " for " + url + ": " + why + "; check --ca-cert / ca_cert" +
                              (o.ca_cert.empty()
                                   ? " (a pool with a self-signed certificate needs its CA: --ca-cert FILE)"
                                   : " (now '" + o.ca_cert + "')"),
                          std::string(k_tls_field));
    case CURLE_SSL_CONNECT_ERROR:
        return make_error(ErrorCode::unavailable, "the TLS handshake with " + url + " failed: " + why);
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return make_error(ErrorCode::unavailable, "the connection to " + url + " failed: " + why);
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return make_error(ErrorCode::invalid_input, "bad URL " + url + ": " + why);
    default:
        return make_error(ErrorCode::io, "request to " + url + " failed: " + why);
    }
}

// Owns a curl_slist.
struct HeaderList {
    curl_slist* list = nullptr;
    HeaderList() = default;
    HeaderList(const HeaderList&) = delete;
    HeaderList& operator=(const HeaderList&) = delete;
    ~HeaderList() { curl_slist_free_all(list); }
    bool add(const std::string& line) {
        curl_slist* next = curl_slist_append(list, line.c_str());
        if (next == nullptr) {
            return false;
        }
        list = next;
        return true;
    }
};

// ClientOptions::max_redirects: libcurl follows them, http and https only, and sends the token as
// its own credential, which it gives to the first URL's scheme, host and port and to nothing else.
void follow_redirects(CURL* curl, const ClientOptions& o) {
    if (o.max_redirects <= 0) {
        return;
    }
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, static_cast<long>(o.max_redirects));
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (!o.token.empty()) {
        curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, o.token.c_str());
    }
}

} // namespace

bool is_tls_verification_failure(const Error& e) {
    return e.code == ErrorCode::invalid_input && e.field == k_tls_field && e.message.starts_with(k_tls_failure);
}

struct HttpClient::Handle {
    CURL* curl = nullptr;
    Handle() : curl(curl_easy_init()) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() {
        if (curl != nullptr) {
            curl_easy_cleanup(curl);
        }
    }
};

HttpClient::HttpClient(ClientOptions options) : m_options(std::move(options)) {
    global_init_once();
    m_urls = split_url_list(m_options.base_url);
    m_options.base_url = m_urls.empty() ? std::string() : m_urls.front();
}

const std::string& HttpClient::current_url() const { return m_options.base_url; }

HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

Result<Response> HttpClient::request(std::string_view method, std::string_view path, std::string_view body,
                                     const Headers& headers, std::optional<std::chrono::milliseconds> timeout) {
    return send(method, path, body, headers, timeout, nullptr);
}

namespace {

// A standby's answer (core/coordinator/service_lease.cpp): it did nothing with the request.
bool is_standby_answer(const Response& r) {
    if (r.status != 503) {
        return false;
    }
    if (r.headers.find("Gpupool-Active") != nullptr) {
        return true;
    }
    const auto body = nlohmann::json::parse(r.body, nullptr, false);
    return body.is_object() && body.value("error", std::string()) == "standby";
}

} // namespace

Result<Response> HttpClient::send(std::string_view method, std::string_view path, std::string_view body,
                                  const Headers& headers, std::optional<std::chrono::milliseconds> timeout,
                                  std::FILE* body_file) {
    std::vector<bool> tried(m_urls.size(), false);
    while (true) {
        bool unsent = false;
        auto r = perform(method, path, body, headers, timeout, body_file, unsent);
        if (m_urls.size() < 2 || !((!r && unsent) || (r && is_standby_answer(*r)))) {
            return r;
        }
        tried[m_current] = true;
        std::size_t next = m_current;
        const std::string* active = r ? r->headers.find("Gpupool-Active") : nullptr;
        const auto named = active == nullptr ? m_urls.end() : std::find(m_urls.begin(), m_urls.end(), *active);
        if (named != m_urls.end() && !tried[static_cast<std::size_t>(named - m_urls.begin())]) {
            next = static_cast<std::size_t>(named - m_urls.begin());
        } else {
            const auto untried = std::find(tried.begin(), tried.end(), false);
            if (untried == tried.end()) {
                return r; // every URL tried once: the last answer or error stands
            }
            next = static_cast<std::size_t>(untried - tried.begin());
        }
        m_current = next;
        m_options.base_url = m_urls[m_current];
    }
}

Result<Response> HttpClient::download(std::string_view method, std::string_view path, const std::filesystem::path& to,
                                      std::string_view body, std::optional<std::chrono::milliseconds> timeout) {
    // Never over an existing file, and 0600 from the start: what is downloaded is often private.
    const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    std::FILE* file = fd >= 0 ? ::fdopen(fd, "wb") : nullptr;
    if (file == nullptr) {
        if (fd >= 0) {
            ::close(fd);
        }
        return make_error(ErrorCode::io, "cannot create " + to.string() + ": " + std::strerror(errno));
    }
    auto r = send(method, path, body, {}, timeout, file);
    const bool closed = std::fclose(file) == 0;
    if (r && r->status >= 200 && r->status < 300 && !closed) {
        return make_error(ErrorCode::io, "cannot write " + to.string() + ": " + std::strerror(errno));
    }
    return r;
}

Result<Response> HttpClient::perform(std::string_view method, std::string_view path, std::string_view body,
                                     const Headers& headers, std::optional<std::chrono::milliseconds> timeout,
                                     std::FILE* body_file, bool& unsent) {
    std::string url = m_options.base_url;
    if (!path.empty() && path.front() != '/') {
        url += '/';
    }
    url += path;
    if (m_options.base_url.empty()) {
        return make_error(ErrorCode::invalid_input, "no coordinator URL is configured");
    }
    if (method.empty() || has_line_break(method) || method.find(' ') != std::string_view::npos) {
        return make_error(ErrorCode::invalid_input, "bad HTTP method '" + std::string(method) + "'");
    }
    if (has_line_break(url) || url.find(' ') != std::string::npos) {
        return make_error(ErrorCode::invalid_input, "bad URL '" + url + "' (spaces and line breaks must be encoded)");
    }
    if (has_line_break(m_options.token)) {
        return make_error(ErrorCode::invalid_input, "the API token contains a line break");
    }
    if (!m_options.ca_cert.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(m_options.ca_cert, ec)) {
            return make_error(ErrorCode::invalid_input,
                              "the CA certificate file '" + m_options.ca_cert + "' (--ca-cert) does not exist");
        }
    }

    if (!m_handle) {
        m_handle = std::make_unique<Handle>();
    }
    CURL* curl = m_handle->curl;
    if (curl == nullptr) {
        m_handle.reset();
        return make_error(ErrorCode::internal, "could not create a libcurl handle");
    }
    // Resets options only: live connections, the TLS session cache and the DNS cache stay.
    curl_easy_reset(curl);

    HeaderList header_list;
    bool has_content_type = false;
    bool ok = true;
    for (const auto& [name, value] : headers) {
        if (has_line_break(name) || has_line_break(value) || name.empty()) {
            return make_error(ErrorCode::invalid_input, "bad request header '" + name + "'");
        }
        has_content_type = has_content_type || iequals(name, "Content-Type");
        ok = ok && header_list.add(name + ": " + value);
    }
    if (!m_options.token.empty() && m_options.max_redirects == 0) {
        ok = ok && header_list.add("Authorization: Bearer " + m_options.token);
    }
    if (!has_content_type && !body.empty()) {
        ok = ok && header_list.add("Content-Type: application/json");
    }
    ok = ok && header_list.add("Expect:"); // no 100-continue round trip
    if (!ok) {
        return make_error(ErrorCode::internal, "out of memory building request headers");
    }

    std::chrono::milliseconds total = timeout.value_or(m_options.timeout);
    BodySink sink(curl, body_file, m_options.max_body_bytes);
    char error_buffer[CURL_ERROR_SIZE] = {0};
    std::string method_string(method);

    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(total.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(m_options.connect_timeout.count()));
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!m_options.ca_cert.empty()) {
        curl_easy_setopt(curl, CURLOPT_CAINFO, m_options.ca_cert.c_str());
        curl_easy_setopt(curl, CURLOPT_CAPATH, static_cast<char*>(nullptr));
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, header_list.list);
    follow_redirects(curl, m_options);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &take_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "gpupool/" GPUPOOL_VERSION);

    if (method_string == "GET" && body.empty()) {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    } else if (method_string == "HEAD") {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else {
        if (!body.empty() || method_string == "POST" || method_string == "PUT" || method_string == "PATCH") {
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
        }
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method_string.c_str());
    }

    CURLcode code = curl_easy_perform(curl);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
    if (auto failed = sink_failure(sink, url)) {
        return *failed;
    }
    if (code != CURLE_OK) {
        unsent = code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_SSL_CONNECT_ERROR;
        return transfer_error(code, url, error_buffer, m_options, total);
    }

    Response response;
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    response.status = static_cast<int>(status);
    char* content_type = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &content_type);
    response.content_type = content_type != nullptr ? content_type : "";
    response.body = std::move(sink.body);
    curl_header* prev = nullptr;
    while (curl_header* h = curl_easy_nextheader(curl, CURLH_HEADER, -1, prev)) {
        response.headers.add(h->name, h->value);
        prev = h;
    }
    return response;
}

} // namespace gpupool::net
