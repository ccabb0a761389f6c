#include "worker/cache/hub_fetch.hpp"

#include "core/util/files.hpp"

#include "core/util/sha256.hpp"
#include "core/util/strings.hpp"

#include <curl/curl.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_max_api_body = 32 * 1024 * 1024;
constexpr std::size_t k_max_error_body = 4096;
constexpr long k_max_redirects = 5;
constexpr int k_attempts_per_blob = 3;
constexpr std::chrono::milliseconds k_api_timeout{120'000};
constexpr std::chrono::milliseconds k_progress_every{100};

// ---- the hub's answer --------------------------------------------------------------------------------------

// obj[key], or null when it is not there.
const nlohmann::json& member(const nlohmann::json& obj, const char* key) {
    static const nlohmann::json k_null;
    const auto it = obj.find(key);
    return it == obj.end() ? k_null : *it;
}

// A JSON integer in [0, max], or an Error naming `field`.
Result<std::int64_t> read_size(const nlohmann::json& j, const std::string& field, std::int64_t max) {
    if (!j.is_number_integer() ||
        (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(max))) {
        return invalid_input("expected a whole number of bytes, at most " + std::to_string(max), field);
    }
    const auto v = j.get<std::int64_t>();
    if (v < 0 || v > max) {
        return invalid_input("expected a whole number of bytes from 0 to " + std::to_string(max), field);
    }
    return v;
}

Result<std::string> read_hex(const nlohmann::json& j, std::size_t length, const std::string& field) {
    if (!j.is_string() || !is_lower_hex(j.get_ref<const std::string&>(), length)) {
        return invalid_input("expected " + std::to_string(length) + " lowercase hex digits", field);
    }
    return j.get<std::string>();
}

Result<HubFile> parse_sibling(const nlohmann::json& s, const std::string& at, const HubOptions& o) {
    if (!s.is_object()) {
        return invalid_input("expected an object describing a file", at);
    }
    HubFile f;
    const auto& name = member(s, "rfilename");
    if (!name.is_string()) {
        return invalid_input("expected the file's name as a string", at + ".rfilename");
    }
    f.rfilename = name.get<std::string>();
    if (auto st = check_rfilename(f.rfilename); !st) {
        return invalid_input(st.error().message, at + ".rfilename");
    }
    auto sz = read_size(member(s, "size"), at + ".size", o.max_model_bytes);
    if (!sz) {
        return sz.error();
    }
    f.size = *sz;
    auto id = read_hex(member(s, "blobId"), 40, at + ".blobId");
    if (!id) {
        return id.error();
    }
    f.blob_id = std::move(*id);
    const auto lfs = s.find("lfs");
    if (lfs != s.end() && !lfs->is_null()) {
        if (!lfs->is_object()) {
            return invalid_input("expected an object", at + ".lfs");
        }
        auto hex = read_hex(member(*lfs, "sha256"), 64, at + ".lfs.sha256");
        if (!hex) {
            return hex.error();
        }
        f.lfs_sha256 = std::move(*hex);
        const auto lsize = lfs->find("size");
        if (lsize != lfs->end()) {
            auto v = read_size(*lsize, at + ".lfs.size", o.max_model_bytes);
            if (!v) {
                return v.error();
            }
            if (*v != f.size) {
                return invalid_input("the LFS size " + std::to_string(*v) + " differs from the file's size " +
                                   std::to_string(f.size),
                               at + ".lfs.size");
            }
        }
    }
    return f;
}

// Names listed twice, a name that is also another's folder, a blob declared with two sizes, and the
// total over distinct blobs.
Status check_siblings(HubRevision& rev, const HubOptions& o) {
    std::set<std::string> names;
    std::map<std::string, std::int64_t> blobs;
    for (std::size_t i = 0; i < rev.files.size(); ++i) {
        const auto& f = rev.files[i];
        const std::string at = "siblings[" + std::to_string(i) + "]";
        if (!names.insert(f.rfilename).second) {
            return invalid_input("`" + f.rfilename + "` is listed twice", at + ".rfilename");
        }
        const auto [it, fresh] = blobs.emplace(f.blob(), f.size);
        if (!fresh && it->second != f.size) {
            return invalid_input("blob " + f.blob() + " is listed with two sizes", at + ".size");
        }
        if (fresh && __builtin_add_overflow(rev.total_bytes, f.size, &rev.total_bytes)) {
            rev.total_bytes = o.max_model_bytes + 1;
        }
        if (rev.total_bytes > o.max_model_bytes) {
            return invalid_input("the revision's files add up to more than the " + std::to_string(o.max_model_bytes) +
                               " bytes a model may have",
                           "siblings");
        }
    }
    for (std::size_t i = 0; i < rev.files.size(); ++i) {
        const std::string& name = rev.files[i].rfilename;
        for (std::size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
            if (names.contains(name.substr(0, slash))) {
                return invalid_input("`" + name.substr(0, slash) + "` is both a file and a folder",
                               "siblings[" + std::to_string(i) + "].rfilename");
            }
        }
    }
    return {};
}

} // namespace

