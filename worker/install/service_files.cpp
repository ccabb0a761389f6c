#include "worker/install/service_files.hpp"

#include "core/net/url.hpp"

#include <toml++/toml.h>

#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

Error flag_error(std::string message, std::string flag) {
    return make_error(ErrorCode::invalid_input, std::move(message), std::move(flag));
}

bool has_control(std::string_view s) {
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
            return true;
        }
    }
    return false;
}

Status check_path(const fs::path& p, const std::string& flag) {
    if (!p.is_absolute()) {
        return flag_error(flag + " must be an absolute path, got `" + p.string() + "`", flag);
    }
    if (has_control(p.string())) {
        return flag_error(flag + " holds a control character", flag);
    }
    return {};
}

Error file_error(const std::string& file, const toml::source_region& where, std::string message) {
    Error e = make_error(ErrorCode::invalid_input, std::move(message));
    e.where = SourcePos{file, where.begin.line, where.begin.column};
    return e;
}

Result<toml::table> parse_toml(std::string_view text, const std::string& file) {
    try {
        return toml::parse(text, file);
    } catch (const toml::parse_error& e) {
        return file_error(file, e.source(), "TOML syntax error: " + std::string(e.description()));
    }
}

std::string pool_string(const toml::table& pool, std::string_view key) {
    const auto* v = pool.get_as<std::string>(key);
    return v != nullptr ? v->get() : std::string();
}

void set_pool_keys(toml::table& pool, const PoolTable& p) {
    pool.insert_or_assign("coordinator", p.coordinator);
    pool.insert_or_assign("token_file", p.token_file.string());
    pool.insert_or_assign("work_dir", p.work_dir.string());
    pool.insert_or_assign("runtime", p.runtime);
}

constexpr std::string_view k_config_header =
    "# gpupool worker settings (docs/worker.md). [pool] was written by `gpupool worker install`:\n"
    "# how the worker joins the pool. The enrollment token's file is 0600; after the first start the\n"
    "# worker keeps its own identity in WORK_DIR/worker.json.\n";

} // namespace

fs::path ServicePaths::on_disk(const fs::path& p) const {
    return root / p.relative_path();
}

Result<ServicePaths> service_paths(ServiceScope scope, const fs::path& root, const std::string& home) {
    ServicePaths p;
    p.scope = scope;
    p.root = root.empty() ? fs::path("/") : root;
    if (scope == ServiceScope::system) {
        p.config = "/etc/gpupool/worker.toml";
        p.token = "/etc/gpupool/enroll.token";
        p.unit = fs::path("/etc/systemd/system") / k_service_unit_name;
        p.work_dir = "/var/lib/gpupool/worker";
        return p;
    }
    const fs::path h(home);
    if (home.empty() || !h.is_absolute()) {
        return make_error(ErrorCode::invalid_input,
                          "--user needs the owner's home directory: HOME is " + (home.empty() ? "not set" : "`" + home + "`"),
                          "--user");
    }
    p.config = h / ".config/gpupool/worker.toml";
    p.token = h / ".config/gpupool/enroll.token";
    p.unit = h / ".config/systemd/user" / k_service_unit_name;
    p.work_dir = h / ".local/share/gpupool/worker";
    return p;
}

Status check_pool_table(const PoolTable& pool) {
    const std::string& url = pool.coordinator;
    if (!net::is_http_url_list(url)) {
        return flag_error("--coordinator must be an http:// or https:// URL (or several, comma-separated), got `" +
                              url + "`",
                          "--coordinator");
    }
    if (url.size() > 2048 || url.find_first_of(" \"'\\") != std::string::npos || has_control(url)) {
        return flag_error("--coordinator holds characters a URL cannot have (blanks, quotes, backslashes, control "
                          "characters)",
                          "--coordinator");
    }
    if (auto st = check_path(pool.token_file, "--token-file"); !st) {
        return st;
    }
    if (auto st = check_path(pool.work_dir, "--work-dir"); !st) {
        return st;
    }
    if (pool.runtime != "podman" && pool.runtime != "docker") {
        return flag_error("--runtime for a service must be podman or docker (it runs other people's jobs: the "
                          "process runtime isolates nothing), got `" + pool.runtime + "`",
                          "--runtime");
    }
    return {};
}

std::string render_pool_config(const PoolTable& pool) {
    toml::table t;
    set_pool_keys(t, pool);
    toml::table file;
    file.insert_or_assign("pool", std::move(t));
    std::ostringstream out;
    out << k_config_header << file << '\n';
    return out.str();
}

