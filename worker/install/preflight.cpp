#include "worker/install/preflight.hpp"

#include "core/api/admin.hpp"
#include "core/client/api_client.hpp"
#include "core/client/read_answer.hpp"
#include "core/net/loopback.hpp"
#include "core/net/url.hpp"

#include <boost/process/search_path.hpp>

#include <array>
#include <sys/stat.h>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

constexpr std::array<const char*, 3> k_temporary{"/tmp", "/var/tmp", "/dev/shm"};

std::string install_hint(const fs::path& binary) {
    return "install the binary elsewhere first (`sudo install -m 0755 " + binary.string() +
           " /usr/local/bin/gpupool`) and run install with that one";
}

} // namespace

std::optional<fs::path> find_on_path(const std::string& name) {
    try {
        auto p = boost::process::search_path(name);
        if (p.empty()) {
            return std::nullopt;
        }
        return fs::path(p.string());
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

Status check_service_binary(const fs::path& binary, const std::string& user) {
    const fs::path normal = binary.lexically_normal();
    for (const char* tmp : k_temporary) {
        const fs::path rel = normal.lexically_relative(tmp);
        if (!rel.empty() && *rel.begin() != "..") {
            return make_error(ErrorCode::invalid_input,
                              "the unit would run " + binary.string() + ", under " + tmp +
                                  ", which the service cannot use (systemd gives it a private " + tmp +
                                  ") and which is cleaned: " + install_hint(binary));
        }
    }
    struct stat st {};
    if (::stat(binary.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return make_error(ErrorCode::not_found, "the unit would run " + binary.string() + ", which is not a file");
    }
    if (user.empty()) {
        return {};
    }
    if ((st.st_mode & S_IXOTH) == 0) {
        return make_error(ErrorCode::invalid_input,
                          "the unit would run " + binary.string() + ", which " + user +
                              " cannot execute (it is not executable by other users): " + install_hint(binary));
    }
    for (fs::path dir = binary.parent_path(); !dir.empty(); dir = dir.parent_path()) {
        if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
            return make_error(ErrorCode::invalid_input, "the unit would run " + binary.string() + ", which " + user +
                                                            " cannot reach: " + dir.string() +
                                                            " is closed to other users; " + install_hint(binary));
        }
        if (dir == dir.root_path()) {
            break;
        }
    }
    return {};
}

Result<std::vector<std::string>> preflight_worker(const WorkerPreflight& p) {
    std::vector<std::string> warnings;
    if (p.runtime == "podman" || p.runtime == "docker") {
        if (!p.find(p.runtime)) {
            return make_error(ErrorCode::not_found,
                              "--runtime " + p.runtime + " needs `" + p.runtime +
                                  "`, which is not on PATH: install it first (Debian: apt install " + p.runtime +
                                  (p.runtime == "docker" ? ".io" : "") + ")",
                              "--runtime");
        }
    }
    const auto urls = net::split_url_list(p.coordinator);
    const std::string url = urls.empty() ? p.coordinator : urls.front();
    const auto origin = net::url_origin(url);
    if (!origin || (origin->scheme != "http" && origin->scheme != "https")) {
        return make_error(ErrorCode::invalid_input, "expected the pool's URL, http(s)://HOST:PORT", "--coordinator");
    }
    if (auto w = plain_http_warning(url)) {
        warnings.push_back(*w);
    }
    config::ClientConfig cc;
    cc.url = url;
    cc.url_source = "--coordinator";
    cc.token = p.token;
    cc.token_source = "--token-file";
    cc.ca_cert = p.ca_cert;
    client::ApiClient api(cc);
    auto who = client::read_answer(api.get("/v1/whoami"), "GET /v1/whoami", gpupool::api::whoami_from_json);
    if (!who) {
        const Error& e = who.error();
        if (e.code == ErrorCode::unauthorized) {
            return make_error(ErrorCode::unauthorized,
                              "the coordinator at " + url +
                                  " refuses the enrollment token: it is unknown there, revoked or expired; make "
                                  "a new one with `gpupool admin enroll TEAM`",
                              "--token-file");
        }
        const bool unreachable = e.code == ErrorCode::unavailable || e.code == ErrorCode::io;
        return make_error(
            e.code,
            (unreachable ? "the coordinator cannot be reached: " : "the coordinator at " + url + " answered: ") +
                e.message,
            "--coordinator");
    }
    if (who->role != "enroll") {
        return make_error(ErrorCode::invalid_input,
                          "the token is a " + who->role +
                              " token, not an enrollment token: make one with `gpupool admin enroll TEAM`",
                          "--token-file");
    }
    return warnings;
}

std::optional<std::string> plain_http_warning(const std::string& url) {
    const auto origin = net::url_origin(url);
    if (!origin || origin->scheme != "http" || net::is_loopback_host(origin->host)) {
        return std::nullopt;
    }
    return "--coordinator " + url +
           " is plain HTTP to another machine: the worker's token and every job's inputs and outputs travel in clear "
           "text; serve the coordinator over HTTPS (--tls-cert) and use https://";
}

std::vector<std::string> preflight_coordinator(const std::string& listen, bool tls) {
    const std::string host = net::listen_host(listen);
    if (tls || net::is_loopback_host(host)) {
        return {};
    }
    return {"--listen " + listen +
            " serves plain HTTP to other machines: tokens, jobs and results travel in "
            "clear text; give it --tls-cert and --tls-key (or put it behind a TLS proxy on loopback)"};
}

} // namespace gpupool::worker
