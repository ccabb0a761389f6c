// `gpupool worker install/uninstall` against a temp root: the installer with a fake systemd (files,
// modes and owners, the service's user and when it is made, subordinate ids, --as-root, docker,
// idempotency, --force, --purge), then the real binary with fake systemctl and systemd-sysusers
// programs (the options, the exit codes, what systemd is asked, the warnings).
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"
#include "worker/install/installer.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_installer {

using namespace gpupool;
using namespace gpupool::worker;
namespace fs = std::filesystem;

namespace {

using Calls = std::vector<std::string>;

constexpr uid_t k_uid = 990; // the service's user in the temp root's /etc/passwd
const std::string k_sysusers = "systemd-sysusers /etc/sysusers.d/gpupool-worker.conf";
const std::string k_enable = "enable --now gpupool-worker.service";

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777U;
}

struct Owner {
    uid_t uid = 0;
    gid_t gid = 0;
    bool operator==(const Owner&) const = default;
};

Owner owner_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return {st.st_uid, st.st_gid};
}

// Appends a line to a file under the root, its directories too.
void append(const fs::path& p, const std::string& line) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::app) << line << '\n';
}

// The fake systemd: records the calls; create_system_users adds the user as systemd-sysusers would.
class FakeSystemd final : public Systemctl {
public:
    Status daemon_reload() override { return recording.daemon_reload(); }
    Status enable_start(const std::string& unit) override { return recording.enable_start(unit); }
    Status try_restart(const std::string& unit) override { return recording.try_restart(unit); }
    Status stop_disable(const std::string& unit) override { return recording.stop_disable(unit); }
    Status try_reload(const std::string& unit) override { return recording.try_reload(unit); }
    Status create_system_users(const fs::path& root, const fs::path& config) override {
        if (makes_user) {
            append(root / "etc/passwd",
                   "gpupool-worker:x:990:990:gpupool worker:/var/lib/gpupool/worker:/usr/sbin/nologin");
            append(root / "etc/group", "gpupool-worker:x:990:");
        }
        return recording.create_system_users(root, config);
    }
    const Calls& calls() const { return recording.calls; }

    RecordingSystemctl recording;
    bool makes_user = true;
};

struct Machine {
    test::TempDir dir;
    fs::path root = dir.path() / "root";
    ServicePaths paths = service_paths(ServiceScope::system, root, "").value();
    fs::path token = dir.write("enroll.token", "gpp_0123456789abcdef\n");

    InstallOptions install_options() const {
        InstallOptions o;
        o.paths = paths;
        o.coordinator = "https://pool.example.org:7443";
        o.token_source = token;
        o.binary = GPUPOOL_BINARY;
        return o;
    }
    fs::path at(const fs::path& p) const { return paths.on_disk(p); }
};

// Writes a file, its directories too, and checks that it is there.
void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    test::write_file(p, text);
    REQUIRE(test::slurp(p) == text);
}

// Whether one of the report's warnings says `what` (the binary's own path may add one: see installer.hpp).
bool warned(const ServiceReport& r, const std::string& what) {
    return std::any_of(r.warnings.begin(), r.warnings.end(),
                       [&what](const std::string& w) { return w.find(what) != std::string::npos; });
}

Status install(const InstallOptions& o, FakeSystemd& s, ServiceReport& r) {
    return install_service(o, s, r);
}

} // namespace

