// What would make an installed service fail, checked before install writes anything (and by
// --dry-run, which writes nothing): `gpupool worker install` and `gpupool coordinator install`.
// A service that cannot start only restarts in a loop in the journal, so each check that would end
// so is a refusal whose message names what is wrong and what to do; what works but is unwise is a
// warning.
//
// Refusals:
// - the binary the unit runs lies under a temporary directory (/tmp, /var/tmp, /dev/shm: systemd's
//   PrivateTmp hides them from the service, and they are cleaned);
// - the service runs as another user (its system user) and the binary, or a directory above it, is
//   closed to other users, or the binary is not executable by them;
// - (worker) the container engine its runtime needs is not found (FindProgram: the real one searches
//   PATH, a test's can say "none");
// - (worker) the coordinator cannot be reached, or refuses the enrollment token, or the token is not
//   an enrollment token (GET /v1/whoami with it; whoami does not spend one of its uses).
// Warnings: plain http:// to a coordinator that is not on this machine (the tokens travel in clear
// text), and a coordinator listening off loopback without TLS.
// Thread-compatible; the worker's check does network I/O (one request).
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

// Where a program is found, or nullopt.
using FindProgram = std::function<std::optional<std::filesystem::path>(const std::string& name)>;
// The real lookup: `name` on PATH.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

// The first refusal above about `binary`; `user` is who runs it when that is not root (empty: root
// or the owner, who can run what they ran install with).
Status check_service_binary(const std::filesystem::path& binary, const std::string& user);

struct WorkerPreflight {
    std::string coordinator;        // the pool's URL (or URL list: the first is asked)
    std::string token;              // the enrollment token
    std::string ca_cert;            // PEM file to trust (empty: the system's)
    std::string runtime = "podman"; // podman or docker: the engine looked for
    FindProgram find = find_on_path;
};

// The worker's checks beyond the binary; the warnings when it passes.
Result<std::vector<std::string>> preflight_worker(const WorkerPreflight& p);

// The warning for a worker's coordinator URL that is plain http:// to a host off this machine.
std::optional<std::string> plain_http_warning(const std::string& url);

// The coordinator's: a warning when `listen` is off loopback and there is no TLS.
std::vector<std::string> preflight_coordinator(const std::string& listen, bool tls);

} // namespace gpupool::worker