Result<HubRevision> parse_hub_revision(std::string_view text, const HubOptions& o) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return invalid_input("the hub's answer is not a JSON object");
    }
    if (const auto id = j.find("id"); id != j.end() && !id->is_string()) {
        return invalid_input("expected the model's id as a string", "id");
    }
    HubRevision rev;
    auto commit = read_hex(member(j, "sha"), 40, "sha");
    if (!commit) {
        return commit.error();
    }
    rev.commit = std::move(*commit);
    const auto siblings = j.find("siblings");
    if (siblings == j.end() || !siblings->is_array()) {
        return invalid_input("expected the list of the revision's files", "siblings");
    }
    if (siblings->size() > static_cast<std::size_t>(std::max<std::int64_t>(0, o.max_files))) {
        return invalid_input("the revision has " + std::to_string(siblings->size()) + " files, more than the " +
                           std::to_string(o.max_files) + " allowed",
                       "siblings");
    }
    for (std::size_t i = 0; i < siblings->size(); ++i) {
        auto f = parse_sibling((*siblings)[i], "siblings[" + std::to_string(i) + "]", o);
        if (!f) {
            return f.error();
        }
        rev.files.push_back(std::move(*f));
    }
    if (auto st = check_siblings(rev, o); !st) {
        return st.error();
    }
    return rev;
}

namespace {

// ---- libcurl -----------------------------------------------------------------------------------------------

void global_init_once() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd >= 0) {
            ::close(fd);
        }
    }
};

long response_code(CURL* c) {
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

std::string escape_segment(CURL* c, std::string_view s) {
    char* e = curl_easy_escape(c, s.data(), static_cast<int>(s.size()));
    std::string out = e != nullptr ? e : "";
    curl_free(e);
    return out;
}

// Each '/'-separated segment escaped, the slashes kept.
std::string escape_path(CURL* c, std::string_view path) {
    std::string out;
    std::size_t start = 0;
    while (true) {
        const std::size_t slash = path.find('/', start);
        out += escape_segment(c, path.substr(start, slash == std::string_view::npos ? slash : slash - start));
        if (slash == std::string_view::npos) {
            return out;
        }
        out += '/';
        start = slash + 1;
    }
}

// The options every request shares: redirects, timeouts, TLS, the token for the endpoint's host alone.
void common_options(CURL* c, const HubOptions& o, const std::string& url, char* error_buffer) {
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, k_max_redirects);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>(std::chrono::ceil<std::chrono::seconds>(o.stall_timeout).count())));
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!o.ca_cert.empty()) {
        curl_easy_setopt(c, CURLOPT_CAINFO, o.ca_cert.c_str());
        curl_easy_setopt(c, CURLOPT_CAPATH, static_cast<char*>(nullptr));
    }
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gpupool/" GPUPOOL_VERSION);
    if (!o.token.empty()) {
        // libcurl sends it to the first URL's host, port and scheme only, never after a redirect elsewhere
        // (CURLOPT_UNRESTRICTED_AUTH stays off).
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, o.token.c_str());
    }
}

