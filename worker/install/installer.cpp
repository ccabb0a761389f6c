#include "worker/install/installer.hpp"

#include "core/config/client_config.hpp"
#include "worker/install/install_files.hpp"
#include "worker/install/preflight.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace gpupool::worker {

namespace fs = std::filesystem;

namespace {

const std::string k_worker_unit(k_service_unit_name);

using Planned = PlannedFile;

// What differs between two [pool] tables, key by key, for a refusal.
std::string pool_differences(const PoolTable& have, const PoolTable& want) {
    std::string out;
    auto add = [&out](const char* key, const std::string& a, const std::string& b) {
        if (a != b) {
            out += std::string(out.empty() ? "" : ", ") + key + " is `" + a + "`, install would write `" + b + "`";
        }
    };
    add("coordinator", have.coordinator, want.coordinator);
    add("token_file", have.token_file.string(), want.token_file.string());
    add("work_dir", have.work_dir.string(), want.work_dir.string());
    add("runtime", have.runtime, want.runtime);
    return out;
}

// Whether `want` only adds to `have`: every key `have` sets is the same in `want`.
bool only_fills_in(const PoolTable& have, const PoolTable& want) {
    const auto same_or_unset = [](const std::string& a, const std::string& b) { return a.empty() || a == b; };
    return same_or_unset(have.coordinator, want.coordinator) &&
           same_or_unset(have.token_file.string(), want.token_file.string()) &&
           same_or_unset(have.work_dir.string(), want.work_dir.string()) && same_or_unset(have.runtime, want.runtime);
}

// Decides what happens to worker.toml; a conflict (without force) is returned as its reason. A file
// the owner wrote (their terms) is never replaced without force: install adds its [pool] to it.
Result<std::optional<std::string>> plan_config(const ServicePaths& paths, const PoolTable& pool, bool force,
                                               Planned& config) {
    auto existing = read_existing(paths.on_disk(paths.config));
    if (!existing) {
        return existing.error();
    }
    config.text = render_pool_config(pool);
    if (!*existing) {
        return std::optional<std::string>{};
    }
    const std::string file = paths.on_disk(paths.config).string();
    auto have = read_pool_table(**existing, file);
    if (have && *have == pool) {
        config.what = "unchanged";
        config.text = **existing;
        return std::optional<std::string>{};
    }
    if (have && only_fills_in(*have, pool)) {
        // The owner's own file (its terms, no [pool] yet): kept as written, [pool] added after it.
        config.what = "updated";
        config.note = "the owner's file kept, [pool] added";
        const std::string& text = **existing;
        config.text = text + (text.empty() || text.ends_with('\n') ? "" : "\n") + "\n" + render_pool_config(pool);
        if (auto check = read_pool_table(config.text, file); check && *check == pool) {
            return std::optional<std::string>{};
        }
        auto merged = merge_pool_config(text, file, pool); // a [pool] table with other keys: filled in
        if (!merged) {
            return merged.error();
        }
        config.text = *merged;
        config.note = "the owner's settings kept, [pool] filled in";
        return std::optional<std::string>{};
    }
    if (!force) {
        return std::optional<std::string>(paths.config.string() + ": " +
                                          (have ? pool_differences(*have, pool)
                                                : "does not parse (" + have.error().describe() + ")"));
    }
    config.what = "replaced";
    if (have) {
        auto merged = merge_pool_config(**existing, file, pool);
        if (!merged) {
            return merged.error();
        }
        config.text = *merged;
        config.note = "[pool] updated, the file's other settings kept";
    } else {
        config.note = "the old file did not parse: replaced whole";
    }
    return std::optional<std::string>{};
}

// Who the service runs as: the owner (--user), the system user gpupool-worker, or root (--as-root).
enum class RunsAs : std::uint8_t { owner, service_user, root };

RunsAs runs_as(const InstallOptions& o) {
    if (o.paths.scope == ServiceScope::user) {
        return RunsAs::owner;
    }
    return o.as_root ? RunsAs::root : RunsAs::service_user;
}

// An account's ids as <root>/etc/passwd has them (where systemd-sysusers writes them). Not through
// NSS: getpwnam in the static binary would need the build machine's glibc NSS modules at run time,
// and a test's root is not the machine's.
struct Account {
    uid_t uid = 0;
    gid_t gid = 0;
    std::string name = "root";
};

std::vector<std::string_view> fields(std::string_view line) {
    std::vector<std::string_view> out;
    while (true) {
        const auto colon = line.find(':');
        out.push_back(line.substr(0, colon));
        if (colon == std::string_view::npos) {
            return out;
        }
        line.remove_prefix(colon + 1);
    }
}

template <typename T>
std::optional<T> number(std::string_view s) {
    unsigned long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
        return std::nullopt;
    }
    return static_cast<T>(v);
}