TEST_CASE("worker install: the service runs as gpupool-worker, made by systemd-sysusers before anything needs it",
          "[install]") {
    Machine m;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.install_options(), s, r).has_value());
    // The user first (the token's group and the unit's User= need it), the unit enabled last.
    CHECK(s.calls() == Calls{k_sysusers, "daemon-reload", k_enable});
    CHECK(r.systemctl == s.calls());
    CHECK(test::slurp(m.at(m.paths.sysusers)) == render_worker_sysusers(m.paths));
    CHECK(mode_of(m.at(m.paths.sysusers)) == 0644);
    // The token: the service reads it (its group), cannot change it (root's), nobody else reads it.
    CHECK(test::slurp(m.at(m.paths.token)) == "gpp_0123456789abcdef\n");
    CHECK(mode_of(m.at(m.paths.token)) == 0640);
    CHECK(owner_of(m.at(m.paths.token)) == Owner{0, k_uid});
    CHECK(mode_of(m.at(m.paths.config)) == 0644);
    CHECK(mode_of(m.at(m.paths.unit)) == 0644);
    // The work dir is the service's own (the worker refuses one that is not).
    CHECK(mode_of(m.at(m.paths.work_dir)) == 0700);
    CHECK(owner_of(m.at(m.paths.work_dir)) == Owner{k_uid, k_uid});
    const auto pool = read_pool_table(test::slurp(m.at(m.paths.config)), "worker.toml");
    REQUIRE(pool.has_value());
    CHECK(pool->coordinator == "https://pool.example.org:7443");
    CHECK(pool->token_file == "/etc/gpupool/enroll.token"); // the machine's path, not the temp root's
    CHECK(pool->work_dir == "/var/lib/gpupool/worker");
    CHECK(pool->runtime == "podman");
    const std::string unit = test::slurp(m.at(m.paths.unit));
    CHECK_THAT(unit, Catch::Contains("ExecStart=" + std::string(GPUPOOL_BINARY) + " worker"));
    CHECK_THAT(unit, Catch::Contains("\nUser=gpupool-worker\nGroup=gpupool-worker\n") &&
                         Catch::Contains("\nEnvironment=XDG_RUNTIME_DIR=/run/user/990\n") &&
                         Catch::Contains("\nAfter=user@990.service\n")); // the uid sysusers gave it
    CHECK(test::slurp(m.at(m.paths.linger)).empty()); // its own systemd manager stays up
    REQUIRE(r.steps.size() == 8);
    const std::vector<std::string> paths{"/etc/sysusers.d/gpupool-worker.conf", "/etc/gpupool/enroll.token",
                                         "/etc/gpupool/worker.toml", "/etc/systemd/system/gpupool-worker.service",
                                         "/var/lib/systemd/linger/gpupool-worker", "/etc/subuid", "/etc/subgid",
                                         "/var/lib/gpupool/worker"};
    for (std::size_t i = 0; i < paths.size(); ++i) {
        CHECK(r.steps[i].path == paths[i]);
        CHECK(r.steps[i].what == (i < 5 ? "wrote" : i < 7 ? "added" : "created"));
    }
    CHECK_THAT(r.steps[7].note, Catch::Contains("gpupool-worker's"));
    // Podman's own needs, when this root lacks them, are said (this temp root has neither).
    CHECK(warned(r, "apt install uidmap"));
    CHECK(warned(r, "apt install dbus-user-session"));
    CHECK_FALSE(warned(r, "--as-root"));
    CHECK_FALSE(warned(r, "cannot reach"));
}

TEST_CASE("worker install (podman): one subuid and one subgid line, clear of the ranges there, never a second one",
          "[install]") {
    Machine m;
    append(m.root / "etc/subuid", "alice:100000:65536");
    append(m.root / "etc/subgid", "alice:100000:65536");
    append(m.root / "etc/subgid", "bob:165536:65536");
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.install_options(), s, r).has_value());
    // 231072: the first start free in both files, so that the two ranges match.
    CHECK(test::slurp(m.at(m.paths.subuid)) == "alice:100000:65536\ngpupool-worker:231072:65536\n");
    CHECK(test::slurp(m.at(m.paths.subgid)) ==
          "alice:100000:65536\nbob:165536:65536\ngpupool-worker:231072:65536\n");
    CHECK(mode_of(m.at(m.paths.subuid)) == 0644);
    CHECK(r.steps[5].what == "added");
    CHECK_THAT(r.steps[5].note, Catch::Contains("gpupool-worker:231072:65536"));

    // Again, and with someone added since: nothing is added, whatever the gaps now.
    append(m.root / "etc/subuid", "carol:231072:65536");
    const std::string uids = test::slurp(m.at(m.paths.subuid));
    const std::string gids = test::slurp(m.at(m.paths.subgid));
    FakeSystemd again;
    ServiceReport r2;
    REQUIRE(install(m.install_options(), again, r2).has_value());
    CHECK(test::slurp(m.at(m.paths.subuid)) == uids);
    CHECK(test::slurp(m.at(m.paths.subgid)) == gids);
    CHECK(r2.steps[5].what == "kept");
    CHECK(r2.steps[6].what == "kept");
    CHECK(again.calls() == Calls{k_enable}); // the user exists: no systemd-sysusers either
}

TEST_CASE("worker install --as-root: no User=, no system user, and the report says why that is dangerous",
          "[install]") {
    Machine m;
    auto o = m.install_options();
    o.as_root = true;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(o, s, r).has_value());
    CHECK(s.calls() == Calls{"daemon-reload", k_enable});
    const std::string unit = test::slurp(m.at(m.paths.unit));
    CHECK_THAT(unit, !Catch::Contains("User=") && !Catch::Contains("StateDirectory") &&
                         !Catch::Contains("XDG_RUNTIME_DIR"));
    CHECK(mode_of(m.at(m.paths.token)) == 0600);
    CHECK(owner_of(m.at(m.paths.token)) == Owner{0, 0});
    CHECK(owner_of(m.at(m.paths.work_dir)) == Owner{0, 0});
    for (const auto& p : {m.paths.sysusers, m.paths.linger, m.paths.subuid, m.paths.subgid}) {
        CHECK_FALSE(fs::exists(m.at(p)));
    }
    REQUIRE(r.warnings.size() == 1);
    CHECK_THAT(r.warnings[0], Catch::Contains("--as-root: the worker runs as root") &&
                                  Catch::Contains("root's power") && Catch::Contains("gpupool-worker"));
    CHECK(r.steps.size() == 4);

    // --user runs as the owner already: --as-root means nothing there and is refused.
    auto user = o;
    user.paths = service_paths(ServiceScope::user, m.root, "/home/owner").value();
    FakeSystemd none;
    ServiceReport ur;
    auto refused = install(user, none, ur);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "--as-root");
}

