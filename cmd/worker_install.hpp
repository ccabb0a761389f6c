// `gpupool worker install` and `gpupool worker uninstall`: run the worker as a systemd service
// (system-wide, or the owner's own with --user). register_worker_install adds both to the `worker`
// command; run_worker_install / run_worker_uninstall do the work (worker/install/installer.hpp) and
// return the exit code: 0 done, 1 failed (files written so far are listed), 2 usage error or a
// refusal to overwrite different settings without --force.
//
// The system-wide service runs as the system user gpupool-worker; `--as-root` (install only) keeps
// root and prints why that is dangerous (the installer's warning). Warnings go to stderr (--json:
// the document's `warnings`).
//
// Hidden options for tests: --root DIR (write under DIR instead of /), --systemctl PROGRAM (run
// PROGRAM instead of systemctl; the system-wide root check is skipped with --root) and --sysusers
// PROGRAM (instead of systemd-sysusers).
#pragma once

#include "cmd/cli.hpp"
#include "worker/install/installer.hpp"

#include <filesystem>
#include <string>

namespace CLI {
class App;
}

namespace gpupool::cmd {

struct WorkerInstallOptions {
    bool user = false;
    std::string coordinator{};
    std::string token_file{}; // the global --token-file
    std::string work_dir{};
    std::string runtime = "podman";
    bool force = false;
    bool as_root = false;
    bool dry_run = false; // --dry-run: check, then print what would be done
    bool purge = false;
    std::string root = "/";
    std::string systemctl = "systemctl";
    std::string sysusers = "systemd-sysusers";
};

int run_worker_install(const GlobalOptions& global, const WorkerInstallOptions& o);
int run_worker_uninstall(const GlobalOptions& global, const WorkerInstallOptions& o);

// What an install or uninstall did (its files, the systemctl calls, warnings on stderr), as text or
// --json; shared with `coordinator install` (coordinator_install.cpp). `user`: the calls were
// `systemctl --user`.
void print_service_report(const GlobalOptions& global, const worker::ServiceReport& report, bool ok, bool user);
// This process's executable (absolute), for a unit's ExecStart; empty if it cannot be found.
std::filesystem::path this_binary();

// Adds `install` and `uninstall` under `worker` (the `worker` command's own callback must not run
// when one of its subcommands did).
void register_worker_install(Cli& cli, CLI::App* worker);

} // namespace gpupool::cmd
