// The files `gpupool coordinator install` puts on the pool's server, as text: the systemd unit that
// runs the coordinator and the sysusers.d entry for its system user. Pure functions of their inputs
// (no file system, no clock, no environment), so tests compare them and `systemd-analyze verify`
// checks them; coordinator_installer.hpp writes them (and copies the TLS files).
//
// Where things go (coordinator_paths): the unit /etc/systemd/system/gpupool-coordinator.service,
// the user /etc/sysusers.d/gpupool-coordinator.conf, the TLS copies /etc/gpupool/coordinator/
// (tls-cert.pem 0644, tls-key.pem 0640 root:gpupool-coordinator), the state directory
// /var/lib/gpupool-coordinator (made by systemd: StateDirectory=) with the database pool.db.
// Every path is also placed under a root prefix (`/` on a real machine, a temp dir in tests).
//
// The unit (render_coordinator_unit), its rules:
// - A system user of its own, `gpupool-coordinator` (systemd-sysusers), rather than DynamicUser=:
//   the TLS key must stay readable by the service when it is renewed and reloaded (SIGHUP), which
//   takes a group that can be given read access to a root-owned file. A dynamic UID cannot be
//   (it is allocated at start and may change), and LoadCredential= copies are made once per start:
//   systemd 252 (Debian 12) does not refresh them on reload, so a renewed certificate would need a
//   restart, dropping every worker's connection. The database lives in StateDirectory= (0700).
// - ExecStart is coordinator_command(): --db in the state directory, --listen, the TLS copies when
//   given, and --admin-token-file: a new pool's admin token is written to a 0600 file in the state
//   directory, never to the journal (which others may read) and never into the unit.
// - ExecReload sends SIGHUP: the coordinator re-reads the TLS files for new connections.
// - Restart=on-failure after 5 s, except after exit 2 (a usage error: RestartPreventExitStatus=2).
// - LimitNOFILE=65536: a worker holds one or two connections (its long poll, its reports), a client
//   one; the server's own cap is 10000 connections (net::ServerOptions::max_connections), plus the
//   database and spooled uploads. systemd sets the limit for the service whatever the shell's
//   (a login shell here has a hard limit of 20000); the kernel's cap is fs.nr_open.
// - Hardening: no capabilities (CAP_NET_BIND_SERVICE, ambient, only when --listen's port is below
//   1024), NoNewPrivileges, a read-only system (ProtectSystem=strict; the state directory is the
//   one writable place), no home directories, private /tmp (spooled uploads) and /dev, kernel
//   tunables/modules/logs/clock/hostname and cgroups protected, other users' processes invisible,
//   private mounts, its SysV IPC removed at stop, address families AF_INET AF_INET6 AF_UNIX, no
//   namespaces, no realtime, no SUID/SGID files, no W+X memory, a locked personality,
//   @system-service system calls of the native architecture only, UMask=0077. `systemd-analyze
//   security` rates it 1.6 ("OK") with a port below 1024, lower without.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

inline constexpr std::string_view k_coordinator_unit_name = "gpupool-coordinator.service";
inline constexpr std::string_view k_coordinator_user = "gpupool-coordinator";

// Paths as the machine sees them (absolute), and `root`, the prefix they are written under.
struct CoordinatorPaths {
    std::filesystem::path root = "/";
    std::filesystem::path unit{};        // gpupool-coordinator.service
    std::filesystem::path sysusers{};    // the sysusers.d entry of the service's user
    std::filesystem::path group_file{};  // /etc/group: where systemd-sysusers puts the group
    std::filesystem::path tls_cert{};    // the copy of --tls-cert the service reads (0644)
    std::filesystem::path tls_key{};     // the copy of --tls-key (0640, the service's group)
    std::filesystem::path metrics_token{}; // the copy of --metrics-token-file (0640, the service's group)
    std::filesystem::path state_dir{};   // StateDirectory= (made by systemd, owned by the user)
    std::filesystem::path db{};          // the pool's database, in state_dir
    std::filesystem::path admin_token{}; // a new pool's first admin token, in state_dir (0600)

    std::filesystem::path on_disk(const std::filesystem::path& p) const;
};

CoordinatorPaths coordinator_paths(const std::filesystem::path& root);

// --listen as the unit will pass it: HOST:PORT with a port from 1 to 65535 (a service on a random
// port is of no use to workers). Names the flag.
struct ListenAddress {
    std::string text; // as given
    std::uint16_t port = 0;
};
Result<ListenAddress> parse_service_listen(std::string_view listen);

struct CoordinatorUnitInputs {
    std::filesystem::path binary{}; // absolute path of this gpupool binary
    ListenAddress listen{};
    bool tls = false; // serve HTTPS with the TLS copies
    bool metrics_token = false;   // GET /metrics also takes the scrape token (its copy)
    std::string metrics_listen{}; // a loopback HOST:PORT serving /metrics without a token ("" none)
};

// The command the unit runs: `<binary> coordinator --db <state>/pool.db --listen HOST:PORT
// --admin-token-file <state>/admin.token [--tls-cert <copy> --tls-key <copy>]
// [--metrics-token-file <copy>] [--metrics-listen HOST:PORT]`.
std::vector<std::string> coordinator_command(const CoordinatorPaths& paths, const CoordinatorUnitInputs& in);

// Refuses a binary the unit could not run: not absolute, or under /home, /root or /run/user
// (ProtectHome=yes hides those from the service).
Status check_service_binary(const std::filesystem::path& binary);

Result<std::string> render_coordinator_unit(const CoordinatorPaths& paths, const CoordinatorUnitInputs& in);

// The sysusers.d line that makes the system user and group `gpupool-coordinator` (no login, its
// home the state directory).
std::string render_coordinator_sysusers(const CoordinatorPaths& paths);

} // namespace gpupool::worker
