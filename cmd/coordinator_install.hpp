// `gpupool coordinator install` and `gpupool coordinator uninstall`: run the coordinator as a
// hardened systemd service (its own system user, the database in /var/lib/gpupool-coordinator,
// TLS copies in /etc/gpupool/coordinator). register_coordinator_install adds both to the
// `coordinator` command; run_coordinator_install / run_coordinator_uninstall do the work
// (worker/install/coordinator_installer.hpp) and return the exit code: 0 done, 1 failed (files
// written so far are listed), 2 usage error or a refusal to overwrite different files without
// --force.
//
// Hidden options for tests: --root DIR (write under DIR instead of /; the root check is skipped),
// --systemctl PROGRAM and --sysusers PROGRAM (run these instead of systemctl and systemd-sysusers).
#pragma once

#include "cmd/cli.hpp"

#include <string>

namespace CLI {
class App;
}

namespace gpupool::cmd {

struct CoordinatorInstallOptions {
    std::string listen{};
    std::string tls_cert{};
    std::string tls_key{};
    std::string metrics_token_file{};
    std::string metrics_listen{};
    bool force = false;
    bool dry_run = false; // --dry-run: check, then print what would be done
    std::string root = "/";
    std::string systemctl = "systemctl";
    std::string sysusers = "systemd-sysusers";
};

int run_coordinator_install(const GlobalOptions& global, const CoordinatorInstallOptions& o);
int run_coordinator_uninstall(const GlobalOptions& global, const CoordinatorInstallOptions& o);

// Adds `install` and `uninstall` under `coordinator` (whose own callback must not run when one of
// them did).
void register_coordinator_install(Cli& cli, CLI::App* coordinator);

} // namespace gpupool::cmd