TEST_CASE("worker install --runtime docker: the group docker, said to be root-equivalent, and no such group is refused",
          "[install]") {
    Machine m;
    auto o = m.install_options();
    o.runtime = "docker";
    FakeSystemd s;
    ServiceReport r;
    auto refused = install(o, s, r);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "--runtime");
    CHECK_THAT(refused.error().message, Catch::Contains("no group `docker`"));
    CHECK(s.calls().empty());
    CHECK_FALSE(fs::exists(m.root / "etc/gpupool"));

    append(m.root / "etc/group", "docker:x:998:");
    REQUIRE(install(o, s, r).has_value());
    CHECK(s.calls() == Calls{k_sysusers, "daemon-reload", k_enable});
    CHECK_THAT(test::slurp(m.at(m.paths.unit)),
               Catch::Contains("\nUser=gpupool-worker\n") && Catch::Contains("\nSupplementaryGroups=docker\n"));
    CHECK(warned(r, "membership of that group is root-equivalent on this machine"));
    CHECK(warned(r, "--runtime podman runs the jobs rootless"));
    CHECK_FALSE(warned(r, "uidmap"));
    for (const auto& p : {m.paths.linger, m.paths.subuid, m.paths.subgid}) { // podman's alone
        CHECK_FALSE(fs::exists(m.at(p)));
    }
}

TEST_CASE("worker install: a spool left by a root install becomes gpupool-worker's whole, other files are refused",
          "[install]") {
    Machine m;
    put(m.at(m.paths.work_dir / "worker.json"), "{}");
    put(m.at(m.paths.work_dir / "attempts/7/log"), "spooled");
    const fs::path outside = m.dir.write("outside", "not the spool's"); // a link out: the link changes, not this
    fs::create_symlink(outside, m.at(m.paths.work_dir / "attempts/7/link"));
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.install_options(), s, r).has_value());
    for (const char* p : {"", "worker.json", "attempts", "attempts/7", "attempts/7/log", "attempts/7/link"}) {
        INFO(p);
        CHECK(owner_of(m.at(m.paths.work_dir / p)) == Owner{k_uid, k_uid});
    }
    CHECK(owner_of(outside) == Owner{0, 0});
    CHECK(r.steps.back().what == "kept");
    CHECK_THAT(r.steps.back().note, Catch::Contains("now gpupool-worker's"));

    // A directory that is no spool (the owner's files, no worker.json) is not given away.
    Machine other;
    put(other.at("/srv/data/thesis.tex"), "precious");
    auto o = other.install_options();
    o.work_dir = "/srv/data";
    FakeSystemd s2;
    ServiceReport r2;
    auto refused = install(o, s2, r2);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "--work-dir");
    CHECK(s2.calls().empty());
    CHECK_FALSE(fs::exists(other.at(other.paths.unit)));
    CHECK(owner_of(other.at("/srv/data/thesis.tex")) == Owner{0, 0});

    // An empty one is, and the user's home (the default work dir) is made beside it.
    fs::remove(other.at("/srv/data/thesis.tex"));
    REQUIRE(install(o, s2, r2).has_value());
    CHECK(owner_of(other.at("/srv/data")) == Owner{k_uid, k_uid});
    CHECK(owner_of(other.at(other.paths.work_dir)) == Owner{k_uid, k_uid});
}

TEST_CASE("worker install: a binary the service's user cannot reach is refused before anything is written",
          "[install]") {
    Machine m;
    const fs::path closed = fs::path(GPUPOOL_BINARY).parent_path() / ("closed-" + std::to_string(::getpid()));
    fs::create_directories(closed);
    fs::create_symlink(GPUPOOL_BINARY, closed / "gpupool");
    fs::permissions(closed, fs::perms::owner_all); // 0700, like /root
    auto o = m.install_options();
    o.binary = closed / "gpupool";
    FakeSystemd s;
    ServiceReport r;
    auto st = install(o, s, r);
    std::error_code ec;
    fs::remove_all(closed, ec);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message,
               Catch::Contains("gpupool-worker cannot reach: " + closed.string() + " is closed to other users"));
    CHECK(s.calls().empty());
    CHECK_FALSE(fs::exists(m.root));
    // Under /tmp the service never sees it (PrivateTmp), whoever it runs as.
    o.binary = "/tmp/gpupool";
    o.as_root = true;
    st = install(o, s, r);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains("under /tmp"));
    CHECK_FALSE(fs::exists(m.root));
}

