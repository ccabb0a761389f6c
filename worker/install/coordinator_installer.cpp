#include "worker/install/coordinator_installer.hpp"

#include "core/net/http_server.hpp"
#include "core/net/loopback.hpp"
#include "worker/install/install_files.hpp"
#include "worker/install/preflight.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <unistd.h>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

const std::string k_coord_unit(k_coordinator_unit_name);

// The group's id as <root>/etc/group has it (where systemd-sysusers writes it). Not through NSS:
// getgrnam in the static binary would need the build machine's glibc NSS modules at run time.
std::optional<gid_t> find_group(const CoordinatorPaths& paths) {
    const std::string name(k_coordinator_user);
    std::ifstream in(paths.on_disk(paths.group_file));
    std::string line;
    while (std::getline(in, line)) {
        // name:password:GID:members
        const auto a = line.find(':');
        const auto b = a == std::string::npos ? a : line.find(':', a + 1);
        const auto c = b == std::string::npos ? b : line.find(':', b + 1);
        if (c != std::string::npos && line.compare(0, a, name) == 0 && a == name.size()) {
            try {
                return static_cast<gid_t>(std::stoul(line.substr(b + 1, c - b - 1)));
            } catch (const std::exception&) {
                return std::nullopt;
            }
        }
    }
    return std::nullopt;
}

Result<std::string> read_source(const fs::path& source, const std::string& flag) {
    auto text = read_existing(source);
    if (!text) {
        Error e = text.error();
        e.field = flag;
        return e;
    }
    if (!*text) {
        return make_error(ErrorCode::invalid_input, flag + " `" + source.string() + "` does not exist", flag);
    }
    return **text;
}

// The files install owns, planned and compared; a refusal names every conflict.
Result<std::vector<PlannedFile>> plan_install(const CoordinatorInstallOptions& o, const CoordinatorUnitInputs& in) {
    auto unit = render_coordinator_unit(o.paths, in);
    if (!unit) {
        return unit.error();
    }
    std::vector<PlannedFile> files;
    files.push_back({o.paths.sysusers, render_coordinator_sysusers(o.paths), k_mode_0644, "wrote",
                     "the system user " + std::string(k_coordinator_user)});
    if (in.tls) {
        if (auto st = net::check_tls_files(o.tls_cert.string(), o.tls_key.string()); !st) {
            Error e = st.error();
            e.field = "--tls-cert";
            return e;
        }
        auto cert = read_source(o.tls_cert, "--tls-cert");
        auto key = read_source(o.tls_key, "--tls-key");
        if (!cert || !key) {
            return cert ? key.error() : cert.error();
        }
        files.push_back({o.paths.tls_cert, *cert, k_mode_0644, "wrote", "from " + o.tls_cert.string()});
        files.push_back({o.paths.tls_key, *key, k_mode_0640, "wrote",
                         "from " + o.tls_key.string() + ", 0640 group " + std::string(k_coordinator_user)});
    }
    if (in.metrics_token) {
        auto token = read_source(o.metrics_token, "--metrics-token-file");
        if (!token) {
            return token.error();
        }
        files.push_back({o.paths.metrics_token, *token, k_mode_0640, "wrote",
                         "from " + o.metrics_token.string() + ", 0640 group " + std::string(k_coordinator_user)});
    }
    files.push_back({o.paths.unit, *unit, k_mode_0644, "wrote", "runs " + o.binary.string() + " coordinator"});
    std::vector<std::string> conflicts;
    for (auto& f : files) {
        auto c = plan_owned(o.paths.root, o.force, f);
        if (!c) {
            return c.error();
        }
        if (*c) {
            conflicts.push_back(**c);
        }
    }
    if (!conflicts.empty()) {
        std::string message = "an earlier install left different files (nothing was changed; --force replaces "
                              "them): ";
        for (std::size_t i = 0; i < conflicts.size(); ++i) {
            message += (i > 0 ? "; " : "") + conflicts[i];
        }
        return make_error(ErrorCode::conflict, message, "--force");
    }
    return files;
}

// A secret's group (the TLS key, the scrape token): the service's, so that it (and nobody else but
// root) reads it.
Status give_key_group(const CoordinatorPaths& paths, const fs::path& secret, gid_t gid) {
    const fs::path key = paths.on_disk(secret);
    if (::chown(key.c_str(), static_cast<uid_t>(-1), gid) != 0) {
        return make_error(ErrorCode::io, "cannot give `" + key.string() + "` the group " +
                                             std::string(k_coordinator_user) + ": " + std::strerror(errno));
    }
    return {};
}

// What install would do (--dry-run): the files as planned, the user when its group is missing, the
// calls; nothing is touched.
void describe_install(const CoordinatorInstallOptions& o, const std::vector<PlannedFile>& files,
                      ServiceReport& report) {
    report.dry_run = true;
    bool unit_changed = false;
    bool restart = false;
    bool reload = false;
    for (const auto& f : files) {
        if (f.path == o.paths.sysusers && !find_group(o.paths)) {
            report.systemctl.push_back("systemd-sysusers " + o.paths.sysusers.string());
            report.steps.push_back(
                {"would add", o.paths.group_file.string(),
                 "the system user and group " + std::string(k_coordinator_user) + ", made by systemd-sysusers"});
        }
        const bool tls_file = f.path == o.paths.tls_cert || f.path == o.paths.tls_key;
        unit_changed = unit_changed || (f.path == o.paths.unit && f.what != "unchanged");
        restart = restart || (!tls_file && f.what == "replaced");
        reload = reload || (tls_file && f.what == "replaced");
        report.steps.push_back({f.what == "unchanged" ? f.what
                                : f.what == "wrote"   ? std::string("would write")
                                                      : "would " + f.what.substr(0, f.what.size() - 1),
                                f.path.string(), f.note});
    }
    report.steps.push_back({"kept", o.paths.state_dir.string(), "the state directory (systemd makes it at start)"});
    if (unit_changed) {
        report.systemctl.push_back("daemon-reload");
    }
    if (restart) {
        report.systemctl.push_back("try-restart " + k_coord_unit);
    } else if (reload) {
        report.systemctl.push_back("try-reload-or-restart " + k_coord_unit);
    }
    report.systemctl.push_back("enable --now " + k_coord_unit);
}

} // namespace

