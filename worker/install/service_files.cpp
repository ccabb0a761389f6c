#include "worker/install/service_files.hpp"

#include "core/net/url.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <sstream>
#include <utility>

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
        p.sysusers = fs::path("/etc/sysusers.d") / (std::string(k_worker_user) + ".conf");
        p.passwd_file = "/etc/passwd";
        p.group_file = "/etc/group";
        p.subuid = "/etc/subuid";
        p.subgid = "/etc/subgid";
        p.linger = fs::path("/var/lib/systemd/linger") / k_worker_user;
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

namespace {

// The system unit's account lines: who the worker runs as and what its engine needs. Nothing for
// --as-root (the unit as it was) or --user.
Result<std::pair<std::string, std::string>> account_lines(const ServicePaths& paths, const PoolTable& pool,
                                                          const UnitInputs& in) {
    if (paths.scope != ServiceScope::system || in.as_root) {
        return std::pair<std::string, std::string>{};
    }
    const std::string user(k_worker_user);
    std::string unit_section; // [Unit]
    std::string service;      // [Service]
    service += "# Not root: a system user of its own (" + paths.sysusers.string() + "). A job that tricks\n"
               "# the worker into acting on a path it controls gets this user's rights, not root's.\n"
               "User=" + user + "\nGroup=" + user + "\n"
               "# The default work dir, and the user's home (rootless podman keeps its images under it).\n"
               "StateDirectory=" + paths.work_dir.lexically_relative("/var/lib").string() + "\n"
               "StateDirectoryMode=0700\n";
    if (pool.runtime == "podman") {
        if (!in.uid) {
            return make_error(ErrorCode::invalid_input, "the podman unit needs the uid of " + user);
        }
        const std::string run = "/run/user/" + std::to_string(*in.uid);
        const std::string manager = "user@" + std::to_string(*in.uid) + ".service";
        unit_section += "# Rootless podman makes each job's cgroup (its memory, CPU and pid limits) through the\n"
                        "# service user's own systemd manager; lingering keeps it running.\n"
                        "Wants=" + manager + "\nAfter=" + manager + "\n";
        service += "# Where rootless podman finds that manager: its runtime directory and its D-Bus.\n"
                   "Environment=XDG_RUNTIME_DIR=" + run + "\n"
                   "Environment=DBUS_SESSION_BUS_ADDRESS=unix:path=" + run + "/bus\n";
    } else if (pool.runtime == "docker") {
        service += "# The docker daemon's socket. Membership of the group docker is root-equivalent on this\n"
                   "# machine (the daemon runs what it is asked, as root); rootless podman is the\n"
                   "# least-privileged engine.\n"
                   "SupplementaryGroups=docker\n";
    }
    return std::pair{unit_section, service};
}

} // namespace

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
    auto account = account_lines(paths, pool, in);
    if (!account) {
        return account.error();
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
      << "After=network-online.target\n"
      << account->first << "\n"
      << "[Service]\n"
      << "Type=simple\n"
      << account->second << "ExecStart=" << exec << "\n"
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

std::string render_worker_sysusers(const ServicePaths& paths) {
    const std::string user(k_worker_user);
    return "# Written by `gpupool worker install`: the system user the worker service runs as (its home\n"
           "# is the default work dir, where rootless podman keeps its images and containers).\n"
           "u " +
           user + " - \"gpupool worker\" " + paths.work_dir.string() + " -\n";
}

namespace {

// The lines of a subuid/subgid file, split at ':' into name, start and count (nothing if malformed).
struct SubidLine {
    std::string_view owner;
    std::uint64_t start = 0;
    std::uint64_t count = 0;
};

std::optional<SubidLine> parse_subid_line(std::string_view line) {
    const auto a = line.find(':');
    const auto b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos || line.empty() || line.front() == '#') {
        return std::nullopt;
    }
    SubidLine out{line.substr(0, a), 0, 0};
    const std::string_view start = line.substr(a + 1, b - a - 1);
    std::string_view count = line.substr(b + 1);
    while (!count.empty() && (count.back() == ' ' || count.back() == '\t' || count.back() == '\r')) {
        count.remove_suffix(1);
    }
    const auto s = std::from_chars(start.data(), start.data() + start.size(), out.start);
    const auto c = std::from_chars(count.data(), count.data() + count.size(), out.count);
    if (s.ec != std::errc() || s.ptr != start.data() + start.size() || c.ec != std::errc() ||
        c.ptr != count.data() + count.size()) {
        return SubidLine{out.owner, 0, 0}; // the owner still counts as having an entry
    }
    return out;
}

template <typename F>
void each_line(std::string_view text, F&& f) {
    while (!text.empty()) {
        const auto nl = text.find('\n');
        f(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    }
}

} // namespace

bool has_subid_entry(std::string_view text, std::string_view name, std::uint32_t uid) {
    const std::string id = std::to_string(uid);
    bool found = false;
    each_line(text, [&](std::string_view line) {
        const auto entry = parse_subid_line(line);
        found = found || (entry && (entry->owner == name || entry->owner == id));
    });
    return found;
}

std::optional<std::uint32_t> free_subid_start(const std::vector<std::string_view>& files) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges; // [start, end)
    for (const auto text : files) {
        each_line(text, [&](std::string_view line) {
            const auto entry = parse_subid_line(line);
            if (entry && entry->count > 0) { // a count past 2^32 ids covers them all, no more
                ranges.emplace_back(entry->start, entry->start + std::min<std::uint64_t>(entry->count, 1ULL << 32));
            }
        });
    }
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t start = k_subid_min;
    for (const auto& [begin, end] : ranges) {
        if (begin >= start + k_subid_count) {
            break; // the gap before this range is wide enough
        }
        start = std::max(start, end);
    }
    // The last id of the range must stay below 2^32 - 1 (which is (uid_t)-1).
    if (start + k_subid_count > 0xffffffffULL) {
        return std::nullopt;
    }
    return static_cast<std::uint32_t>(start);
}

std::string append_subid_entry(std::string_view text, std::string_view name, std::uint32_t start) {
    std::string out(text);
    if (!out.empty() && out.back() != '\n') {
        out += '\n';
    }
    out += std::string(name) + ":" + std::to_string(start) + ":" + std::to_string(k_subid_count) + "\n";
    return out;
}

} // namespace gpupool::worker
