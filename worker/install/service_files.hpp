// The files `gpupool worker install` puts on a GPU owner's machine, as text: the [pool] table of
// worker.toml, the systemd unit that runs the worker, the sysusers.d entry of the service's user and
// its /etc/subuid and /etc/subgid lines. Pure functions of their inputs (no file system, no clock, no
// environment), so tests compare them byte for byte; installer.hpp writes them.
//
// Where things go (service_paths): system-wide /etc/gpupool/worker.toml, /etc/gpupool/enroll.token,
// /etc/systemd/system/gpupool-worker.service, the user's entry /etc/sysusers.d/gpupool-worker.conf
// and the work dir /var/lib/gpupool/worker (also the service's StateDirectory= and its user's home);
// per user (--user) ~/.config/gpupool/, ~/.config/systemd/user/ and ~/.local/share/gpupool/worker.
// Every path is also placed under a root prefix (`/` on a real machine, a temp dir in tests): the
// files are written below it, while what they say names the paths as the machine sees them.
//
// The unit (render_unit), its rules:
// - Who runs it. The system unit runs the worker as its own system user, gpupool-worker (User=,
//   Group=; made by systemd-sysusers from render_worker_sysusers; StateDirectory= gives it the
//   default work dir, 0700, which is its home), never root unless asked (--as-root: the unit as it
//   was before, with no User=). A job that tricks the worker into acting on a path it controls then
//   gets that user's rights, not root's. By engine:
//   - podman runs rootless as that user: it needs subordinate ids (render_subid_line) and its user's
//     own systemd manager, user@UID.service (Wants=/After=; lingering keeps it up), whose runtime
//     directory and D-Bus (XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS) it uses to give each job's
//     container a cgroup with its memory, CPU and pid limits: without them rootless podman falls
//     back to cgroupfs, where it can set no limit (the OCI runtime refuses them). Hence the uid in
//     the unit, known once the user exists. No root is needed at run time.
//   - docker: SupplementaryGroups=docker, to reach the daemon's socket. Membership of that group is
//     root-equivalent on the machine (the daemon runs what it is asked, as root): the engine's design.
//   - process (no engine): nothing more (install refuses it anyway: it isolates nothing).
//   The user unit (--user) runs as the owner under their own manager, as before.
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
//   (AppArmor profile changes of the engine, and rootless podman's newuidmap/newgidmap, which are
//   setuid or carry file capabilities), and device policies (PrivateDevices, ProtectClock,
//   DevicePolicy: the GPUs are devices). User=, StateDirectory= and Environment= make no namespace.
//   The jobs' own isolation is the runtime's (docs/worker.md).
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
// The system user the system-wide service runs as (next to k_coordinator_user).
inline constexpr std::string_view k_worker_user = "gpupool-worker";

// Paths as the machine sees them (absolute), and `root`, the prefix they are written under.
struct ServicePaths {
    ServiceScope scope = ServiceScope::system;
    std::filesystem::path root = "/";
    std::filesystem::path config{};   // worker.toml
    std::filesystem::path token{};    // the enrollment token install copies (0600)
    std::filesystem::path unit{};     // gpupool-worker.service
    std::filesystem::path work_dir{}; // the default work dir (the spool); system: also the user's home
    // System scope only (empty for --user): the service's user and what rootless podman needs.
    std::filesystem::path sysusers{};    // /etc/sysusers.d/gpupool-worker.conf
    std::filesystem::path passwd_file{}; // /etc/passwd: where systemd-sysusers puts the user
    std::filesystem::path group_file{};  // /etc/group: the docker group
    std::filesystem::path subuid{};      // /etc/subuid and /etc/subgid: the user's subordinate ids
    std::filesystem::path subgid{};
    std::filesystem::path linger{};      // /var/lib/systemd/linger/gpupool-worker: its manager stays up

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
// (the service's user has no ~/.config/gpupool of its own: install puts the file in /etc).
std::vector<std::string> worker_command(const std::filesystem::path& binary, const ServicePaths& paths,
                                        const PoolTable& pool);

// One argument as systemd's command-line syntax reads it back unchanged: `%` -> `%%`, `$` -> `$$`,
// double quotes around anything with blanks, quotes or backslashes. Control characters are refused.
Result<std::string> systemd_quote(std::string_view arg);

struct UnitInputs {
    std::filesystem::path binary{};                 // absolute path of this gpupool binary
    std::chrono::seconds drain_grace{300};          // the worker's (its --drain-grace default)
    bool as_root = false;                           // system scope: no User= (--as-root)
    std::optional<std::uint32_t> uid{};             // the service user's uid: podman's user manager
};

// The unit. A system unit for podman that runs as the service's user needs `in.uid` (an Error
// without it).
Result<std::string> render_unit(const ServicePaths& paths, const PoolTable& pool, const UnitInputs& in);

// The sysusers.d line that makes the system user and group gpupool-worker: no login, its home the
// default work dir (rootless podman keeps its storage under the home).
std::string render_worker_sysusers(const ServicePaths& paths);

// Subordinate ids (/etc/subuid, /etc/subgid: `name:start:count` lines) for rootless podman.
inline constexpr std::uint64_t k_subid_min = 100000; // where useradd starts (login.defs SUB_UID_MIN)
inline constexpr std::uint64_t k_subid_count = 65536;
// Whether `text`, one of those files, has a line for the user `name` or its uid.
bool has_subid_entry(std::string_view text, std::string_view name, std::uint32_t uid);
// The lowest start from k_subid_min whose k_subid_count ids overlap no range in any of `files`
// (malformed lines and comments are skipped); nothing when no room is left below 2^32.
std::optional<std::uint32_t> free_subid_start(const std::vector<std::string_view>& files);
// `text` with the line `name:start:65536` appended (after a newline, if the text lacks its last one).
std::string append_subid_entry(std::string_view text, std::string_view name, std::uint32_t start);

} // namespace gpupool::worker