// Every file under `dir` with its size and mode, to tell that nothing changed.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
    std::map<std::string, std::string> out;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const auto st = fs::symlink_status(it->path());
        out[it->path().string()] = std::to_string(static_cast<int>(st.permissions())) +
                                   (fs::is_regular_file(st) ? ":" + test::slurp(it->path()) : std::string());
    }
    return out;
}

TEST_CASE("worker install --dry-run: every file, user and call install would make is reported, and nothing changes",
          "[install]") {
    Machine m;
    put(m.at(m.paths.config), "# mine\n[share]\nmax_jobs = 1\n");
    const auto before = snapshot(m.root);
    auto o = m.install_options();
    o.dry_run = true;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(o, s, r).has_value());
    CHECK(r.dry_run);
    CHECK(s.calls().empty()); // no systemctl, no systemd-sysusers
    CHECK(snapshot(m.root) == before);
    CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
    std::map<std::string, std::string> steps;
    for (const auto& step : r.steps) {
        steps[step.path] = step.what;
    }
    CHECK(steps["/etc/passwd"] == "would add"); // the user gpupool-worker, by systemd-sysusers
    CHECK(steps["/etc/sysusers.d/gpupool-worker.conf"] == "would write");
    CHECK(steps["/etc/gpupool/enroll.token"] == "would write");
    CHECK(steps["/etc/gpupool/worker.toml"] == "would update"); // the owner's file, [pool] added
    CHECK(steps["/etc/systemd/system/gpupool-worker.service"] == "would write");
    CHECK(steps["/etc/subuid"] == "would add");
    CHECK(steps["/etc/subgid"] == "would add");
    CHECK(steps["/var/lib/gpupool/worker"] == "would make");
    CHECK(r.systemctl == Calls{k_sysusers, "daemon-reload", "try-restart gpupool-worker.service", k_enable});
    // Then the real install does what the dry run said.
    o.dry_run = false;
    ServiceReport real;
    REQUIRE(install(o, s, real).has_value());
    CHECK(s.calls() == Calls{k_sysusers, "daemon-reload", "try-restart gpupool-worker.service", k_enable});
}

TEST_CASE("worker install: a worker.toml the owner wrote is kept as written, [pool] added, without --force",
          "[install]") {
    Machine m;
    const std::string mine = "# my terms: evenings only\n[share]\nmax_jobs = 1\nteams = [\"fellows\"]\n\n"
                             "[[share.window]]\ndays = \"mon-fri\"\nfrom = \"19:00\"\nto = \"08:00\"\n";
    put(m.at(m.paths.config), mine);
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.install_options(), s, r).has_value());
    const std::string now = test::slurp(m.at(m.paths.config));
    CHECK(now.starts_with(mine)); // every byte the owner wrote, comments included
    CHECK(read_pool_table(now, "w").value().coordinator == "https://pool.example.org:7443");
    // Installing again changes nothing; a [pool] with another coordinator still needs --force.
    ServiceReport again;
    REQUIRE(install(m.install_options(), s, again).has_value());
    CHECK(test::slurp(m.at(m.paths.config)) == now);
    auto other = m.install_options();
    other.coordinator = "https://other.example.org";
    ServiceReport refused;
    auto st = install(other, s, refused);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains("--force"));
    CHECK(test::slurp(m.at(m.paths.config)) == now);
    // An owner's [pool] with other keys of its own (a name): filled in, those kept.
    Machine n;
    put(n.at(n.paths.config), "[pool]\nname = \"lab-box\"\n\n[share]\nmax_jobs = 2\n");
    ServiceReport filled;
    REQUIRE(install(n.install_options(), s, filled).has_value());
    const std::string merged = test::slurp(n.at(n.paths.config));
    CHECK_THAT(merged, Catch::Contains("lab-box") && Catch::Contains("max_jobs = 2") &&
                           Catch::Contains("pool.example.org:7443"));
}

TEST_CASE("worker install: the real systemd-sysusers makes gpupool-worker under the root, and the unit names its uid",
          "[install]") {
    if (boost::process::search_path("systemd-sysusers").empty() || ::geteuid() != 0) {
        WARN("SKIPPED: needs root and systemd-sysusers (package systemd) to make a user under a temp root");
        return;
    }
    Machine m;
    SystemctlCommand real("true", false); // systemctl itself is not run here: `true` stands in
    ServiceReport r;
    REQUIRE(install_service(m.install_options(), real, r).has_value());
    CHECK(r.systemctl.front() == k_sysusers);
    const std::string passwd = test::slurp(m.root / "etc/passwd");
    INFO(passwd);
    const auto line = passwd.find("gpupool-worker:x:");
    REQUIRE(line != std::string::npos);
    const auto uid = static_cast<uid_t>(std::stoul(passwd.substr(line + std::string("gpupool-worker:x:").size())));
    CHECK_THAT(passwd, Catch::Contains(":/var/lib/gpupool/worker:"));
    CHECK_THAT(test::slurp(m.at(m.paths.unit)), Catch::Contains("\nAfter=user@" + std::to_string(uid) + ".service\n"));
    CHECK(owner_of(m.at(m.paths.work_dir)).uid == uid);
    CHECK(owner_of(m.at(m.paths.token)).gid == owner_of(m.at(m.paths.work_dir)).gid);
}

