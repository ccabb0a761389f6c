#include "worker/install/coordinator_files.hpp"

#include "worker/install/install_files.hpp"
#include "worker/install/service_files.hpp"

#include <charconv>
#include <sstream>

namespace gpupool::worker {

namespace fs = std::filesystem;

fs::path CoordinatorPaths::on_disk(const fs::path& p) const {
    return under_root(root, p);
}

CoordinatorPaths coordinator_paths(const fs::path& root) {
    CoordinatorPaths p;
    p.root = root.empty() ? fs::path("/") : root;
    p.unit = fs::path("/etc/systemd/system") / k_coordinator_unit_name;
    p.sysusers = fs::path("/etc/sysusers.d") / (std::string(k_coordinator_user) + ".conf");
    p.group_file = "/etc/group";
    p.tls_cert = "/etc/gpupool/coordinator/tls-cert.pem";
    p.tls_key = "/etc/gpupool/coordinator/tls-key.pem";
    p.metrics_token = "/etc/gpupool/coordinator/metrics.token";
    p.state_dir = fs::path("/var/lib") / k_coordinator_user;
    p.db = p.state_dir / "pool.db";
    p.admin_token = p.state_dir / "admin.token";
    return p;
}

Result<ListenAddress> parse_service_listen(std::string_view listen) {
    const auto colon = listen.rfind(':');
    const std::string_view host = colon == std::string_view::npos ? std::string_view() : listen.substr(0, colon);
    const std::string_view port = colon == std::string_view::npos ? std::string_view() : listen.substr(colon + 1);
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    const bool port_ok =
        !port.empty() && ec == std::errc() && end == port.data() + port.size() && value >= 1 && value <= 65535;
    if (host.empty() || !port_ok || host.find_first_of(" \"'\\%$") != std::string_view::npos) {
        return make_error(ErrorCode::invalid_input,
                          "--listen must be HOST:PORT with a port from 1 to 65535 (like 0.0.0.0:7443), got `" +
                              std::string(listen) + "`",
                          "--listen");
    }
    for (const char c : listen) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            return make_error(ErrorCode::invalid_input, "--listen holds a control character", "--listen");
        }
    }
    return ListenAddress{std::string(listen), static_cast<std::uint16_t>(value)};
}

std::vector<std::string> coordinator_command(const CoordinatorPaths& paths, const CoordinatorUnitInputs& in) {
    std::vector<std::string> argv{in.binary.string(),
                                  "coordinator",
                                  "--db",
                                  paths.db.string(),
                                  "--listen",
                                  in.listen.text,
                                  "--admin-token-file",
                                  paths.admin_token.string()};
    if (in.tls) {
        argv.insert(argv.end(), {"--tls-cert", paths.tls_cert.string(), "--tls-key", paths.tls_key.string()});
    }
    if (in.metrics_token) {
        argv.insert(argv.end(), {"--metrics-token-file", paths.metrics_token.string()});
    }
    if (!in.metrics_listen.empty()) {
        argv.insert(argv.end(), {"--metrics-listen", in.metrics_listen});
    }
    return argv;
}

Status check_service_binary(const fs::path& binary) {
    if (!binary.is_absolute()) {
        return make_error(ErrorCode::invalid_input,
                          "the unit needs the gpupool binary's absolute path, got `" + binary.string() + "`");
    }
    const fs::path normal = binary.lexically_normal();
    for (const char* hidden : {"/home", "/root", "/run/user"}) {
        const auto rel = normal.lexically_relative(hidden);
        if (!rel.empty() && *rel.begin() != "..") {
            return make_error(ErrorCode::invalid_input,
                              "the service cannot run `" + binary.string() + "`: ProtectHome=yes hides " + hidden +
                                  " from it; install the binary elsewhere first (e.g. `sudo install -m 0755 " +
                                  binary.string() + " /usr/local/bin/gpupool`) and run install with that one");
        }
    }
    return {};
}

