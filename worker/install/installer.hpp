// Installs and removes the worker as a systemd service (`gpupool worker install` / `uninstall`):
// the enrollment token, worker.toml's [pool] table and the unit (0644), the work dir (0700), then
// systemctl through the Systemctl interface. Paths come from ServicePaths, so a test installs under a
// temp root with a recording fake; the text of the files comes from service_files.hpp.
//
// Who the system-wide service runs as (service_files.hpp says why):
// - by default the system user gpupool-worker: install writes its sysusers.d entry and runs
//   systemd-sysusers (through Systemctl) when <root>/etc/passwd lacks it, before anything needs the
//   user; the token is 0640 root:gpupool-worker (the service reads it and cannot change it, nobody
//   else reads it; root owns it, as everything in /etc/gpupool); the work dir is the user's (0700),
//   and so is the default one, its home, when --work-dir names another. With podman: the user's
//   subordinate ids, one `gpupool-worker:START:65536` line each in /etc/subuid and /etc/subgid (a
//   START that overlaps no range of either file; a user that has a line keeps it), and its linger
//   file (/var/lib/systemd/linger/gpupool-worker: its own systemd manager stays up); warnings when
//   newuidmap or the user D-Bus are missing. With docker: the group docker must exist (else a
//   refusal), and a warning says that it is root-equivalent.
// - with `as_root` (--as-root): root, the unit as before (no User=), the token 0600 root, and a
//   warning that says why that is dangerous.
// - --user: the owner, as before (the token 0600, the work dir made 0700).
// A work dir that exists and is not already the account's is given to it (with all it holds) only
// when it is a spool: the default one, one holding a worker.json, or an empty one; another is a
// refusal before anything is written (the worker refuses a work dir it does not own).
//
// Rules:
// - Nothing is overwritten that differs from what install would write, unless `force`: all the
//   files are compared first, and a refusal names each one (for worker.toml: each [pool] key it
//   would change) before anything is written. Equal files are left untouched (the same install
//   twice changes nothing and only re-runs `enable --now`). worker.toml's other keys and tables are
//   the owner's: a forced install changes [pool]'s four keys and keeps the rest. A podman unit needs
//   the user's uid: while the user does not exist yet, an existing unit counts as different.
// - Order: the user's entry and systemd-sysusers, the other files, the subordinate ids, the work
//   dir, then `daemon-reload` (when the unit changed), `try-restart` (when a file was replaced: a
//   running worker drains and starts with the new settings), `enable --now`.
// - Uninstall stops the service first (`disable --now`: the worker drains) and removes nothing when
//   that fails; then the unit (and `daemon-reload`), worker.toml, the token, the user's sysusers.d
//   entry and linger file. The user itself and its subordinate ids stay (as the coordinator's
//   uninstall keeps its user): the report says so. The work dir (the spool: undelivered results,
//   the worker's identity) stays unless `purge`; purge removes only a directory that is the default
//   work dir, or holds a worker.json, or is empty.
// - Before anything: the binary the unit runs must be one the service can run (preflight.hpp:
//   check_service_binary; a refusal, not a warning). The caller runs the network checks
//   (preflight_worker) first, as they need the token and the engine lookup.
// - A worker.toml the owner wrote (their terms, no [pool] yet, or a [pool] whose keys agree) is kept
//   as written and install adds its [pool] keys (`updated`); only differing [pool] values need force.
// - `dry_run`: everything is checked and planned as for a real install, and the report says what
//   would be written, made and run ("would write", ...; its systemctl calls are the ones it would
//   make); nothing under the root is touched and no program is run.
// - The report lists what was written, left, removed or kept, the systemctl calls made and the
//   warnings, also when a later step fails (so the caller can say how far it got).
#pragma once

#include "core/util/result.hpp"
#include "worker/install/service_files.hpp"
#include "worker/install/systemctl.hpp"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::worker {

struct InstallOptions {
    ServicePaths paths{};
    std::string coordinator{};
    std::filesystem::path token_source{}; // --token-file: copied to paths.token
    std::filesystem::path work_dir{};     // empty: paths.work_dir
    std::string runtime = "podman";
    std::filesystem::path binary{};       // the gpupool binary the unit runs (absolute)
    std::chrono::seconds drain_grace{300};
    bool force = false;
    bool as_root = false; // --as-root: the system service runs as root (no User=)
    bool dry_run = false; // --dry-run: check and plan everything, report it, touch nothing
};

struct UninstallOptions {
    ServicePaths paths{};
    bool purge = false;
};

struct ServiceReport {
    struct Step {
        std::string what; // "wrote", "unchanged", "replaced", "added", "created", "removed", "kept", "absent"
        std::string path; // as the machine sees it
        std::string note{};
    };
    std::vector<Step> steps{};
    std::vector<std::string> systemctl{}; // the calls made, e.g. "enable --now gpupool-worker.service"
    std::vector<std::string> warnings{};  // for the owner to read: --as-root, the docker group, ...
    bool dry_run = false;                 // steps and calls are what would be done; nothing was

    // Notes a systemctl call made (its Status already in hand) and passes the Status on.
    Status noted(const std::string& line, Status st) {
        systemctl.push_back(line);
        return st;
    }
};

Status install_service(const InstallOptions& options, Systemctl& systemctl, ServiceReport& report);
Status uninstall_service(const UninstallOptions& options, Systemctl& systemctl, ServiceReport& report);

} // namespace gpupool::worker