TEST_CASE("worker install: when systemd-sysusers makes no user, nothing that needs it is written", "[install]") {
    Machine m;
    FakeSystemd s;
    s.makes_user = false;
    ServiceReport r;
    auto st = install(m.install_options(), s, r);
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().code == ErrorCode::io);
    CHECK_THAT(st.error().message, Catch::Contains("gpupool-worker"));
    CHECK(s.calls() == Calls{k_sysusers});
    CHECK_FALSE(fs::exists(m.at(m.paths.token)));
    CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
}

TEST_CASE("worker install: the same install twice changes nothing and only enables again", "[install]") {
    Machine m;
    FakeSystemd first;
    ServiceReport r1;
    REQUIRE(install(m.install_options(), first, r1).has_value());
    const auto unit_time = fs::last_write_time(m.at(m.paths.unit));
    FakeSystemd again;
    ServiceReport r2;
    REQUIRE(install(m.install_options(), again, r2).has_value());
    CHECK(again.calls() == Calls{k_enable});
    REQUIRE(r2.steps.size() == 8);
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(r2.steps[i].what == "unchanged");
    }
    for (std::size_t i = 5; i < 8; ++i) {
        CHECK(r2.steps[i].what == "kept");
    }
    CHECK(fs::last_write_time(m.at(m.paths.unit)) == unit_time);
}

TEST_CASE("worker install: different settings are refused without --force, replaced with it", "[install]") {
    Machine m;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.install_options(), s, r).has_value());
    // The owner added terms of their own to worker.toml.
    const std::string owners = test::slurp(m.at(m.paths.config)) + "\n[share]\nmax_jobs = 2\n";
    put(m.at(m.paths.config), owners);
    const std::string unit_before = test::slurp(m.at(m.paths.unit));

    auto moved = m.install_options();
    moved.coordinator = "https://new.example.org";
    moved.runtime = "docker";
    append(m.root / "etc/group", "docker:x:998:");
    FakeSystemd refused_calls;
    ServiceReport refused_report;
    auto refused = install(moved, refused_calls, refused_report);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == ErrorCode::conflict);
    CHECK(refused.error().field == "--force");
    CHECK_THAT(refused.error().message,
               Catch::Contains("/etc/gpupool/worker.toml: coordinator is `https://pool.example.org:7443`, install would "
                               "write `https://new.example.org`") &&
                   Catch::Contains("runtime is `podman`") &&
                   Catch::Contains("/etc/systemd/system/gpupool-worker.service: differs"));
    CHECK(refused_calls.calls().empty());
    CHECK(test::slurp(m.at(m.paths.config)) == owners); // nothing was changed
    CHECK(test::slurp(m.at(m.paths.unit)) == unit_before);

    moved.force = true;
    FakeSystemd forced;
    ServiceReport forced_report;
    REQUIRE(install(moved, forced, forced_report).has_value());
    CHECK(forced.calls() == Calls{"daemon-reload", "try-restart gpupool-worker.service", k_enable});
    CHECK_THAT(test::slurp(m.at(m.paths.unit)), Catch::Contains("\nSupplementaryGroups=docker\n"));
    const std::string config = test::slurp(m.at(m.paths.config));
    CHECK(read_pool_table(config, "w").value().coordinator == "https://new.example.org");
    CHECK_THAT(config, Catch::Contains("[share]") && Catch::Contains("max_jobs = 2")); // the owner's terms stay
    CHECK_THAT(config, Catch::Contains("runtime = 'docker'")); // what the unit's --config reads
    CHECK(mode_of(m.at(m.paths.config)) == 0644);
}

TEST_CASE("worker install: a token file that is not one token is refused before anything is written", "[install]") {
    Machine m;
    auto o = m.install_options();
    o.token_source = m.dir.write("two.token", "gpp_a gpp_b\n");
    FakeSystemd s;
    ServiceReport r;
    auto st = install(o, s, r);
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().field == "--token-file");
    o.token_source = m.dir.path() / "missing.token";
    CHECK_FALSE(install(o, s, r).has_value());
    CHECK_FALSE(fs::exists(m.root));
    CHECK(s.calls().empty());
}

TEST_CASE("worker install: when systemctl fails the files stay and the report says how far it got", "[install]") {
    Machine m;
    FakeSystemd s;
    s.recording.fail_on = "enable --now gpupool-worker.service";
    ServiceReport r;
    auto st = install(m.install_options(), s, r);
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().code == ErrorCode::io);
    CHECK(fs::exists(m.at(m.paths.unit)));
    CHECK(r.steps.size() == 8);
    CHECK(r.systemctl == Calls{k_sysusers, "daemon-reload", k_enable});
}