Result<std::string> render_coordinator_unit(const CoordinatorPaths& paths, const CoordinatorUnitInputs& in) {
    if (auto st = check_service_binary(in.binary); !st) {
        return st.error();
    }
    std::string exec;
    for (const auto& arg : coordinator_command(paths, in)) {
        auto q = systemd_quote(arg);
        if (!q) {
            return q.error();
        }
        exec += (exec.empty() ? "" : " ") + *q;
    }
    const std::string user(k_coordinator_user);
    const bool low_port = in.listen.port < 1024;
    std::ostringstream u;
    u << "# Written by `gpupool coordinator install`; `gpupool coordinator uninstall` removes it.\n"
      << "# Local changes belong in a drop-in: systemctl edit gpupool-coordinator\n"
      << "[Unit]\n"
      << "Description=gpupool coordinator on " << (in.tls ? "https://" : "http://") << in.listen.text << "\n"
      << "Wants=network-online.target\n"
      << "After=network-online.target\n\n"
      << "[Service]\n"
      << "Type=simple\n"
      << "# A system user of its own (" << paths.sysusers.string() << "), not DynamicUser=: the TLS key\n"
      << "# (0640, group " << user << ") stays readable across renewals, which a dynamic UID cannot be\n"
      << "# granted, and LoadCredential= copies are not refreshed on reload (systemd 252).\n"
      << "User=" << user << "\n"
      << "Group=" << user << "\n"
      << "# The database: " << paths.db.string() << ". A new pool's admin token goes to\n"
      << "# " << paths.admin_token.string() << " (0600), never to the journal.\n"
      << "StateDirectory=" << user << "\n"
      << "StateDirectoryMode=0700\n"
      << "UMask=0077\n"
      << "ExecStart=" << exec << "\n"
      << "# SIGHUP: the TLS certificate and key are read again; open connections keep theirs.\n"
      << "ExecReload=/bin/kill -HUP $MAINPID\n"
      << "Restart=on-failure\n"
      << "RestartSec=5s\n"
      << "# Exit 2 is a usage error: a restart would only repeat it.\n"
      << "RestartPreventExitStatus=2\n"
      << "# One or two connections per worker and one per client (the server caps them at 10000), the\n"
      << "# database and spooled uploads; systemd sets this whatever a login shell's limit is.\n"
      << "LimitNOFILE=65536\n"
      << "# Hardening: docs/operating.md (Installing the coordinator as a service).\n";
    if (low_port) {
        u << "# Port " << in.listen.port << " is below 1024: binding it is the one capability kept.\n"
          << "CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n"
          << "AmbientCapabilities=CAP_NET_BIND_SERVICE\n";
    } else {
        u << "CapabilityBoundingSet=\n";
    }
    u << "NoNewPrivileges=yes\n"
      << "ProtectSystem=strict\n"
      << "ProtectHome=yes\n"
      << "PrivateTmp=yes\n"
      << "PrivateDevices=yes\n"
      << "ProtectKernelTunables=yes\n"
      << "ProtectKernelModules=yes\n"
      << "ProtectKernelLogs=yes\n"
      << "ProtectControlGroups=yes\n"
      << "ProtectClock=yes\n"
      << "ProtectHostname=yes\n"
      << "ProtectProc=invisible\n"
      << "PrivateMounts=yes\n"
      << "RemoveIPC=yes\n"
      << "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n"
      << "RestrictNamespaces=yes\n"
      << "RestrictRealtime=yes\n"
      << "RestrictSUIDSGID=yes\n"
      << "LockPersonality=yes\n"
      << "MemoryDenyWriteExecute=yes\n"
      << "SystemCallArchitectures=native\n"
      << "SystemCallFilter=@system-service\n"
      << "\n[Install]\n"
      << "WantedBy=multi-user.target\n";
    return u.str();
}

std::string render_coordinator_sysusers(const CoordinatorPaths& paths) {
    const std::string user(k_coordinator_user);
    return "# Written by `gpupool coordinator install`: the system user the coordinator service runs as\n"
           "# (its home is the state directory, which holds the pool's database).\n"
           "u " +
           user + " - \"gpupool coordinator\" " + paths.state_dir.string() + " -\n";
}

} // namespace gpupool::worker