std::optional<Account> find_account(const ServicePaths& paths) {
    std::ifstream in(paths.on_disk(paths.passwd_file));
    std::string line;
    while (std::getline(in, line)) {
        const auto f = fields(line); // name:password:UID:GID:gecos:home:shell
        if (f.size() >= 4 && f[0] == k_worker_user) {
            const auto uid = number<uid_t>(f[2]);
            const auto gid = number<gid_t>(f[3]);
            if (uid && gid) {
                return Account{*uid, *gid, std::string(k_worker_user)};
            }
        }
    }
    return std::nullopt;
}

bool has_group(const ServicePaths& paths, std::string_view group) {
    std::ifstream in(paths.on_disk(paths.group_file));
    std::string line;
    while (std::getline(in, line)) {
        if (fields(line).front() == group) {
            return true;
        }
    }
    return false;
}

// The account whose the service's files and work dir are (nothing for --user: the owner's own).
std::optional<Account> existing_account(const InstallOptions& o) {
    switch (runs_as(o)) {
    case RunsAs::service_user:
        return find_account(o.paths);
    case RunsAs::root:
        return Account{};
    case RunsAs::owner:
        break;
    }
    return std::nullopt;
}

Status check_account_options(const InstallOptions& o, const PoolTable& pool) {
    if (o.as_root && o.paths.scope == ServiceScope::user) {
        return make_error(ErrorCode::invalid_input,
                          "--as-root is for the system-wide service: --user runs the worker as you", "--as-root");
    }
    if (runs_as(o) == RunsAs::service_user && pool.runtime == "docker" && !has_group(o.paths, "docker")) {
        return make_error(ErrorCode::invalid_input,
                          "--runtime docker: this machine has no group `docker` (" + o.paths.group_file.string() +
                              "), which the service's user " + std::string(k_worker_user) +
                              " would join to reach the docker daemon: is docker installed? (--runtime podman runs "
                              "jobs rootless and needs no such group)",
                          "--runtime");
    }
    return {};
}

// The work dir, or the default one (the service user's home). Whether install may give it to the
// account whole: the default one, a spool (a worker.json) or an empty directory, the same test as
// --purge's. The depth check keeps `/` and `/srv` out whatever they hold.
bool looks_like_spool(const ServicePaths& paths, const fs::path& work) {
    const fs::path on_disk = paths.on_disk(work);
    std::error_code ec;
    const bool spool = work == paths.work_dir || fs::exists(on_disk / "worker.json", ec) ||
                       !fs::exists(on_disk, ec) || fs::is_empty(on_disk, ec);
    const fs::path relative = work.relative_path();
    return spool && std::distance(relative.begin(), relative.end()) >= 2;
}

// Refuses, before anything is written, a work dir install could not give to the service's account.
Status check_work_dir(const ServicePaths& paths, const fs::path& work, const std::optional<Account>& account) {
    struct stat st {};
    if (::lstat(paths.on_disk(work).c_str(), &st) != 0) {
        return {}; // install makes it
    }
    if (!S_ISDIR(st.st_mode)) {
        return make_error(ErrorCode::invalid_input,
                          "the work dir `" + work.string() + "` exists and is not a directory", "--work-dir");
    }
    if ((account && st.st_uid == account->uid) || looks_like_spool(paths, work)) {
        return {};
    }
    return make_error(ErrorCode::invalid_input,
                      "the work dir `" + work.string() + "` is not " +
                          (account ? account->name : std::string(k_worker_user)) +
                          "'s and holds other files but no worker.json: the worker runs only in a work dir its user "
                          "owns, and install gives it only a spool or an empty directory; name a new or empty one "
                          "(--work-dir) or chown it yourself. Nothing was changed",
                      "--work-dir");
}