Result<PoolTable> read_pool_table(std::string_view text, const std::string& file) {
    auto parsed = parse_toml(text, file);
    if (!parsed) {
        return parsed.error();
    }
    PoolTable p;
    p.runtime.clear();
    const auto* node = parsed->get("pool");
    if (node == nullptr) {
        return p;
    }
    const auto* pool = node->as_table();
    if (pool == nullptr) {
        return file_error(file, node->source(), "`pool` must be a table ([pool])");
    }
    p.coordinator = pool_string(*pool, "coordinator");
    p.token_file = pool_string(*pool, "token_file");
    p.work_dir = pool_string(*pool, "work_dir");
    p.runtime = pool_string(*pool, "runtime");
    return p;
}

Result<std::string> merge_pool_config(std::string_view text, const std::string& file, const PoolTable& pool) {
    auto parsed = parse_toml(text, file);
    if (!parsed) {
        return parsed.error();
    }
    toml::table& root = *parsed;
    if (auto* node = root.get("pool"); node != nullptr && !node->is_table()) {
        return file_error(file, node->source(), "`pool` must be a table ([pool])");
    }
    if (root.get("pool") == nullptr) {
        root.insert_or_assign("pool", toml::table{});
    }
    set_pool_keys(*root.get_as<toml::table>("pool"), pool);
    std::ostringstream out;
    out << k_config_header << root << '\n';
    return out.str();
}

std::vector<std::string> worker_command(const fs::path& binary, const ServicePaths& paths, const PoolTable& pool) {
    (void)pool; // worker.toml's [pool] table says it, with the owner's terms beside it
    return {binary.string(), "worker", "--share", "--config", paths.config.string()};
}

Result<std::string> systemd_quote(std::string_view arg) {
    if (has_control(arg)) {
        return make_error(ErrorCode::invalid_input, "a control character cannot go into a systemd unit's command line");
    }
    std::string escaped;
    bool quote = arg.empty();
    for (const char c : arg) {
        switch (c) {
        case '%':
            escaped += "%%";
            break;
        case '$':
            escaped += "$$";
            break;
        case '"':
        case '\\':
            escaped += '\\';
            escaped += c;
            quote = true;
            break;
        case ' ':
        case '\'':
        case ';':
            escaped += c;
            quote = true;
            break;
        default:
            escaped += c;
        }
    }
    return quote ? "\"" + escaped + "\"" : escaped;
}

Result<std::string> render_unit(const ServicePaths& paths, const PoolTable& pool, const UnitInputs& in) {
    if (!in.binary.is_absolute()) {
        return make_error(ErrorCode::invalid_input, "the unit needs the gpupool binary's absolute path, got `" +
                                                        in.binary.string() + "`");
    }
    std::string exec;
    for (const auto& arg : worker_command(in.binary, paths, pool)) {
        auto q = systemd_quote(arg);
        if (!q) {
            return q.error();
        }
        exec += (exec.empty() ? "" : " ") + *q;
    }
    std::string description_url; // a unit's Description reads `%` as a specifier
    for (const char c : pool.coordinator) {
        description_url += c == '%' ? std::string("%%") : std::string(1, c);
    }
    const bool system = paths.scope == ServiceScope::system;
    const auto stop_s = in.drain_grace.count() + 60;
    std::ostringstream u;
    u << "# Written by `gpupool worker install`" << (system ? "" : " --user") << "; `gpupool worker uninstall"
      << (system ? "" : " --user") << "` removes it.\n"
      << "# Local changes belong in a drop-in: systemctl" << (system ? "" : " --user") << " edit gpupool-worker\n"
      << "[Unit]\n"
      << "Description=gpupool worker: shares this machine with the pool at " << description_url << "\n"
      << "Wants=network-online.target\n"
      << "After=network-online.target\n\n"
      << "[Service]\n"
      << "Type=simple\n"
      << "ExecStart=" << exec << "\n"
      << "ExecReload=/bin/kill -HUP $MAINPID\n" // re-reads worker.toml's terms
      << "Restart=on-failure\n"
      << "RestartSec=10s\n"
      << "# Exit 2 is a usage or config error: a restart would only repeat it.\n"
      << "RestartPreventExitStatus=2\n"
      << "# Stopping drains: SIGTERM reaches the worker alone, which lets running jobs finish for its\n"
      << "# drain grace (" << in.drain_grace.count() << " s) and hands back the rest; a minute later systemd "
      << "kills what is left.\n"
      << "KillMode=mixed\n"
      << "KillSignal=SIGTERM\n"
      << "TimeoutStopSec=" << stop_s << "\n"
      << "# A job killed for memory is that job's failure, not the service's.\n"
      << "OOMPolicy=continue\n";
    if (system) {
        u << "# Hardening: capabilities neither the worker nor its container engine uses. docs/worker.md\n"
          << "# (Running as a service) says which sandboxing options are left out, and why.\n"
          << "CapabilityBoundingSet=~CAP_SYS_BOOT CAP_SYS_TIME CAP_WAKE_ALARM\n";
    }
    u << "\n[Install]\n"
      << "WantedBy=" << (system ? "multi-user.target" : "default.target") << "\n";
    return u.str();
}

} // namespace gpupool::worker
