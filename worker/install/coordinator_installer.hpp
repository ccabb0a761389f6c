// Installs and removes the coordinator as a systemd service (`gpupool coordinator install` /
// `uninstall`): the sysusers.d entry of its user, copies of the TLS certificate (0644) and key (0640,
// group gpupool-coordinator), the unit (0644), then systemd-sysusers and systemctl through the
// Systemctl interface. Paths come from CoordinatorPaths, so a test installs under a temp root with
// RecordingSystemctl; the text of the files comes from coordinator_files.hpp.
//
// Rules (the worker's, installer.hpp):
// - Nothing is overwritten that differs from what install would write, unless `force`: every file
//   is compared first, and a refusal names each one before anything is written. Equal files are
//   left untouched (the same install twice changes nothing and only re-runs `enable --now`).
// - The TLS files are checked (readable PEM, the key matching the certificate) before anything is
//   written: a service that cannot start would only restart in a loop.
// - Order: the sysusers.d entry, `systemd-sysusers` (when the group is not in /etc/group yet), the
//   TLS copies (the key's group needs the user), the unit, `daemon-reload` (when the unit changed),
//   `try-restart` (when the unit or the user's entry was replaced) or else `try-reload-or-restart`
//   (when only the TLS files were: a running coordinator re-reads them on SIGHUP and keeps its
//   connections), `enable --now`.
// - Uninstall stops the service first (`disable --now`) and removes nothing when that fails; then
//   the unit (and `daemon-reload`), the TLS copies and the sysusers.d entry. The state directory
//   (the pool's database: jobs, ledger, tokens) and the system user that owns it are kept: the
//   report says so, and removing them is the operator's decision.
// - Before anything: the binary must be one the service's user can run (preflight.hpp), and a
//   --listen off loopback without TLS is warned about (plain HTTP).
// - `dry_run`: checked and planned as a real install, reported as "would write", ... with the calls
//   it would make; nothing under the root is touched and no program is run.
// - The report lists what was written, left, removed or kept, and the calls made, also when a later
//   step fails.
#pragma once

#include "core/util/result.hpp"
#include "worker/install/coordinator_files.hpp"
#include "worker/install/installer.hpp"
#include "worker/install/systemctl.hpp"

#include <filesystem>
#include <string>

namespace gpupool::worker {

struct CoordinatorInstallOptions {
    CoordinatorPaths paths{};
    std::string listen{};             // HOST:PORT
    std::filesystem::path tls_cert{}; // --tls-cert, copied to paths.tls_cert (empty: plain HTTP)
    std::filesystem::path tls_key{};  // --tls-key, copied to paths.tls_key
    std::filesystem::path metrics_token{}; // --metrics-token-file, copied to paths.metrics_token (empty: none)
    std::string metrics_listen{};          // --metrics-listen: a loopback HOST:PORT (empty: none)
    std::filesystem::path binary{};   // the gpupool binary the unit runs (absolute)
    bool force = false;
    bool dry_run = false; // --dry-run: check and plan everything, report it, touch nothing
};

Status install_coordinator(const CoordinatorInstallOptions& options, Systemctl& systemctl, ServiceReport& report);
Status uninstall_coordinator(const CoordinatorPaths& paths, Systemctl& systemctl, ServiceReport& report);

} // namespace gpupool::worker