// What install writes, compared with what is there. `unit_pending`: the unit names the service
// user's uid, which is known only once systemd-sysusers has made the user.
struct InstallPlan {
    std::vector<Planned> files{};
    bool unit_pending = false;
};

UnitInputs unit_inputs(const InstallOptions& o, const std::optional<Account>& account) {
    UnitInputs in{o.binary, o.drain_grace, o.as_root, std::nullopt};
    if (account && runs_as(o) == RunsAs::service_user) {
        in.uid = static_cast<std::uint32_t>(account->uid);
    }
    return in;
}

Result<InstallPlan> plan_install(const InstallOptions& o, const PoolTable& pool, const std::optional<Account>& account) {
    auto token = config::read_token_file(o.token_source, "--token-file");
    if (!token) {
        return token.error();
    }
    const bool service_user = runs_as(o) == RunsAs::service_user;
    InstallPlan plan;
    UnitInputs in = unit_inputs(o, account);
    plan.unit_pending = service_user && pool.runtime == "podman" && !in.uid;
    if (plan.unit_pending) {
        in.uid = 0; // a stand-in, to check the rest now; rendered again with the user's uid
    }
    auto unit = render_unit(o.paths, pool, in);
    if (!unit) {
        return unit.error();
    }
    const std::string user(k_worker_user);
    auto& files = plan.files;
    if (service_user) {
        files.push_back({o.paths.sysusers, render_worker_sysusers(o.paths), k_mode_0644, "wrote",
                         "the system user " + user + " the worker runs as"});
    }
    files.push_back({o.paths.token, *token + "\n", service_user ? k_mode_0640 : k_mode_0600, "wrote",
                     service_user ? "the enrollment token, 0640 root:" + user + ": the service reads it, cannot change it"
                                  : "the enrollment token, 0600"});
    files.push_back({o.paths.config, "", k_mode_0644, "wrote", ""});
    files.push_back({o.paths.unit, *unit, k_mode_0644, "wrote",
                     "runs " + o.binary.string() + " worker --share as " +
                         (runs_as(o) == RunsAs::owner ? "you" : service_user ? user : "root")});
    if (service_user && pool.runtime == "podman") {
        files.push_back({o.paths.linger, "", k_mode_0644, "wrote",
                         "lingering: " + user + "'s own systemd manager, which rootless podman needs, stays up"});
    }
    std::vector<std::string> conflicts;
    for (auto& f : files) {
        auto c = f.path == o.paths.config ? plan_config(o.paths, pool, o.force, f)
                                          : plan_owned(o.paths.root, o.force, f);
        if (!c) {
            return c.error();
        }
        if (*c) {
            conflicts.push_back(**c);
        }
    }
    if (!conflicts.empty()) {
        std::string message = "an earlier install left different settings (nothing was changed; --force replaces "
                              "them): ";
        for (std::size_t i = 0; i < conflicts.size(); ++i) {
            message += (i > 0 ? "; " : "") + conflicts[i];
        }
        return make_error(ErrorCode::conflict, message, "--force");
    }
    return plan;
}

// The service's user, made by systemd-sysusers from its entry when <root>/etc/passwd lacks it.
Status ensure_account(const ServicePaths& paths, Systemctl& systemctl, ServiceReport& report,
                      std::optional<Account>& account) {
    if (account) {
        return {};
    }
    if (auto st = report.noted("systemd-sysusers " + paths.sysusers.string(),
                        systemctl.create_system_users(paths.root, paths.sysusers));
        !st) {
        return st;
    }
    account = find_account(paths);
    if (!account) {
        return make_error(ErrorCode::io, "systemd-sysusers made no user `" + std::string(k_worker_user) + "` in " +
                                             paths.passwd_file.string());
    }
    return {};
}