Error transfer_error(CURLcode code, const std::string& url, const char* detail) {
    const std::string why = detail[0] != '\0' ? std::string(detail) : std::string(curl_easy_strerror(code));
    switch (code) {
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_TOO_MANY_REDIRECTS:
        return make_error(ErrorCode::invalid_input, "bad URL or redirect for " + url + ": " + why);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
        return make_error(ErrorCode::invalid_input, "TLS verification failed for " + url + ": " + why, "ca_cert");
    default:
        return make_error(ErrorCode::unavailable, "fetching " + url + " failed: " + why);
    }
}

// What an HTTP status other than success means for `what` (a model or one of its files).
Error status_error(long status, const std::string& what, const std::string& url, std::string_view body) {
    const std::string detail = body.empty() ? std::string() : ": " + util::escape_control(body.substr(0, 300));
    if (status == 401 || status == 403) {
        return make_error(status == 401 ? ErrorCode::unauthorized : ErrorCode::forbidden,
                          "the hub refused " + what + " (HTTP " + std::to_string(status) +
                              "): the model is gated or private (or does not exist). Accept its terms on the hub and "
                              "give this worker a hub token: hf_token_file in the owner's worker.toml");
    }
    if (status == 404) {
        return make_error(ErrorCode::not_found, "the hub has no " + what + " (HTTP 404 for " + url + ")" + detail);
    }
    if (status == 429 || status >= 500) {
        return make_error(ErrorCode::unavailable,
                          "the hub could not serve " + what + " now (HTTP " + std::to_string(status) + ")" + detail);
    }
    return make_error(ErrorCode::io, "the hub answered HTTP " + std::to_string(status) + " for " + url + detail);
}

struct TextSink {
    std::string body;
    std::size_t cap = 0;
    bool too_big = false;
};

size_t take_text(char* data, size_t size, size_t count, void* user) {
    auto* sink = static_cast<TextSink*>(user);
    const size_t n = size * count;
    if (sink->body.size() + n > sink->cap) {
        sink->too_big = true;
        return 0;
    }
    sink->body.append(data, n);
    return n;
}

// Reports progress to the caller, at most every k_progress_every, and remembers a cancel.
struct Progress {
    const std::function<bool(const FetchProgress&)>* report = nullptr;
    FetchProgress now;
    std::chrono::steady_clock::time_point last{};
    bool called = false;
    bool cancelled = false;

    // Calls report() unless it was called less than k_progress_every ago (or `force`); false: cancel.
    bool tick(bool force = false) {
        const auto t = std::chrono::steady_clock::now();
        if (report == nullptr || !*report || (called && !force && t - last < k_progress_every)) {
            return !cancelled;
        }
        called = true;
        last = t;
        cancelled = cancelled || !(*report)(now);
        return !cancelled;
    }
};

// Where a blob's bytes go, and what was wrong with them.
struct BlobSink {
    CURL* curl = nullptr;
    int fd = -1;
    std::int64_t offset = 0;   // bytes in the file
    std::int64_t expected = 0; // the declared size
    bool started = false;
    bool too_long = false;
    bool bad_range = false;
    int write_errno = 0;
    std::string other_body; // an answer that is not the bytes (capped)
    Progress* progress = nullptr;
};


// The first bytes of a 200 or 206: a 200 starts the file again, a 206 must continue where it ends.
bool start_body(BlobSink& s, long status) {
    s.started = true;
    if (status == 200 && s.offset > 0) {
        if (::ftruncate(s.fd, 0) != 0) {
            s.write_errno = errno;
            return false;
        }
        s.progress->now.done_bytes -= s.offset;
        s.offset = 0;
    }
    if (status == 206) {
        curl_header* h = nullptr;
        const std::string want = "bytes " + std::to_string(s.offset) + "-";
        if (curl_easy_header(s.curl, "Content-Range", 0, CURLH_HEADER, -1, &h) != CURLHE_OK ||
            !std::string_view(h->value).starts_with(want)) {
            s.bad_range = true;
            return false;
        }
    }
    return true;
}

