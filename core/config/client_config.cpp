#include "core/config/client_config.hpp"

#include "core/net/url.hpp"

#include "core/catalog/repo_ref.hpp"
#include "core/util/files.hpp"
#include "core/util/strings.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace gpupool::config {

namespace fs = std::filesystem;

std::optional<std::string> real_env(const char* name) {
    const char* v = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read once at start-up
    if (v == nullptr || *v == '\0') {
        return std::nullopt;
    }
    return std::string(v);
}

fs::path default_config_path(const EnvLookup& env) {
    if (auto xdg = env("XDG_CONFIG_HOME")) {
        return fs::path(*xdg) / "gpupool" / "config.toml";
    }
    if (auto home = env("HOME")) {
        return fs::path(*home) / ".config" / "gpupool" / "config.toml";
    }
    return {};
}

namespace {

Error file_error(const std::string& file, const toml::source_region& where, std::string field, std::string message) {
    Error e = make_error(ErrorCode::invalid_input, std::move(message), std::move(field));
    e.where = SourcePos{file, where.begin.line, where.begin.column};
    return e;
}

// `recipes`: an array of repository references, each checked now so that a typo is reported with
// its line rather than when git fails on it.
Status read_recipes(const fs::path& path, const toml::node& value, ClientConfig& cfg) {
    const auto* arr = value.as_array();
    if (arr == nullptr) {
        return file_error(path.string(), value.source(), "recipes", "expected an array of repository URLs or paths");
    }
    cfg.recipes.clear();
    for (std::size_t i = 0; i < arr->size(); ++i) {
        const toml::node& el = *arr->get(i);
        const std::string field = "recipes[" + std::to_string(i) + "]";
        const auto* s = el.as_string();
        if (s == nullptr) {
            return file_error(path.string(), el.source(), field, "expected a string (a URL or a path)");
        }
        if (auto ref = catalog::parse_repo_ref(s->get(), field); !ref) {
            return file_error(path.string(), el.source(), field, ref.error().message);
        }
        cfg.recipes.push_back(s->get());
    }
    return {};
}

Status read_file(const fs::path& path, ClientConfig& cfg) {
    toml::table table;
    try {
        table = toml::parse_file(path.string());
    } catch (const toml::parse_error& e) {
        return file_error(path.string(), e.source(), "", "TOML syntax error: " + std::string(e.description()));
    }
    const std::vector<std::string> known{"url", "token", "ca_cert", "recipes"};
    for (auto&& [key, value] : table) {
        std::string k(key.str());
        if (std::find(known.begin(), known.end(), k) == known.end()) {
            std::string msg = "unknown key `" + k + "` in the client config";
            if (auto s = util::nearest(k, known)) {
                msg += "; did you mean `" + *s + "`?";
            }
            return file_error(path.string(), key.source(), k, msg);
        }
        if (k == "recipes") {
            if (auto st = read_recipes(path, value, cfg); !st) {
                return st;
            }
            continue;
        }
        const auto* s = value.as_string();
        if (s == nullptr) {
            return file_error(path.string(), value.source(), k, "expected a string");
        }
        if (k == "url") {
            cfg.url = s->get();
            cfg.url_source = path.string();
        } else if (k == "token") {
            cfg.token = s->get();
            cfg.token_source = path.string();
        } else {
            cfg.ca_cert = s->get();
        }
    }
    return {};
}

} // namespace

Result<std::string> parse_token_text(std::string text, const std::string& what, const std::string& source) {
    if (text.size() > 4096) {
        return make_error(ErrorCode::invalid_input, what + " is not a token (too long)", source);
    }
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) {
        return make_error(ErrorCode::invalid_input, what + " is empty", source);
    }
    text = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
    if (std::any_of(text.begin(), text.end(), [](unsigned char c) { return c < 0x21 || c == 0x7f; })) {
        return make_error(ErrorCode::invalid_input,
                          what + " holds more than one word (a token has no spaces or control characters)", source);
    }
    return text;
}

Result<std::string> read_token_file(const fs::path& path, const std::string& source) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return make_error(ErrorCode::not_found, "cannot read the token file `" + path.string() + "`", source);
    }
    std::string text;
    // At most one byte past the limit: a huge file is refused without reading it all.
    text.resize(4097);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    return parse_token_text(std::move(text), "the token file `" + path.string() + "`", source);
}

Status write_client_config(const fs::path& file, const ClientConfig& values) {
    toml::table table;
    std::error_code ec;
    if (fs::exists(file, ec)) {
        ClientConfig check; // a broken file is reported, not silently replaced
        if (auto st = read_file(file, check); !st) {
            return st.error();
        }
        table = toml::parse_file(file.string());
    }
    table.insert_or_assign("url", values.url);
    table.insert_or_assign("token", values.token);
    if (!values.ca_cert.empty()) {
        table.insert_or_assign("ca_cert", values.ca_cert);
    }
    if (file.has_parent_path()) {
        fs::create_directories(file.parent_path(), ec);
        if (ec) {
            return make_error(ErrorCode::io, "cannot create `" + file.parent_path().string() + "`: " + ec.message());
        }
    }
    std::ostringstream text;
    text << "# gpupool client config (written by `gpupool login`; see README.md, Configuration)\n" << table << '\n';
    return util::write_private_file(file, text.str());
}

Result<ClientConfig> load_client_config(const ClientOverrides& overrides, const EnvLookup& env) {
    ClientConfig cfg;
    fs::path file = overrides.config_file ? *overrides.config_file : default_config_path(env);
    std::error_code ec;
    if (!file.empty() && fs::exists(file, ec)) {
        if (auto st = read_file(file, cfg); !st) {
            return st.error();
        }
    } else if (overrides.config_file) {
        return make_error(ErrorCode::not_found, "config file `" + file.string() + "` does not exist", "--config");
    }
    if (auto v = env("GPUPOOL_URL")) {
        cfg.url = *v;
        cfg.url_source = "GPUPOOL_URL";
    }
    if (auto v = env("GPUPOOL_TOKEN_FILE")) {
        auto t = read_token_file(*v, "GPUPOOL_TOKEN_FILE");
        if (!t) {
            return t.error();
        }
        cfg.token = *t;
        cfg.token_source = "GPUPOOL_TOKEN_FILE (" + *v + ")";
    }
    if (auto v = env("GPUPOOL_TOKEN")) {
        cfg.token = *v;
        cfg.token_source = "GPUPOOL_TOKEN";
    }
    if (auto v = env("GPUPOOL_CA_CERT")) {
        cfg.ca_cert = *v;
    }
    if (overrides.url) {
        cfg.url = *overrides.url;
        cfg.url_source = "--url";
    }
    if (overrides.token_file) {
        auto t = read_token_file(*overrides.token_file, "--token-file");
        if (!t) {
            return t.error();
        }
        cfg.token = *t;
        cfg.token_source = "--token-file " + overrides.token_file->string();
    }
    if (overrides.token) {
        cfg.token = *overrides.token;
        cfg.token_source = "--token";
    }
    if (overrides.ca_cert) {
        cfg.ca_cert = *overrides.ca_cert;
    }
    if (!net::is_http_url_list(cfg.url)) {
        return make_error(ErrorCode::invalid_input,
                          "coordinator URL `" + cfg.url + "` (from " + cfg.url_source +
                              ") must start with http:// or https:// (several, for standby coordinators, are "
                              "separated by commas)",
                          "url");
    }
    return cfg;
}

} // namespace gpupool::config