// The token: root's, readable by the service's group (0640) or by root alone (0600).
Status own_token(const ServicePaths& paths, const Account& account, fs::perms mode) {
    const fs::path token = paths.on_disk(paths.token);
    struct stat st {};
    if (::stat(token.c_str(), &st) != 0 ||
        ((st.st_uid != 0 || st.st_gid != account.gid) && ::chown(token.c_str(), 0, account.gid) != 0)) {
        return make_error(ErrorCode::io, "cannot give `" + token.string() + "` to root:" +
                                             (account.uid == 0 ? "root" : account.name) + ": " + std::strerror(errno));
    }
    std::error_code ec;
    fs::permissions(token, mode, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot set the mode of `" + token.string() + "`: " + ec.message());
    }
    return {};
}

// `dir` and all it holds, to the account (lchown: a link is changed, never what it points to).
Status chown_tree(const fs::path& dir, const Account& a) {
    std::error_code ec;
    auto fail = [&dir, &a](const fs::path& p) {
        return make_error(ErrorCode::io, "cannot give `" + p.string() + "` (in `" + dir.string() + "`) to " + a.name +
                                             ": " + std::strerror(errno));
    };
    if (::lchown(dir.c_str(), a.uid, a.gid) != 0) {
        return fail(dir);
    }
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (::lchown(it->path().c_str(), a.uid, a.gid) != 0) {
            return fail(it->path());
        }
    }
    if (ec) {
        return make_error(ErrorCode::io, "cannot list `" + dir.string() + "`: " + ec.message());
    }
    return {};
}

// Makes the directory (0700) or keeps it, and gives it to the account when that is known (not for
// --user: the owner's own).
Status ensure_dir(const ServicePaths& paths, const fs::path& dir, const std::optional<Account>& account,
                  const std::string& what, ServiceReport& report) {
    const fs::path on_disk = paths.on_disk(dir);
    const std::string owner = account ? ", " + account->name + "'s" : "";
    std::error_code ec;
    struct stat st {};
    if (::lstat(on_disk.c_str(), &st) != 0) {
        fs::create_directories(on_disk, ec);
        if (!ec) {
            fs::permissions(on_disk, fs::perms::owner_all, ec);
        }
        if (ec) {
            return make_error(ErrorCode::io, "cannot create " + what + " `" + on_disk.string() + "`: " + ec.message());
        }
        if (account && ::lchown(on_disk.c_str(), account->uid, account->gid) != 0) {
            return make_error(ErrorCode::io, "cannot give `" + on_disk.string() + "` to " + account->name + ": " +
                                                 std::strerror(errno));
        }
        report.steps.push_back({"created", dir.string(), what + ", 0700" + owner});
        return {};
    }
    if (account && (st.st_uid != account->uid || st.st_gid != account->gid)) {
        if (auto s = chown_tree(on_disk, *account); !s) {
            return s;
        }
        report.steps.push_back({"kept", dir.string(), what + ", now " + account->name + "'s with all it holds"});
        return {};
    }
    report.steps.push_back({"kept", dir.string(), what});
    return {};
}