size_t take_blob(char* data, size_t size, size_t count, void* user) {
    auto* s = static_cast<BlobSink*>(user);
    const size_t n = size * count;
    const long status = response_code(s->curl);
    if (status != 200 && status != 206) {
        const size_t keep = std::min(n, k_max_error_body - std::min(k_max_error_body, s->other_body.size()));
        s->other_body.append(data, keep);
        return n;
    }
    if (!s->started && !start_body(*s, status)) {
        return 0;
    }
    if (static_cast<std::int64_t>(n) > s->expected - s->offset) {
        s->too_long = true;
        return 0;
    }
    if (!util::write_all(s->fd, std::string_view(data, n))) {
        s->write_errno = errno;
        return 0;
    }
    s->offset += static_cast<std::int64_t>(n);
    s->progress->now.done_bytes += static_cast<std::int64_t>(n);
    return n;
}

int on_transfer_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Progress*>(user)->tick() ? 0 : 1;
}

} // namespace

// ---- HubFetcher --------------------------------------------------------------------------------------------

namespace {

struct Request {
    CURL* curl;
    const HubOptions& o;
    std::string base; // the endpoint without a trailing '/'
};

Result<HubRevision> query_revision(const Request& r, const ModelRef& m) {
    const std::string url = r.base + "/api/models/" + escape_path(r.curl, m.repo) + "/revision/" +
                            escape_segment(r.curl, m.revision) + "?blobs=true";
    std::array<char, CURL_ERROR_SIZE> error_buffer{};
    common_options(r.curl, r.o, url, error_buffer.data());
    TextSink sink;
    sink.cap = k_max_api_body;
    curl_easy_setopt(r.curl, CURLOPT_WRITEFUNCTION, &take_text);
    curl_easy_setopt(r.curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(r.curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max(k_api_timeout, 2 * r.o.stall_timeout).count()));
    const CURLcode code = curl_easy_perform(r.curl);
    curl_easy_setopt(r.curl, CURLOPT_ERRORBUFFER, nullptr);
    if (sink.too_big) {
        return invalid_input("the hub's answer for " + m.id() + " is larger than " + std::to_string(k_max_api_body) +
                       " bytes");
    }
    if (code != CURLE_OK) {
        return transfer_error(code, url, error_buffer.data());
    }
    const long status = response_code(r.curl);
    if (status != 200) {
        return status_error(status, "model " + m.id(), url, sink.body);
    }
    auto rev = parse_hub_revision(sink.body, r.o);
    if (!rev) {
        Error e = rev.error();
        e.message = "the hub's answer for " + m.id() + " is malformed: " + e.message;
        return e;
    }
    if (is_lower_hex(m.revision, 40) && rev->commit != m.revision) {
        return invalid_input("the hub answered commit " + rev->commit + " when asked for " + m.revision, "sha");
    }
    return rev;
}

// One request for the rest of a blob into `partial`; ok once the file holds the declared size.
Status download_once(const Request& r, const std::string& url, const fs::path& partial, const HubFile& f,
                     Progress& progress) {
    Fd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644));
    struct stat st {};
    if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        return make_error(ErrorCode::io, "cannot open " + partial.string() + ": " + std::strerror(errno));
    }
    BlobSink sink;
    sink.curl = r.curl;
    sink.fd = fd.fd;
    sink.offset = st.st_size;
    sink.expected = f.size;
    sink.progress = &progress;
    if (sink.offset > f.size) {
        if (::ftruncate(fd.fd, 0) != 0) {
            return make_error(ErrorCode::io, "cannot truncate " + partial.string() + ": " + std::strerror(errno));
        }
        sink.offset = 0; // not counted as resumed by plan_blobs either
    }
    if (sink.offset == f.size) {
        return {};
    }
    std::array<char, CURL_ERROR_SIZE> error_buffer{};
    common_options(r.curl, r.o, url, error_buffer.data());
    const std::string range = std::to_string(sink.offset) + "-";
    if (sink.offset > 0) {
        curl_easy_setopt(r.curl, CURLOPT_RANGE, range.c_str());
    }
    curl_easy_setopt(r.curl, CURLOPT_WRITEFUNCTION, &take_blob);
    curl_easy_setopt(r.curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(r.curl, CURLOPT_XFERINFOFUNCTION, &on_transfer_progress);
    curl_easy_setopt(r.curl, CURLOPT_XFERINFODATA, &progress);
    curl_easy_setopt(r.curl, CURLOPT_NOPROGRESS, 0L);
    const CURLcode code = curl_easy_perform(r.curl);
    curl_easy_setopt(r.curl, CURLOPT_ERRORBUFFER, nullptr);
    const bool synced = ::fsync(fd.fd) == 0;
    const long status = response_code(r.curl);
    if (progress.cancelled) {
        return make_error(ErrorCode::unavailable, "the download of " + f.rfilename + " was cancelled",
                          std::string(k_fetch_cancelled));
    }
    if (sink.write_errno != 0 || !synced) {
        return make_error(ErrorCode::io, "cannot write " + partial.string() + ": " +
                                             std::strerror(sink.write_errno != 0 ? sink.write_errno : errno));
    }
    if (sink.too_long || sink.bad_range || status == 416) {
        progress.now.done_bytes -= sink.offset;
        if (::ftruncate(fd.fd, 0) != 0) {
            return make_error(ErrorCode::io, "cannot truncate " + partial.string() + ": " + std::strerror(errno));
        }
    }
    if (sink.too_long) {
        return invalid_input("the hub sent more than the " + std::to_string(f.size) + " bytes it declared for " +
                       f.rfilename);
    }
    if (sink.bad_range || status == 416) {
        // Not the bytes asked for: this blob starts again from zero.
        return make_error(ErrorCode::unavailable,
                          "the hub did not continue " + f.rfilename + " from byte " + std::to_string(sink.offset));
    }
    if (code != CURLE_OK) {
        return transfer_error(code, url, error_buffer.data());
    }
    if (status != 200 && status != 206) {
        return status_error(status, "file " + f.rfilename, url, sink.other_body);
    }
    if (sink.offset != f.size) {
        return make_error(ErrorCode::unavailable, "the transfer of " + f.rfilename + " ended after " +
                                                      std::to_string(sink.offset) + " of " + std::to_string(f.size) +
                                                      " bytes");
    }
    return {};
}

