// Installs and removes the worker as a systemd service (`gpupool worker install` / `uninstall`):
// the enrollment token (0600), worker.toml's [pool] table and the unit (0644), the work dir (0700),
// then systemctl through the Systemctl interface. Paths come from ServicePaths, so a test installs
// under a temp root with RecordingSystemctl; the text of the files comes from service_files.hpp.
//
// Rules:
// - Nothing is overwritten that differs from what install would write, unless `force`: all the
//   files are compared first, and a refusal names each one (for worker.toml: each [pool] key it
//   would change) before anything is written. Equal files are left untouched (the same install
//   twice changes nothing and only re-runs `enable --now`). worker.toml's other keys and tables are
//   the owner's: a forced install changes [pool]'s four keys and keeps the rest.
// - Order: files, then `daemon-reload` (when the unit changed), `try-restart` (when a file was
//   replaced: a running worker drains and starts with the new settings), `enable --now`.
// - Uninstall stops the service first (`disable --now`: the worker drains) and removes nothing when
//   that fails; then the unit (and `daemon-reload`), worker.toml and the token. The work dir (the
//   spool: undelivered results, the worker's identity) stays unless `purge`; purge removes only a
//   directory that is the default work dir, or holds a worker.json, or is empty.
// - The report lists what was written, left, removed or kept, and the systemctl calls made, also
//   when a later step fails (so the caller can say how far it got).
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
};

struct UninstallOptions {
    ServicePaths paths{};
    bool purge = false;
};

struct ServiceReport {
    struct Step {
        std::string what; // "wrote", "unchanged", "replaced", "created", "removed", "kept", "absent"
        std::string path; // as the machine sees it
        std::string note{};
    };
    std::vector<Step> steps{};
    std::vector<std::string> systemctl{}; // the calls made, e.g. "enable --now gpupool-worker.service"
};

Status install_service(const InstallOptions& options, Systemctl& systemctl, ServiceReport& report);
Status uninstall_service(const UninstallOptions& options, Systemctl& systemctl, ServiceReport& report);

} // namespace gpupool::worker
