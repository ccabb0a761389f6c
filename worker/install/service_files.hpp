// The files `gpupool worker install` puts on a GPU owner's machine, as text: the [pool] table of
// worker.toml and the systemd unit that runs the worker. Pure functions of their inputs (no file
// system, no clock, no environment), so tests compare them byte for byte; installer.hpp writes them.
//
// Where things go (service_paths): system-wide /etc/gpupool/worker.toml, /etc/gpupool/enroll.token,
// /etc/systemd/system/gpupool-worker.service and the work dir /var/lib/gpupool/worker; per user
// (--user) ~/.config/gpupool/, ~/.config/systemd/user/ and ~/.local/share/gpupool/worker. Every
// path is also placed under a root prefix (`/` on a real machine, a temp dir in tests): the files
// are written below it, while what they say names the paths as the machine sees them.
//
// The unit (render_unit), its rules:
// - ExecStart is worker_command(), the one place that says how the service starts the worker.
// - Restart=on-failure after 10 s, except after exit 2 (a usage or config error, which a restart
//   would only repeat: RestartPreventExitStatus=2). After= and Wants=network-online.target.
// - Stopping drains: KillMode=mixed sends KillSignal=SIGTERM to the worker alone (not to the jobs
//   of the process runtime or the engine's log followers, which share its cgroup); the worker then
//   lets running jobs finish for its drain grace and hands back the rest. TimeoutStopSec is that
//   grace plus a minute, after which systemd SIGKILLs what is left.
// - OOMPolicy=continue: a job the kernel kills for memory is that job's failure, not the service's.
// - Hardening, system unit only: CapabilityBoundingSet drops what neither the worker nor a container
//   engine uses (rebooting, setting the clock, wake alarms). Deliberately absent, because podman and
//   docker inherit them or need what they take away: anything that gives the service its own mount
//   namespace (ProtectSystem, ProtectHome, PrivateTmp, ReadWritePaths: the engine's mounts and
//   conmon would live in it, invisible to `podman` outside and leaked at restart), seccomp filters
//   (SystemCallFilter, ProtectHostname, RestrictNamespaces, RestrictRealtime: inherited by runc and
//   the containers, which must unshare namespaces and set their hostname), NoNewPrivileges
//   (AppArmor profile changes of the engine), and device policies (PrivateDevices, ProtectClock,
//   DevicePolicy: the GPUs are devices). The jobs' own isolation is the runtime's (docs/worker.md).
//   The user unit runs under the owner's own manager with rootless podman: no extra settings.
#pragma once

#include "core/util/result.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

enum class ServiceScope : std::uint8_t { system, user };

inline constexpr std::string_view k_service_unit_name = "gpupool-worker.service";

// Paths as the machine sees them (absolute), and `root`, the prefix they are written under.
struct ServicePaths {
    ServiceScope scope = ServiceScope::system;
    std::filesystem::path root = "/";
    std::filesystem::path config{};   // worker.toml
    std::filesystem::path token{};    // the enrollment token install copies (0600)
    std::filesystem::path unit{};     // gpupool-worker.service
    std::filesystem::path work_dir{}; // the default work dir (the spool)

    // `p` under the root prefix: where the file is actually read and written.
    std::filesystem::path on_disk(const std::filesystem::path& p) const;
};

// `home` is the owner's home directory (used for ServiceScope::user only; must be absolute then).
Result<ServicePaths> service_paths(ServiceScope scope, const std::filesystem::path& root, const std::string& home);

// What install writes into worker.toml's [pool] table (the rest of the file is the owner's).
struct PoolTable {
    std::string coordinator{};             // http:// or https:// URL
    std::filesystem::path token_file{};    // absolute
    std::filesystem::path work_dir{};      // absolute
    std::string runtime = "podman";        // podman or docker
    bool operator==(const PoolTable&) const = default;
};

// Checks what came from the command line: the URL's scheme and characters, absolute paths, a
// runtime that isolates (the service runs strangers' jobs: no `process`). Names the flag.
Status check_pool_table(const PoolTable& pool);

// A new worker.toml holding only [pool].
std::string render_pool_config(const PoolTable& pool);

// The [pool] keys install manages, as `text` (the file `file`) has them; a key that is absent or
// not a string reads as empty. A TOML syntax error is an Error naming the file, line and column.
Result<PoolTable> read_pool_table(std::string_view text, const std::string& file);

// `text` with install's [pool] keys set to `pool`; every other key and table is kept (comments are
// not: toml++ writes the file anew).
Result<std::string> merge_pool_config(std::string_view text, const std::string& file, const PoolTable& pool);

// The command the unit runs: `<binary> worker --share --config <worker.toml>`: the file's [pool]
// table says where the pool is (what install wrote), and its [share] tables are the owner's terms
// (a system service runs as root, whose own ~/.config is not where install puts the file).
std::vector<std::string> worker_command(const std::filesystem::path& binary, const ServicePaths& paths,
                                        const PoolTable& pool);

// One argument as systemd's command-line syntax reads it back unchanged: `%` -> `%%`, `$` -> `$$`,
// double quotes around anything with blanks, quotes or backslashes. Control characters are refused.
Result<std::string> systemd_quote(std::string_view arg);

struct UnitInputs {
    std::filesystem::path binary{};                 // absolute path of this gpupool binary
    std::chrono::seconds drain_grace{300};          // the worker's (its --drain-grace default)
};

Result<std::string> render_unit(const ServicePaths& paths, const PoolTable& pool, const UnitInputs& in);

} // namespace gpupool::worker