// One `gpupool-worker:START:65536` line in /etc/subuid and one in /etc/subgid, each only where the
// user has none; START is free in both files, so that the two ranges match.
Status add_subids(const ServicePaths& paths, const Account& a, ServiceReport& report) {
    auto uids = read_existing(paths.on_disk(paths.subuid));
    auto gids = read_existing(paths.on_disk(paths.subgid));
    if (!uids || !gids) {
        return uids ? gids.error() : uids.error();
    }
    const std::string uid_text = uids->value_or("");
    const std::string gid_text = gids->value_or("");
    const auto uid = static_cast<std::uint32_t>(a.uid);
    const std::array<bool, 2> need{!has_subid_entry(uid_text, a.name, uid), !has_subid_entry(gid_text, a.name, uid)};
    const auto start = free_subid_start({uid_text, gid_text});
    if ((need[0] || need[1]) && !start) {
        return make_error(ErrorCode::io, "no room is left for " + std::to_string(k_subid_count) +
                                             " subordinate ids in " + paths.subuid.string() + " and " +
                                             paths.subgid.string());
    }
    const std::array<const fs::path*, 2> files{&paths.subuid, &paths.subgid};
    const std::array<const std::string*, 2> texts{&uid_text, &gid_text};
    for (std::size_t i = 0; i < 2; ++i) {
        if (!need[i]) {
            report.steps.push_back({"kept", files[i]->string(), a.name + " has its range there already"});
            continue;
        }
        const PlannedFile f{*files[i], append_subid_entry(*texts[i], a.name, *start), k_mode_0644};
        if (auto st = write_planned(paths.root, f); !st) {
            return st;
        }
        report.steps.push_back({"added", files[i]->string(),
                                a.name + ":" + std::to_string(*start) + ":" + std::to_string(k_subid_count) +
                                    ", rootless podman's ids for the jobs' users"});
    }
    return {};
}

void add_warnings(const InstallOptions& o, const PoolTable& pool, ServiceReport& report) {
    const std::string user(k_worker_user);
    if (runs_as(o) == RunsAs::root) {
        report.warnings.push_back(
            "--as-root: the worker runs as root. Every path it writes (the spool, the jobs' outputs, the model "
            "cache) and every engine call it makes is then root's: a job that tricks it into acting on a path the "
            "job controls acts with root's power over this machine. Without --as-root it runs as the system user " +
            user + (pool.runtime == "podman" ? " (podman rootless)" : "") + ".");
        return;
    }
    if (runs_as(o) != RunsAs::service_user) {
        return;
    }
    std::error_code ec;
    auto present = [&o, &ec](const char* p) { return fs::exists(o.paths.on_disk(p), ec); };
    if (pool.runtime == "docker") {
        report.warnings.push_back(
            "--runtime docker: the service's user " + user +
            " joins the group docker, and membership of that group is root-equivalent on this machine (the docker "
            "daemon runs, as root, whatever its clients ask, a bind mount of / included). That is docker's design; "
            "--runtime podman runs the jobs rootless, as " + user + ", and is the least-privileged choice.");
    } else if (pool.runtime == "podman") {
        if (!present("/usr/bin/newuidmap") || !present("/usr/bin/newgidmap")) {
            report.warnings.push_back("rootless podman needs newuidmap and newgidmap (Debian: apt install uidmap), "
                                      "without which the jobs' images cannot map their users");
        }
        if (!present("/usr/lib/systemd/user/dbus.socket") && !present("/lib/systemd/user/dbus.socket")) {
            report.warnings.push_back("rootless podman needs the user's D-Bus (Debian: apt install "
                                      "dbus-user-session) to give each job its memory, CPU and pid limits: without "
                                      "it, jobs with limits fail to start");
        }
    }
}

// What the service's user needs beside the files: its subordinate ids (podman) and its dirs.
Status prepare_account(const InstallOptions& o, const PoolTable& pool, const std::optional<Account>& account,
                       ServiceReport& report) {
    if (runs_as(o) == RunsAs::service_user && pool.runtime == "podman") {
        if (auto st = add_subids(o.paths, *account, report); !st) {
            return st;
        }
    }
    if (auto st = ensure_dir(o.paths, pool.work_dir, account, "the work dir", report); !st) {
        return st;
    }
    if (runs_as(o) == RunsAs::service_user && pool.work_dir != o.paths.work_dir) {
        return ensure_dir(o.paths, o.paths.work_dir, account, "the home of " + account->name, report);
    }
    return {};
}