TEST_CASE("worker uninstall: stops (drains) and removes what install wrote, keeps the user and the work dir unless "
          "--purge",
          "[install]") {
    Machine m;
    auto o = m.install_options();
    o.work_dir = "/srv/gpupool-spool";
    {
        FakeSystemd s;
        ServiceReport r;
        REQUIRE(install(o, s, r).has_value());
    }
    put(m.at("/srv/gpupool-spool/worker.json"), "{}");
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(uninstall_service({m.paths, false}, s, r).has_value());
    CHECK(s.calls() == Calls{"disable --now gpupool-worker.service", "daemon-reload"});
    CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
    CHECK_FALSE(fs::exists(m.at(m.paths.config)));
    CHECK_FALSE(fs::exists(m.at(m.paths.token)));
    CHECK_FALSE(fs::exists(m.at("/etc/gpupool"))); // emptied, so removed
    CHECK_FALSE(fs::exists(m.at(m.paths.sysusers)));
    CHECK_FALSE(fs::exists(m.at(m.paths.linger)));
    CHECK(fs::exists(m.at("/srv/gpupool-spool/worker.json")));
    CHECK(r.steps.back().what == "kept");
    CHECK(r.steps.back().path == "/srv/gpupool-spool"); // the work dir worker.toml named
    // The user stays, with its subordinate ids (as the coordinator's uninstall keeps its user), and
    // the report says so.
    CHECK_THAT(test::slurp(m.at(m.paths.passwd_file)), Catch::StartsWith("gpupool-worker:x:990:"));
    CHECK(test::slurp(m.at(m.paths.subuid)) == "gpupool-worker:100000:65536\n");
    const auto& user = r.steps[r.steps.size() - 2];
    CHECK(user.what == "kept");
    CHECK(user.path == "/etc/passwd");
    CHECK_THAT(user.note, Catch::Contains("gpupool-worker") && Catch::Contains("/etc/subuid") &&
                              Catch::Contains("userdel"));

    // Nothing installed any more: uninstall again asks systemd nothing and succeeds.
    FakeSystemd nothing;
    ServiceReport r2;
    REQUIRE(uninstall_service({m.paths, false}, nothing, r2).has_value());
    CHECK(nothing.calls().empty());
}

TEST_CASE("worker uninstall --purge removes the work dir, but only one that looks like a spool", "[install]") {
    Machine m;
    {
        FakeSystemd s;
        ServiceReport r;
        REQUIRE(install(m.install_options(), s, r).has_value());
    }
    put(m.at(m.paths.work_dir / "attempts/7/log"), "spooled");
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(uninstall_service({m.paths, true}, s, r).has_value());
    CHECK_FALSE(fs::exists(m.at(m.paths.work_dir)));
    CHECK(fs::exists(m.at("/var/lib/gpupool"))); // only the work dir itself

    // A worker.toml that names some other directory (hand-edited): --purge refuses, changes nothing.
    Machine other;
    auto o = other.install_options();
    o.work_dir = "/home/owner/data";
    {
        FakeSystemd s2;
        ServiceReport r2;
        REQUIRE(install(o, s2, r2).has_value());
    }
    put(other.at("/home/owner/data/thesis.tex"), "precious");
    FakeSystemd s3;
    ServiceReport r3;
    auto refused = uninstall_service({other.paths, true}, s3, r3);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "--purge");
    CHECK(s3.calls().empty());
    CHECK(fs::exists(other.at(other.paths.unit)));
    CHECK(test::slurp(other.at("/home/owner/data/thesis.tex")) == "precious");
}

TEST_CASE("worker uninstall: when the service does not stop, nothing is removed", "[install]") {
    Machine m;
    {
        FakeSystemd s;
        ServiceReport r;
        REQUIRE(install(m.install_options(), s, r).has_value());
    }
    FakeSystemd s;
    s.recording.fail_on = "disable --now gpupool-worker.service";
    ServiceReport r;
    REQUIRE_FALSE(uninstall_service({m.paths, true}, s, r).has_value());
    CHECK(fs::exists(m.at(m.paths.unit)));
    CHECK(fs::exists(m.at(m.paths.config)));
    CHECK(fs::exists(m.at(m.paths.work_dir)));
}