// The hash a blob is named by, of `file`'s content.
Result<std::string> content_hash(const fs::path& file, const HubFile& f) {
    return f.lfs_sha256 ? util::sha256_file_hex(file) : git_blob_sha1_file(file);
}

// The blob's content against the hub's hash and size; a mismatch removes the partial blob.
Status verify_blob(const fs::path& partial, const HubFile& f) {
    std::error_code ec;
    const auto size = fs::file_size(partial, ec);
    auto got = content_hash(partial, f);
    if (!got) {
        return got.error();
    }
    const std::string& want = f.lfs_sha256 ? *f.lfs_sha256 : f.blob_id;
    if (ec || static_cast<std::int64_t>(size) != f.size || *got != want) {
        fs::remove(partial, ec);
        return make_error(ErrorCode::io,
                          "verification of " + f.rfilename + " failed: expected " +
                              (f.lfs_sha256 ? "sha256 " : "git blob sha1 ") + want + " (" + std::to_string(f.size) +
                              " bytes), got " + *got + " (" + std::to_string(size) +
                              " bytes); the partial blob "
                              "was deleted",
                          f.lfs_sha256 ? "lfs.sha256" : "blobId");
    }
    return {};
}

// Downloads (resuming) and verifies one blob, then renames it into place.
Status fetch_blob(const Request& r, const ModelRef& m, const std::string& commit, const fs::path& blobs,
                  const HubFile& f, Progress& progress) {
    const std::string url =
        r.base + "/" + escape_path(r.curl, m.repo) + "/resolve/" + commit + "/" + escape_path(r.curl, f.rfilename);
    const fs::path partial = blobs / (f.blob() + ".incomplete");
    Status st;
    for (int attempt = 1; attempt <= k_attempts_per_blob; ++attempt) {
        st = download_once(r, url, partial, f, progress);
        if (st || st.error().code != ErrorCode::unavailable || is_fetch_cancelled(st.error())) {
            break;
        }
        spdlog::info("model cache: {} (attempt {} of {})", st.error().message, attempt, k_attempts_per_blob);
    }
    if (!st) {
        return st;
    }
    if (auto v = verify_blob(partial, f); !v) {
        return v;
    }
    std::error_code ec;
    fs::rename(partial, blobs / f.blob(), ec); // replaces a symlink there, never follows it
    if (ec) {
        return make_error(ErrorCode::io, "cannot rename " + partial.string() + ": " + ec.message());
    }
    return {};
}