// What install would do, in the report, with nothing done (--dry-run): each file as planned, the
// service's user, its subordinate ids and dirs when missing, and the systemctl calls.
void describe_install(const InstallOptions& o, const PoolTable& pool, const std::optional<Account>& account,
                      const InstallPlan& plan, ServiceReport& report) {
    report.dry_run = true;
    bool unit_changed = false;
    bool replaced = false;
    for (const auto& f : plan.files) {
        if (f.path == o.paths.sysusers && !account) {
            report.systemctl.push_back("systemd-sysusers " + o.paths.sysusers.string());
            report.steps.push_back({"would add", o.paths.passwd_file.string(),
                                    "the system user " + std::string(k_worker_user) + ", made by systemd-sysusers"});
        }
        const std::string what = f.what == "unchanged" ? f.what
                                 : f.what == "wrote"   ? std::string("would write")
                                                       : "would " + f.what.substr(0, f.what.size() - 1);
        report.steps.push_back({what, f.path.string(), f.note});
        unit_changed = unit_changed || (f.path == o.paths.unit && f.what != "unchanged");
        replaced = replaced || f.what == "replaced" || f.what == "updated";
    }
    const bool service_user = runs_as(o) == RunsAs::service_user;
    if (service_user && pool.runtime == "podman") {
        for (const auto& file : {o.paths.subuid, o.paths.subgid}) {
            report.steps.push_back({"would add", file.string(),
                                    std::string(k_worker_user) + "'s subordinate ids, unless it has a line there"});
        }
    }
    std::error_code ec;
    std::vector<fs::path> dirs{pool.work_dir};
    if (service_user && pool.work_dir != o.paths.work_dir) {
        dirs.push_back(o.paths.work_dir); // the user's home
    }
    for (const auto& dir : dirs) {
        if (!fs::exists(o.paths.on_disk(dir), ec)) {
            report.steps.push_back(
                {"would make", dir.string(),
                 "0700" + (service_user ? ", " + std::string(k_worker_user) + "'s" : std::string())});
        }
    }
    add_warnings(o, pool, report);
    if (unit_changed) {
        report.systemctl.push_back("daemon-reload");
    }
    if (replaced) {
        report.systemctl.push_back("try-restart " + k_worker_unit);
    }
    report.systemctl.push_back("enable --now " + k_worker_unit);
}

} // namespace

Status install_service(const InstallOptions& o, Systemctl& systemctl, ServiceReport& report) {
    PoolTable pool;
    pool.coordinator = o.coordinator;
    pool.token_file = o.paths.token;
    pool.work_dir = o.work_dir.empty() ? o.paths.work_dir : o.work_dir;
    pool.runtime = o.runtime;
    if (auto st = check_pool_table(pool); !st) {
        return st;
    }
    if (auto st = check_account_options(o, pool); !st) {
        return st;
    }
    if (auto st = check_service_binary(o.binary,
                                       runs_as(o) == RunsAs::service_user ? std::string(k_worker_user) : std::string());
        !st) {
        return st;
    }
    std::optional<Account> account = existing_account(o);
    if (runs_as(o) != RunsAs::owner) {
        if (auto st = check_work_dir(o.paths, pool.work_dir, account); !st) {
            return st;
        }
    }
    auto plan = plan_install(o, pool, account);
    if (!plan) {
        return plan.error();
    }
    if (o.dry_run) {
        describe_install(o, pool, account, *plan, report);
        return {};
    }
    bool unit_changed = false;
    bool replaced = false;
    for (auto& f : plan->files) {
        if (f.path == o.paths.unit && plan->unit_pending) { // the user exists now: its uid goes in
            auto unit = render_unit(o.paths, pool, unit_inputs(o, account));
            if (!unit) {
                return unit.error();
            }
            f.text = *unit;
            if (auto c = plan_owned(o.paths.root, true, f); !c) {
                return c.error();
            }
        }
        if (f.what != "unchanged") {
            if (auto st = write_planned(o.paths.root, f); !st) {
                return st;
            }
        }
        if (f.path == o.paths.sysusers) { // first: the token's group and the unit's User= need the user
            if (auto st = ensure_account(o.paths, systemctl, report, account); !st) {
                return st;
            }
        }
        if (f.path == o.paths.token && account) {
            if (auto st = own_token(o.paths, *account, f.mode); !st) {
                return st;
            }
        }
        unit_changed = unit_changed || (f.path == o.paths.unit && f.what != "unchanged");
        replaced = replaced || f.what == "replaced" || f.what == "updated";
        report.steps.push_back({f.what, f.path.string(), f.note});
    }
    if (auto st = prepare_account(o, pool, account, report); !st) {
        return st;
    }
    add_warnings(o, pool, report);
    if (unit_changed) {
        if (auto st = report.noted("daemon-reload", systemctl.daemon_reload()); !st) {
            return st;
        }
    }
    if (replaced) {
        if (auto st = report.noted("try-restart " + k_worker_unit, systemctl.try_restart(k_worker_unit)); !st) {
            return st;
        }
    }
    return report.noted("enable --now " + k_worker_unit, systemctl.enable_start(k_worker_unit));
}