TEST_CASE("worker install/uninstall: the real binary under a temp root with fake systemctl and sysusers programs",
          "[install]") {
    test::TempDir dir;
    const auto calls = dir.path() / "calls";
    const auto fake = dir.write("systemctl", "#!/bin/sh\necho \"$*\" >> '" + calls.string() + "'\n");
    // Like systemd-sysusers --root=ROOT CONFIG: the user appears in ROOT/etc/passwd and /etc/group.
    const auto sysusers = dir.write(
        "sysusers", "#!/bin/sh\necho \"sysusers $*\" >> '" + calls.string() +
                        "'\nroot=${1#--root=}\nmkdir -p \"$root/etc\"\n"
                        "echo 'gpupool-worker:x:990:990::/var/lib/gpupool/worker:/usr/sbin/nologin' >> "
                        "\"$root/etc/passwd\"\n"
                        "echo 'gpupool-worker:x:990:' >> \"$root/etc/group\"\n");
    fs::permissions(fake, fs::perms::owner_all);
    fs::permissions(sysusers, fs::perms::owner_all);
    test::svc::Pool pool; // a real coordinator on loopback: install asks it whether the token enrolls
    const std::string url = pool.server.url;
    const auto token = dir.write("enroll.token", pool.enroll + "\n");
    const auto root = dir.path() / "root";
    const std::vector<std::string> hidden{"--root", root.string(), "--systemctl", fake.string(), "--sysusers",
                                          sysusers.string()};
    auto with = [&hidden](std::vector<std::string> args) {
        args.insert(args.end(), hidden.begin(), hidden.end());
        return args;
    };
    const std::string sysusers_call =
        "sysusers --root=" + root.string() + " " + (root / "etc/sysusers.d/gpupool-worker.conf").string() + "\n";

    auto r = test::run_gpupool(with({"worker", "install", "--coordinator", url, "--token-file", token.string()}));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("wrote     /etc/gpupool/enroll.token") &&
                          Catch::Contains("ran       systemctl enable --now gpupool-worker.service") &&
                          Catch::Contains("coordinator = '" + url + "'"));
    CHECK_THAT(r.out, !Catch::Contains("would offer")); // `worker` itself did not run
    CHECK_THAT(r.out, Catch::Contains("runs as the system user gpupool-worker, not root") &&
                          Catch::Contains("`sudo gpupool worker status --config "
                                          "/etc/gpupool/worker.toml"));
    CHECK(test::slurp(calls) == sysusers_call + "daemon-reload\nenable --now gpupool-worker.service\n");
    const std::string unit = test::slurp(root / "etc/systemd/system/gpupool-worker.service");
    CHECK_THAT(unit, Catch::Contains("\nUser=gpupool-worker\n") && Catch::Contains("/run/user/990"));
    CHECK(mode_of(root / "etc/gpupool/enroll.token") == 0640);
    CHECK(owner_of(root / "var/lib/gpupool/worker") == Owner{k_uid, k_uid});
    CHECK_THAT(test::slurp(root / "etc/subuid"), Catch::Contains("gpupool-worker:100000:65536"));

    auto refused = test::run_gpupool(with({"worker", "install", "--coordinator", url, "--token-file", token.string(),
                                           "--work-dir", (dir.path() / "elsewhere").string()}));
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("--force"));
    CHECK_THAT(test::slurp(root / "etc/gpupool/worker.toml"), Catch::Contains(url));

    auto missing = test::run_gpupool(with({"worker", "install", "--token-file", token.string()}));
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.err, Catch::Contains("--coordinator"));
    auto process = test::run_gpupool(
        with({"worker", "install", "--coordinator", url, "--token-file", token.string(), "--runtime", "process"}));
    CHECK(process.exit_code == 2);

    // --as-root: refused as a change without --force; with it, the warning on stderr and in --json.
    auto as_root = test::run_gpupool(with(
        {"--json", "worker", "install", "--coordinator", url, "--token-file", token.string(), "--as-root", "--force"}));
    INFO(as_root.out << as_root.err);
    REQUIRE(as_root.exit_code == 0);
    const auto j = nlohmann::json::parse(as_root.out);
    REQUIRE(j["warnings"].size() == 1);
    CHECK_THAT(j["warnings"][0].get<std::string>(), Catch::Contains("--as-root: the worker runs as root"));
    CHECK_THAT(test::slurp(root / "etc/systemd/system/gpupool-worker.service"), !Catch::Contains("User="));
    CHECK(mode_of(root / "etc/gpupool/enroll.token") == 0600);
    auto again = test::run_gpupool(
        with({"worker", "install", "--coordinator", url, "--token-file", token.string(), "--as-root"}));
    CHECK(again.exit_code == 0);
    CHECK_THAT(again.err, Catch::Contains("warning: --as-root: the worker runs as root"));
    CHECK_THAT(again.out, Catch::Contains("It runs as root (--as-root)"));

    fs::remove(calls);
    auto gone = test::run_gpupool(with({"worker", "uninstall", "--purge"}));
    INFO(gone.out << gone.err);
    CHECK(gone.exit_code == 0);
    CHECK_THAT(gone.err, Catch::Contains("drains first"));
    CHECK_THAT(gone.out, Catch::Contains("removed   /etc/sysusers.d/gpupool-worker.conf") &&
                             Catch::Contains("kept      /etc/passwd  (the system user gpupool-worker"));
    CHECK(test::slurp(calls) == "disable --now gpupool-worker.service\ndaemon-reload\n");
    CHECK_FALSE(fs::exists(root / "etc/gpupool"));
    CHECK_FALSE(fs::exists(root / "var/lib/gpupool/worker"));

    // --user: the owner's own paths under HOME (this process's, below the temp root), systemctl --user.
    fs::remove(calls);
    const auto user =
        test::run_gpupool(with({"worker", "install", "--user", "--coordinator", url, "--token-file", token.string()}));
    INFO(user.out << user.err);
    CHECK(user.exit_code == 0);
    CHECK_THAT(user.out, Catch::Contains("/.config/systemd/user/gpupool-worker.service") &&
                             Catch::Contains("loginctl enable-linger"));
    CHECK(test::slurp(calls) == "--user daemon-reload\n--user enable --now gpupool-worker.service\n");
}