Status install_coordinator(const CoordinatorInstallOptions& o, Systemctl& systemctl, ServiceReport& report) {
    auto listen = parse_service_listen(o.listen);
    if (!listen) {
        return listen.error();
    }
    if (o.tls_cert.empty() != o.tls_key.empty()) {
        return make_error(ErrorCode::invalid_input, "--tls-cert and --tls-key go together", "--tls-cert");
    }
    if (!o.metrics_listen.empty()) {
        if (!parse_service_listen(o.metrics_listen) || !net::is_loopback_host(net::listen_host(o.metrics_listen))) {
            return make_error(ErrorCode::invalid_input,
                              "expected a loopback HOST:PORT (127.0.0.1:9464): it serves metrics without a token",
                              "--metrics-listen");
        }
    }
    if (auto st = check_service_binary(o.binary, std::string(k_coordinator_user)); !st) {
        return st;
    }
    const CoordinatorUnitInputs in{o.binary, *listen, !o.tls_cert.empty(), !o.metrics_token.empty(), o.metrics_listen};
    auto files = plan_install(o, in);
    if (!files) {
        return files.error();
    }
    const auto warnings = preflight_coordinator(o.listen, !o.tls_cert.empty());
    report.warnings.insert(report.warnings.end(), warnings.begin(), warnings.end());
    if (o.dry_run) {
        describe_install(o, *files, report);
        return {};
    }
    bool unit_changed = false;
    bool restart = false; // the unit or the user's entry was replaced
    bool reload = false;  // a TLS file was replaced
    std::optional<gid_t> gid;
    for (const auto& f : *files) {
        if (f.what != "unchanged") {
            if (auto st = write_planned(o.paths.root, f); !st) {
                return st;
            }
        }
        if (f.path == o.paths.sysusers) { // first: the key's group and the unit's User= need the user
            if (gid = find_group(o.paths); !gid) {
                if (auto st = report.noted("systemd-sysusers " + o.paths.sysusers.string(),
                                    systemctl.create_system_users(o.paths.root, o.paths.sysusers));
                    !st) {
                    return st;
                }
                gid = find_group(o.paths);
            }
            if (!gid) {
                return make_error(ErrorCode::io, "systemd-sysusers made no group `" + std::string(k_coordinator_user) +
                                                     "` in " + o.paths.group_file.string());
            }
        }
        if ((f.path == o.paths.tls_key || f.path == o.paths.metrics_token) && f.what != "unchanged") {
            if (auto st = give_key_group(o.paths, f.path, *gid); !st) {
                return st;
            }
        }
        const bool tls_file = f.path == o.paths.tls_cert || f.path == o.paths.tls_key;
        unit_changed = unit_changed || (f.path == o.paths.unit && f.what != "unchanged");
        restart = restart || (!tls_file && f.what == "replaced");
        reload = reload || (tls_file && f.what == "replaced");
        report.steps.push_back({f.what, f.path.string(), f.note});
    }
    report.steps.push_back({"kept", o.paths.state_dir.string(), "the state directory (systemd makes it at start)"});
    if (unit_changed) {
        if (auto st = report.noted("daemon-reload", systemctl.daemon_reload()); !st) {
            return st;
        }
    }
    if (restart) {
        if (auto st = report.noted("try-restart " + k_coord_unit, systemctl.try_restart(k_coord_unit)); !st) {
            return st;
        }
    } else if (reload) {
        if (auto st = report.noted("try-reload-or-restart " + k_coord_unit, systemctl.try_reload(k_coord_unit)); !st) {
            return st;
        }
    }
    return report.noted("enable --now " + k_coord_unit, systemctl.enable_start(k_coord_unit));
}

Status uninstall_coordinator(const CoordinatorPaths& paths, Systemctl& systemctl, ServiceReport& report) {
    std::error_code ec;
    const bool has_unit = fs::exists(fs::symlink_status(paths.on_disk(paths.unit), ec));
    if (has_unit) {
        if (auto st = report.noted("disable --now " + k_coord_unit, systemctl.stop_disable(k_coord_unit)); !st) {
            return st;
        }
    }
    auto remove = [&](const fs::path& p) {
        std::error_code rec;
        const bool removed = fs::remove(paths.on_disk(p), rec);
        report.steps.push_back({removed ? "removed" : "absent", p.string(), rec ? rec.message() : ""});
    };
    remove(paths.unit);
    if (has_unit) {
        if (auto st = report.noted("daemon-reload", systemctl.daemon_reload()); !st) {
            return st;
        }
    }
    remove(paths.tls_cert);
    remove(paths.tls_key);
    remove(paths.metrics_token);
    remove(paths.sysusers);
    const fs::path tls_dir = paths.on_disk(paths.tls_cert).parent_path();
    if (fs::is_directory(tls_dir, ec) && fs::is_empty(tls_dir, ec)) {
        fs::remove(tls_dir, ec);
    }
    report.steps.push_back({"kept", paths.state_dir.string(),
                            "the pool's database, owned by the system user " + std::string(k_coordinator_user) +
                                " (also kept); remove both yourself if the pool is gone for good"});
    return {};
}

} // namespace gpupool::worker