// What is on disk for each distinct blob: complete (skipped), partial (resumed) or nothing.
struct FetchPlan {
    std::vector<const HubFile*> missing; // one file per distinct blob to download
    std::int64_t present_bytes = 0;      // complete blobs and partial bytes already there
    std::int64_t add_bytes = 0;          // what the missing blobs will add to the cache, whole
    std::int64_t download_bytes = 0;     // what is still to arrive
};

Result<FetchPlan> plan_blobs(const fs::path& blobs, const HubRevision& rev) {
    FetchPlan plan;
    std::set<std::string> seen;
    for (const auto& f : rev.files) {
        if (!seen.insert(f.blob()).second) {
            continue;
        }
        std::error_code ec;
        const fs::path blob = blobs / f.blob();
        const auto st = fs::symlink_status(blob, ec);
        const bool regular = !ec && fs::is_regular_file(st);
        const auto size = regular ? static_cast<std::int64_t>(fs::file_size(blob, ec)) : -1;
        if (regular && !ec && size == f.size) {
            plan.present_bytes += f.size;
            continue;
        }
        // A blob of another size is damaged, unless its content is the hash: then the hub's size is wrong.
        if (auto hash = regular ? content_hash(blob, f) : Result<std::string>(std::string());
            hash && *hash == f.blob()) {
            return invalid_input("the hub declares " + std::to_string(f.size) + " bytes for " + f.rfilename +
                               " but its blob " + f.blob() + " has " + std::to_string(size),
                           "size");
        }
        fs::remove_all(blob, ec); // a symlink, a folder or a damaged blob: not ours
        const fs::path partial = blobs / (f.blob() + ".incomplete");
        const auto pst = fs::symlink_status(partial, ec);
        std::int64_t have = 0;
        if (!ec && fs::is_regular_file(pst)) {
            have = static_cast<std::int64_t>(fs::file_size(partial, ec));
            have = ec || have > f.size ? 0 : have;
        } else if (!ec && fs::exists(pst)) {
            fs::remove_all(partial, ec);
        }
        plan.missing.push_back(&f);
        plan.present_bytes += have;
        plan.add_bytes += f.size;
        plan.download_bytes += f.size - have;
    }
    return plan;
}

// Evicts for the missing bytes, then checks the cap and the disk.
Status make_room(HubCache& cache, const ModelRef& m, const FetchPlan& plan, const std::set<std::string>& pinned) {
    if (plan.missing.empty()) {
        return {};
    }
    std::set<std::string> keep = pinned;
    keep.insert(m.repo);
    const auto evicted = cache.evict_for(plan.add_bytes, keep);
    if (!evicted.empty()) {
        spdlog::info("model cache: evicted {} for {}", util::join(evicted, ", "), m.id());
    }
    const std::int64_t used = cache.used_bytes();
    if (cache.cap_bytes() > 0 && used + plan.add_bytes > cache.cap_bytes()) {
        return make_error(ErrorCode::unavailable, "the model cache's cap of " + std::to_string(cache.cap_bytes()) +
                                                      " bytes cannot hold " + m.id() + " (" +
                                                      std::to_string(plan.add_bytes) +
                                                      " bytes more) beside the models in "
                                                      "use; it holds " +
                                                      std::to_string(used) + " bytes now");
    }
    const std::int64_t free_now = cache.free_bytes();
    if (free_now < plan.download_bytes) {
        return make_error(ErrorCode::unavailable, "not enough disk space for " + m.id() + " under " +
                                                      cache.root().string() + ": " +
                                                      std::to_string(plan.download_bytes) + " bytes to download, " +
                                                      std::to_string(free_now) + " free");
    }
    return {};
}