TEST_CASE("worker install: a worker.toml that does not parse is refused, and replaced whole with --force",
          "[install]") {
    Machine m;
    put(m.at(m.paths.config), "[pool\ncoordinator = 1\n");
    FakeSystemd s;
    ServiceReport r;
    auto refused = install(m.install_options(), s, r);
    REQUIRE_FALSE(refused.has_value());
    CHECK_THAT(refused.error().message, Catch::Contains("/etc/gpupool/worker.toml: does not parse") &&
                                            Catch::Contains("worker.toml:1"));
    CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
    auto forced = m.install_options();
    forced.force = true;
    REQUIRE(install(forced, s, r).has_value());
    CHECK(read_pool_table(test::slurp(m.at(m.paths.config)), "w").value().coordinator == "https://pool.example.org:7443");
    CHECK(r.steps[2].path == "/etc/gpupool/worker.toml");
    CHECK(r.steps[2].what == "replaced");
    CHECK(r.steps[2].note == "the old file did not parse: replaced whole");
}

TEST_CASE("worker install CLI: --dry-run prints the plan and changes nothing, and an unreachable coordinator or a refused "
          "token stops install before anything",
          "[install]") {
    test::TempDir dir;
    const auto calls = dir.path() / "calls";
    const auto fake = dir.write("systemctl", "#!/bin/sh\necho \"$*\" >> '" + calls.string() + "'\n");
    fs::permissions(fake, fs::perms::owner_all);
    const auto root = dir.path() / "root";
    const std::vector<std::string> hidden{"--root",      root.string(), "--systemctl",
                                          fake.string(), "--sysusers",  fake.string()};
    auto with = [&hidden](std::vector<std::string> args) {
        args.insert(args.end(), hidden.begin(), hidden.end());
        return args;
    };
    test::svc::Pool pool;
    const auto token = dir.write("enroll.token", pool.enroll + "\n");
    auto dry = test::run_gpupool(
        with({"worker", "install", "--dry-run", "--coordinator", pool.server.url, "--token-file", token.string()}));
    INFO(dry.out << dry.err);
    REQUIRE(dry.exit_code == 0);
    CHECK_THAT(dry.out, Catch::Contains("would write /etc/gpupool/enroll.token") &&
                            Catch::Contains("would write /etc/gpupool/worker.toml") &&
                            Catch::Contains("would write /etc/systemd/system/gpupool-worker.service") &&
                            Catch::Contains("would add /etc/passwd") &&
                            Catch::Contains("would run systemd-sysusers /etc/sysusers.d/gpupool-worker.conf") &&
                            Catch::Contains("would run systemctl enable --now gpupool-worker.service") &&
                            Catch::Contains("Nothing was changed (--dry-run)"));
    CHECK_FALSE(fs::exists(root));
    CHECK_FALSE(fs::exists(calls));
    auto json_dry = test::run_gpupool(with({"--json", "worker", "install", "--dry-run", "--coordinator",
                                            pool.server.url, "--token-file", token.string()}));
    REQUIRE(json_dry.exit_code == 0);
    CHECK(nlohmann::json::parse(json_dry.out)["dry_run"] == true);

    const auto wrong = dir.write("wrong.token", "gpp_0123456789abcdef0123456789abcdef\n");
    for (bool dry_run : {true, false}) {
        std::vector<std::string> args{"worker",        "install",      "--coordinator",
                                      pool.server.url, "--token-file", wrong.string()};
        if (dry_run) {
            args.push_back("--dry-run");
        }
        auto refused = test::run_gpupool(with(args));
        CHECK(refused.exit_code == 1);
        CHECK_THAT(refused.err, Catch::Contains("refuses the enrollment token") && Catch::Contains("--token-file"));
        args[3] = "http://127.0.0.1:1";
        args[5] = token.string();
        auto unreachable = test::run_gpupool(with(args));
        CHECK(unreachable.exit_code == 1);
        CHECK_THAT(unreachable.err, Catch::Contains("cannot be reached") && Catch::Contains("127.0.0.1:1"));
    }
    CHECK_FALSE(fs::exists(root));
    CHECK_FALSE(fs::exists(calls));
}

} // namespace test_installer
} // namespace
