// A model's config.json from a given path, the local Hugging Face cache or the hub (model_config.hpp).
#include "core/client/model_config.hpp"

#include "core/net/http_client.hpp"
#include "core/recipe/image_ref.hpp"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

namespace gpupool::client {

namespace {

namespace fs = std::filesystem;
namespace urls = boost::urls;

constexpr int k_config_max_redirects = 5;

const char* env_or_null(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
}

// The file's text, at most k_max_config_bytes; not_found when it is not a regular file.
Result<ModelConfig> read_local_config(const fs::path& path) {
    std::error_code ec;
    const fs::path file = fs::is_directory(path, ec) ? path / "config.json" : path;
    if (!fs::is_regular_file(file, ec)) {
        return make_error(ErrorCode::not_found, file.string() + ": no such file");
    }
    if (static_cast<std::int64_t>(fs::file_size(file, ec)) > k_max_config_bytes || ec) {
        return make_error(ErrorCode::invalid_input, file.string() + ": larger than " +
                                                        std::to_string(k_max_config_bytes) +
                                                        " bytes; not a config.json");
    }
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in && !in.eof()) {
        return make_error(ErrorCode::io, file.string() + ": cannot be read");
    }
    return ModelConfig{text.str(), file.string()};
}

// "org/name@revision" (a pinned revision, as `gpupool repro` writes it) split in two; "main" when
// none is pinned. The recipe's rules (recipe::check_model_id) have checked the revision's characters.
std::pair<std::string, std::string> repo_and_revision(const std::string& model) {
    const auto at = model.find('@');
    return at == std::string::npos ? std::pair{model, std::string("main")}
                                   : std::pair{model.substr(0, at), model.substr(at + 1)};
}

// models--org--name/snapshots/<rev>/config.json: the pinned commit's, else refs/<revision>'s, else
// (unpinned) the newest snapshot with one.
std::optional<fs::path> cached_config_path(const fs::path& hub_cache, const std::string& pinned) {
    const auto [model, revision] = repo_and_revision(pinned);
    std::string folder = "models--" + model;
    for (auto at = folder.find('/'); at != std::string::npos; at = folder.find('/', at)) {
        folder.replace(at, 1, "--");
    }
    const fs::path repo = hub_cache / folder;
    std::error_code ec;
    std::ifstream ref(repo / "refs" / revision);
    std::string commit;
    if (recipe::is_lower_hex(revision, 40)) {
        commit = revision; // a commit names its snapshot itself
    } else if (ref) {
        std::getline(ref, commit);
    }
    if (!commit.empty() && commit.find('/') == std::string::npos && commit != "." && commit != "..") {
        const fs::path p = repo / "snapshots" / commit / "config.json";
        if (fs::is_regular_file(p, ec)) {
            return p;
        }
    }
    if (revision != "main") {
        return std::nullopt; // pinned: that revision's snapshot or none
    }
    std::optional<fs::path> newest;
    fs::file_time_type newest_time{};
    for (auto it = fs::directory_iterator(repo / "snapshots", ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        const fs::path p = it->path() / "config.json";
        std::error_code ec2;
        if (fs::is_regular_file(p, ec2)) {
            const auto t = fs::last_write_time(p, ec2);
            if (!ec2 && (!newest || t > newest_time)) {
                newest = p;
                newest_time = t;
            }
        }
    }
    return newest;
}

Error hub_error(const std::string& model, const std::string& url, const std::string& why,
                ErrorCode code = ErrorCode::unavailable) {
    return make_error(code, model + ": cannot download " + url + ": " + why);
}

// GET {endpoint}/{repo}/resolve/{revision}/config.json, redirects followed by the HTTP client
// (ClientOptions::max_redirects: the token stays with the endpoint's scheme, host and port).
Result<ModelConfig> download_config(const std::string& model, const ModelConfigOptions& o) {
    std::string endpoint = o.endpoint;
    while (!endpoint.empty() && endpoint.back() == '/') {
        endpoint.pop_back();
    }
    const auto [repo, revision] = repo_and_revision(model);
    const std::string path = "/" + repo + "/resolve/" + revision + "/config.json";
    const std::string url = endpoint + path;
    auto start = urls::parse_absolute_uri(url);
    if (!start || (start->scheme() != "http" && start->scheme() != "https") || !start->has_authority()) {
        return make_error(ErrorCode::invalid_input, "`" + o.endpoint + "` is not an http:// or https:// URL",
                          "hf_endpoint");
    }
    net::ClientOptions co;
    co.base_url = endpoint;
    co.token = o.token;
    co.ca_cert = o.ca_cert;
    co.timeout = o.timeout;
    co.connect_timeout = std::min(o.timeout, std::chrono::milliseconds(10'000));
    co.max_body_bytes = k_max_config_bytes;
    co.max_redirects = k_config_max_redirects;
    co.server_name = "the hub";
    auto r = net::HttpClient(co).get(path);
    if (!r) {
        // It names the URL already.
        return make_error(r.error().code == ErrorCode::unavailable ? ErrorCode::unavailable : ErrorCode::invalid_input,
                          model + ": cannot download config.json: " + r.error().message);
    }
    if (r->status == 200) {
        return ModelConfig{std::move(r->body), url};
    }
    if (r->status >= 300 && r->status < 400) {
        return hub_error(model, url,
                         "the hub redirected more than " + std::to_string(k_config_max_redirects) +
                             " times, or to a URL gpupool does not follow",
                         ErrorCode::invalid_input);
    }
    if (r->status == 401 || r->status == 403) {
        return hub_error(model, url,
                         "the hub answered " + std::to_string(r->status) +
                             ": the model is gated or private; give a token (HF_TOKEN, or --hf-token-file FILE)",
                         r->status == 401 ? ErrorCode::unauthorized : ErrorCode::forbidden);
    }
    if (r->status == 404) {
        return hub_error(model, url, "the hub has no such model or file (404)", ErrorCode::not_found);
    }
    return hub_error(model, url, "the hub answered " + std::to_string(r->status));
}

} // namespace

Result<ModelConfig> find_model_config(const std::string& model, const ModelConfigOptions& o) {
    if (auto it = o.paths.find(model); it != o.paths.end()) {
        auto local = read_local_config(it->second);
        if (!local) {
            Error e = local.error();
            e.message = model + " (--model-config): " + e.message;
            return e;
        }
        return local;
    }
    std::string tried;
    if (!o.hub_cache.empty()) {
        if (auto p = cached_config_path(o.hub_cache, model)) {
            return read_local_config(*p);
        }
        tried = "not in the local Hugging Face cache (" + o.hub_cache.string() + ")";
    }
    if (o.offline) {
        return make_error(ErrorCode::unavailable,
                          model + ": no config.json: " + (tried.empty() ? "" : tried + ", and ") + "offline");
    }
    return download_config(model, o);
}

fs::path hub_cache_from_env() {
    if (const char* v = env_or_null("HF_HUB_CACHE")) {
        return v;
    }
    if (const char* v = env_or_null("HF_HOME")) {
        return fs::path(v) / "hub";
    }
    if (const char* v = env_or_null("XDG_CACHE_HOME")) {
        return fs::path(v) / "huggingface" / "hub";
    }
    if (const char* v = env_or_null("HOME")) {
        return fs::path(v) / ".cache" / "huggingface" / "hub";
    }
    return {};
}

} // namespace gpupool::client