Status check_options(const HubOptions& o) {
    if (!o.endpoint.starts_with("https://") && !o.endpoint.starts_with("http://")) {
        return invalid_input("the hub endpoint must be an http(s) URL, not `" + util::escape_control(o.endpoint) + "`",
                       "endpoint");
    }
    const auto bad = [](std::string_view s) {
        return std::any_of(s.begin(), s.end(),
                           [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; });
    };
    if (bad(o.endpoint)) {
        return invalid_input("the hub endpoint holds a space or a control character", "endpoint");
    }
    if (bad(o.token)) {
        return invalid_input("the hub token holds a space or a control character", "token");
    }
    std::error_code ec;
    if (!o.ca_cert.empty() && !fs::is_regular_file(o.ca_cert, ec)) {
        return invalid_input("the CA bundle " + o.ca_cert + " does not exist", "ca_cert");
    }
    return {};
}

} // namespace

HubFetcher::HubFetcher(HubOptions o, HubCache& cache) : m_options(std::move(o)), m_cache(cache) {
    global_init_once();
}

Status HubFetcher::fetch(const ModelRef& m, const std::set<std::string>& pinned,
                         const std::function<bool(const FetchProgress&)>& progress, std::int64_t now_ms) {
    auto ref = parse_model_ref(m.id());
    if (!ref) {
        return ref.error();
    }
    if (auto st = check_options(m_options); !st) {
        return st;
    }
    const std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
    if (!easy) {
        return make_error(ErrorCode::internal, "could not create a libcurl handle");
    }
    std::string base = m_options.endpoint;
    while (base.ends_with('/')) {
        base.pop_back();
    }
    const Request r{easy.get(), m_options, base};
    auto rev = query_revision(r, m);
    if (!rev) {
        return rev.error();
    }
    const fs::path dir = m_cache.model_dir(m.repo);
    const fs::path folder = fs::path("hub") / model_folder_name(m.repo);
    for (const char* sub : {"blobs", "snapshots", "refs"}) {
        if (auto st = ensure_real_dir(m_cache.root(), folder / sub); !st) {
            return st;
        }
    }
    const auto plan = plan_blobs(dir / "blobs", *rev);
    if (!plan) {
        return plan.error();
    }
    if (auto st = make_room(m_cache, m, *plan, pinned); !st) {
        return st;
    }
    Progress p;
    p.report = &progress;
    p.now = {plan->present_bytes, rev->total_bytes};
    if (!p.tick(true)) {
        return make_error(ErrorCode::unavailable, "the fetch of " + m.id() + " was cancelled",
                          std::string(k_fetch_cancelled));
    }
    for (const HubFile* f : plan->missing) {
        if (auto st = fetch_blob(r, m, rev->commit, dir / "blobs", *f, p); !st) {
            return st;
        }
    }
    std::vector<SnapshotFile> files;
    for (const auto& f : rev->files) {
        files.push_back({f.rfilename, f.blob()});
    }
    if (auto st = link_snapshot(dir, rev->commit, files); !st) {
        return st;
    }
    if (auto st = write_ref(dir, m.revision, rev->commit); !st) {
        return st;
    }
    p.now.done_bytes = rev->total_bytes;
    p.tick(true); // done: a late "cancel" changes nothing
    return m_cache.record({m.repo, m.revision, rev->commit, rev->total_bytes, now_ms});
}

} // namespace gpupool::worker