namespace {

// The work dir the installed config names (or the default), and whether purge may remove it.
fs::path installed_work_dir(const ServicePaths& paths) {
    auto existing = read_existing(paths.on_disk(paths.config));
    if (existing && *existing) {
        auto pool = read_pool_table(**existing, paths.on_disk(paths.config).string());
        if (pool && fs::path(pool->work_dir).is_absolute()) {
            return pool->work_dir.lexically_normal();
        }
    }
    return paths.work_dir;
}

Status check_purge(const ServicePaths& paths, const fs::path& work) {
    if (!looks_like_spool(paths, work)) {
        return make_error(ErrorCode::invalid_input,
                          "`" + work.string() +
                              "` (the work dir worker.toml names) is not the default work dir and holds no "
                              "worker.json: remove it yourself if it is the spool; nothing was changed",
                          "--purge");
    }
    return {};
}

void remove_file(const ServicePaths& paths, const fs::path& p, ServiceReport& report) {
    std::error_code ec;
    const bool removed = fs::remove(paths.on_disk(p), ec);
    report.steps.push_back({removed ? "removed" : "absent", p.string(), ec ? ec.message() : ""});
}

} // namespace

Status uninstall_service(const UninstallOptions& o, Systemctl& systemctl, ServiceReport& report) {
    const ServicePaths& paths = o.paths;
    const fs::path work = installed_work_dir(paths);
    if (o.purge) {
        if (auto st = check_purge(paths, work); !st) {
            return st;
        }
    }
    std::error_code ec;
    const bool has_unit = fs::exists(fs::symlink_status(paths.on_disk(paths.unit), ec));
    if (has_unit) {
        if (auto st = report.noted("disable --now " + k_worker_unit, systemctl.stop_disable(k_worker_unit)); !st) {
            return st;
        }
    }
    remove_file(paths, paths.unit, report);
    if (has_unit) {
        if (auto st = report.noted("daemon-reload", systemctl.daemon_reload()); !st) {
            return st;
        }
    }
    remove_file(paths, paths.config, report);
    remove_file(paths, paths.token, report);
    const fs::path config_dir = paths.on_disk(paths.config).parent_path();
    if (fs::is_directory(config_dir, ec) && fs::is_empty(config_dir, ec)) {
        fs::remove(config_dir, ec);
    }
    if (paths.scope == ServiceScope::system) {
        remove_file(paths, paths.sysusers, report);
        remove_file(paths, paths.linger, report);
        if (find_account(paths)) { // as the coordinator's uninstall keeps its user
            report.steps.push_back({"kept", paths.passwd_file.string(),
                                    "the system user " + std::string(k_worker_user) +
                                        ", and its ranges in " + paths.subuid.string() + " and " +
                                        paths.subgid.string() + ": `userdel " + std::string(k_worker_user) +
                                        "` and those lines are yours to remove if this machine leaves the pool"});
        }
    }
    if (!o.purge) {
        report.steps.push_back({"kept", work.string(), "the work dir (spool and identity); --purge removes it"});
        return {};
    }
    const auto n = fs::remove_all(paths.on_disk(work), ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot remove `" + paths.on_disk(work).string() + "`: " + ec.message());
    }
    report.steps.push_back({n > 0 ? "removed" : "absent", work.string(), "the work dir"});
    return {};
}

} // namespace gpupool::worker
