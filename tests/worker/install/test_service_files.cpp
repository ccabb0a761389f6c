// The text `gpupool worker install` writes: the unit (rules, quoting, the service's user and what each
// engine adds, byte for byte; systemd-analyze's verdict), the user's sysusers.d entry, its
// subordinate id lines, and worker.toml's [pool] table (round trip, merging into an owner's file).
#include "tests/support.hpp"
#include "worker/install/service_files.hpp"

#include <boost/process.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_service_files {

using namespace gpupool;
using namespace gpupool::worker;
namespace fs = std::filesystem;

namespace {

PoolTable pool_at(const ServicePaths& p) {
    PoolTable pool;
    pool.coordinator = "https://pool.example.org:7443";
    pool.token_file = p.token;
    pool.work_dir = p.work_dir;
    return pool;
}

ServicePaths system_paths() {
    auto p = service_paths(ServiceScope::system, "/", "");
    REQUIRE(p.has_value());
    return *p;
}

ServicePaths user_paths() {
    auto p = service_paths(ServiceScope::user, "/", "/home/owner");
    REQUIRE(p.has_value());
    return *p;
}

constexpr std::uint32_t k_uid = 990; // the service user's uid in these tests

// The unit as install writes it for this scope: system-wide, run by the service's user.
std::string unit_for(const ServicePaths& p, const PoolTable& pool, const fs::path& binary = GPUPOOL_BINARY,
                     bool as_root = false) {
    auto u = render_unit(p, pool, UnitInputs{binary, std::chrono::seconds(300), as_root, k_uid});
    REQUIRE(u.has_value());
    return *u;
}

PoolTable with_runtime(PoolTable pool, const std::string& runtime) {
    pool.runtime = runtime;
    return pool;
}

// The system unit's text around what depends on the account and the engine.
std::string unit_head() {
    return "# Written by `gpupool worker install`; `gpupool worker uninstall` removes it.\n"
           "# Local changes belong in a drop-in: systemctl edit gpupool-worker\n"
           "[Unit]\n"
           "Description=gpupool worker: shares this machine with the pool at https://pool.example.org:7443\n"
           "Wants=network-online.target\n"
           "After=network-online.target\n";
}

std::string unit_tail() {
    return "ExecStart=" + std::string(GPUPOOL_BINARY) +
           " worker --share --config /etc/gpupool/worker.toml\n"
           "ExecReload=/bin/kill -HUP $MAINPID\n"
           "Restart=on-failure\n"
           "RestartSec=10s\n"
           "# Exit 2 is a usage or config error: a restart would only repeat it.\n"
           "RestartPreventExitStatus=2\n"
           "# Stopping drains: SIGTERM reaches the worker alone, which lets running jobs finish for its\n"
           "# drain grace (300 s) and hands back the rest; a minute later systemd kills what is left.\n"
           "KillMode=mixed\n"
           "KillSignal=SIGTERM\n"
           "TimeoutStopSec=360\n"
           "# A job killed for memory is that job's failure, not the service's.\n"
           "OOMPolicy=continue\n"
           "# Hardening: capabilities neither the worker nor its container engine uses. docs/worker.md\n"
           "# (Running as a service) says which sandboxing options are left out, and why.\n"
           "CapabilityBoundingSet=~CAP_SYS_BOOT CAP_SYS_TIME CAP_WAKE_ALARM\n"
           "\n"
           "[Install]\n"
           "WantedBy=multi-user.target\n";
}

const std::string k_user_lines =
    "# Not root: a system user of its own (/etc/sysusers.d/gpupool-worker.conf). A job that tricks\n"
    "# the worker into acting on a path it controls gets this user's rights, not root's.\n"
    "User=gpupool-worker\n"
    "Group=gpupool-worker\n"
    "# The default work dir, and the user's home (rootless podman keeps its images under it).\n"
    "StateDirectory=gpupool/worker\n"
    "StateDirectoryMode=0700\n";

} // namespace

TEST_CASE("service files: where things go, system-wide and per user, under a root prefix", "[install]") {
    const auto s = system_paths();
    CHECK(s.config == "/etc/gpupool/worker.toml");
    CHECK(s.token == "/etc/gpupool/enroll.token");
    CHECK(s.unit == "/etc/systemd/system/gpupool-worker.service");
    CHECK(s.work_dir == "/var/lib/gpupool/worker");
    const auto u = user_paths();
    CHECK(u.config == "/home/owner/.config/gpupool/worker.toml");
    CHECK(u.unit == "/home/owner/.config/systemd/user/gpupool-worker.service");
    CHECK(u.work_dir == "/home/owner/.local/share/gpupool/worker");
    auto rooted = service_paths(ServiceScope::system, "/tmp/r", "");
    REQUIRE(rooted.has_value());
    CHECK(rooted->on_disk(rooted->config) == "/tmp/r/etc/gpupool/worker.toml");
    CHECK(rooted->config == "/etc/gpupool/worker.toml"); // what the files say
    auto no_home = service_paths(ServiceScope::user, "/", "");
    REQUIRE_FALSE(no_home.has_value());
    CHECK(no_home.error().field == "--user");
    CHECK_FALSE(service_paths(ServiceScope::user, "/", "relative/home").has_value());
}

TEST_CASE("service files: the system unit starts the worker, restarts on failure and stops with a drain",
          "[install]") {
    const auto p = system_paths();
    const std::string unit = unit_for(p, pool_at(p));
    INFO(unit);
    CHECK_THAT(unit, Catch::Contains("\nExecStart=" + std::string(GPUPOOL_BINARY) +
                                     " worker --share --config /etc/gpupool/worker.toml\n"));
    for (const char* line : {"\nRestart=on-failure\n", "\nRestartPreventExitStatus=2\n", "\nAfter=network-online.target\n",
                             "\nWants=network-online.target\n", "\nKillMode=mixed\n", "\nKillSignal=SIGTERM\n",
                             "\nOOMPolicy=continue\n", "\nExecReload=/bin/kill -HUP $MAINPID\n", "\nWantedBy=multi-user.target\n",
                             "\nCapabilityBoundingSet=~CAP_SYS_BOOT CAP_SYS_TIME CAP_WAKE_ALARM\n"}) {
        CHECK_THAT(unit, Catch::Contains(line));
    }
    // The stop waits longer than the worker's drain grace (300 s here).
    CHECK_THAT(unit, Catch::Contains("\nTimeoutStopSec=360\n"));
    // Nothing that would put podman in a private mount namespace or under a seccomp filter.
    for (const char* absent : {"ProtectSystem", "PrivateTmp", "ProtectHome", "NoNewPrivileges", "SystemCallFilter",
                               "PrivateDevices", "DevicePolicy", "ProtectHostname"}) {
        CHECK_THAT(unit, !Catch::Contains(absent));
    }
}

TEST_CASE("service files: the system unit runs the worker as gpupool-worker, rootless podman through its user manager",
          "[install]") {
    const auto p = system_paths();
    CHECK(unit_for(p, pool_at(p)) ==
          unit_head() +
              "# Rootless podman makes each job's cgroup (its memory, CPU and pid limits) through the\n"
              "# service user's own systemd manager; lingering keeps it running.\n"
              "Wants=user@990.service\n"
              "After=user@990.service\n"
              "\n[Service]\nType=simple\n" +
              k_user_lines +
              "# Where rootless podman finds that manager: its runtime directory and its D-Bus.\n"
              "Environment=XDG_RUNTIME_DIR=/run/user/990\n"
              "Environment=DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/990/bus\n" +
              unit_tail());
    // Without the user's uid there is no podman unit to write.
    auto no_uid =
        render_unit(p, pool_at(p), UnitInputs{GPUPOOL_BINARY, std::chrono::seconds(300), false, std::nullopt});
    REQUIRE_FALSE(no_uid.has_value());
    CHECK_THAT(no_uid.error().message, Catch::Contains("gpupool-worker"));
}

TEST_CASE("service files: with docker the service's user joins the group docker, which the unit calls "
          "root-equivalent",
          "[install]") {
    const auto p = system_paths();
    CHECK(unit_for(p, with_runtime(pool_at(p), "docker")) ==
          unit_head() + "\n[Service]\nType=simple\n" + k_user_lines +
              "# The docker daemon's socket. Membership of the group docker is root-equivalent on this\n"
              "# machine (the daemon runs what it is asked, as root); rootless podman is the\n"
              "# least-privileged engine.\n"
              "SupplementaryGroups=docker\n" +
              unit_tail());
}

TEST_CASE("service files: the process runtime adds nothing to the user, and --as-root writes the unit with no User=",
          "[install]") {
    const auto p = system_paths();
    CHECK(unit_for(p, with_runtime(pool_at(p), "process")) ==
          unit_head() + "\n[Service]\nType=simple\n" + k_user_lines + unit_tail());
    // --as-root: the unit as it was before there was a service user, for every engine.
    const std::string as_root = unit_head() + "\n[Service]\nType=simple\n" + unit_tail();
    for (const char* runtime : {"podman", "docker", "process"}) {
        INFO(runtime);
        const auto u = render_unit(p, with_runtime(pool_at(p), runtime),
                                   UnitInputs{GPUPOOL_BINARY, std::chrono::seconds(300), true, std::nullopt});
        REQUIRE(u.has_value());
        CHECK(*u == as_root);
    }
}

TEST_CASE("service files: the sysusers.d entry makes gpupool-worker with its home in the default work dir",
          "[install]") {
    const auto p = system_paths();
    CHECK(p.sysusers == "/etc/sysusers.d/gpupool-worker.conf");
    CHECK(p.subuid == "/etc/subuid");
    CHECK(p.subgid == "/etc/subgid");
    CHECK(p.linger == "/var/lib/systemd/linger/gpupool-worker");
    CHECK(render_worker_sysusers(p) ==
          "# Written by `gpupool worker install`: the system user the worker service runs as (its home\n"
          "# is the default work dir, where rootless podman keeps its images and containers).\n"
          "u gpupool-worker - \"gpupool worker\" /var/lib/gpupool/worker -\n");
    CHECK(user_paths().sysusers.empty()); // --user: the owner's own account
}

TEST_CASE("service files: subordinate ids start where no existing range overlaps", "[install]") {
    CHECK(free_subid_start({}) == 100000U);
    CHECK(free_subid_start({"", "# comment\n"}) == 100000U);
    // useradd's ranges for two people: the next one follows them.
    const std::string two = "alice:100000:65536\nbob:165536:65536\n";
    CHECK(free_subid_start({two}) == 231072U);
    // A gap too small is skipped; a wide enough one is taken; ranges in either file count.
    CHECK(free_subid_start({"a:100000:1000\nb:150000:65536\n", "c:300000:65536\n"}) == 215536U);
    CHECK(free_subid_start({"a:100000:65536\nb:400000:10\n"}) == 165536U);
    CHECK(free_subid_start({"bad line\nx:y:z\n"}) == 100000U);
    CHECK(free_subid_start({"most:100000:4294000000\n"}) == 4294100000U); // room is left below 2^32 - 1
    CHECK_FALSE(free_subid_start({"all:100000:4294900000\n"}).has_value());

    CHECK(has_subid_entry(two, "bob", 1001));
    CHECK(has_subid_entry("1001:300000:65536\n", "gpupool-worker", 1001)); // keyed by uid
    CHECK_FALSE(has_subid_entry(two, "gpupool-worker", 990));
    CHECK_FALSE(has_subid_entry("gpupool-workers:1:2\n", "gpupool-worker", 990));

    CHECK(append_subid_entry("", "gpupool-worker", 231072) == "gpupool-worker:231072:65536\n");
    CHECK(append_subid_entry("alice:100000:65536", "gpupool-worker", 165536) ==
          "alice:100000:65536\ngpupool-worker:165536:65536\n");
}

TEST_CASE("service files: the user unit is wanted by default.target and sets no capabilities", "[install]") {
    const auto p = user_paths();
    const std::string unit = unit_for(p, pool_at(p));
    CHECK_THAT(unit, Catch::Contains("\nWantedBy=default.target\n"));
    CHECK_THAT(unit, !Catch::Contains("CapabilityBoundingSet"));
    CHECK_THAT(unit, Catch::Contains("--config /home/owner/.config/gpupool/worker.toml\n"));
    CHECK_THAT(unit, Catch::Contains("systemctl --user edit gpupool-worker"));
}

TEST_CASE("service files: arguments are quoted the way systemd reads them back", "[install]") {
    CHECK(systemd_quote("/usr/bin/gpupool").value() == "/usr/bin/gpupool");
    CHECK(systemd_quote("/opt/my tools/gpupool").value() == "\"/opt/my tools/gpupool\"");
    CHECK(systemd_quote("https://h/%41").value() == "https://h/%%41");
    CHECK(systemd_quote("$HOME").value() == "$$HOME");
    CHECK(systemd_quote("a\"b\\c").value() == "\"a\\\"b\\\\c\"");
    CHECK(systemd_quote("").value() == "\"\"");
    CHECK_FALSE(systemd_quote("a\nExecStartPre=/bin/evil").has_value());
    const auto p = system_paths();
    CHECK_FALSE(render_unit(p, pool_at(p), UnitInputs{"gpupool", std::chrono::seconds(300)}).has_value());
}

TEST_CASE("service files: the [pool] table reads back, and merging keeps the owner's other settings", "[install]") {
    const auto p = system_paths();
    const auto pool = pool_at(p);
    const std::string text = render_pool_config(pool);
    CHECK_THAT(text, Catch::Contains("[pool]") && Catch::Contains("coordinator = 'https://pool.example.org:7443'"));
    auto back = read_pool_table(text, "worker.toml");
    REQUIRE(back.has_value());
    CHECK(*back == pool);

    const std::string owners = "# mine\n[pool]\ncoordinator = \"https://old:1\"\nca_cert = \"/etc/ca.pem\"\n\n"
                               "[share]\nmax_jobs = 2\n";
    auto merged = merge_pool_config(owners, "worker.toml", pool);
    REQUIRE(merged.has_value());
    CHECK(read_pool_table(*merged, "worker.toml").value() == pool);
    CHECK_THAT(*merged, Catch::Contains("ca_cert = '/etc/ca.pem'") && Catch::Contains("[share]") &&
                            Catch::Contains("max_jobs = 2"));

    auto broken = read_pool_table("[pool]\ncoordinator = \n", "/etc/gpupool/worker.toml");
    REQUIRE_FALSE(broken.has_value());
    REQUIRE(broken.error().where.has_value());
    CHECK(broken.error().where->file == "/etc/gpupool/worker.toml");
    CHECK(broken.error().where->line == 2);
    auto not_table = read_pool_table("pool = 3\n", "w.toml");
    REQUIRE_FALSE(not_table.has_value());
    CHECK_THAT(not_table.error().message, Catch::Contains("[pool]"));
}

TEST_CASE("service files: what install refuses to write", "[install]") {
    const auto p = system_paths();
    auto pool = pool_at(p);
    CHECK(check_pool_table(pool).has_value());
    pool.coordinator = "ftp://pool";
    CHECK(check_pool_table(pool).error().field == "--coordinator");
    pool.coordinator = "https://pool\nExecStartPre=/bin/evil";
    CHECK(check_pool_table(pool).error().field == "--coordinator");
    pool = pool_at(p);
    pool.work_dir = "relative/spool";
    CHECK(check_pool_table(pool).error().field == "--work-dir");
    pool = pool_at(p);
    pool.runtime = "process";
    auto refused = check_pool_table(pool);
    CHECK(refused.error().field == "--runtime");
    CHECK_THAT(refused.error().message, Catch::Contains("isolates nothing"));
}

namespace {

// systemd-analyze verify's verdict on a unit file: its exit code and everything it printed. It
// checks the syntax, every key (an unknown one or a bad value is a warning: we want none), and that
// ExecStart's program exists and is executable.
struct Verdict {
    int exit_code = -1;
    std::string output;
};

Verdict verify(const fs::path& unit, bool user, const fs::path& runtime_dir) {
    namespace bp = boost::process;
    std::vector<std::string> args;
    if (user) {
        args.emplace_back("--user");
    }
    args.insert(args.end(), {"verify", unit.string()});
    auto env = boost::this_process::environment();
    env["XDG_RUNTIME_DIR"] = runtime_dir.string(); // the user manager's, which --user needs
    bp::ipstream out;
    bp::child c(bp::search_path("systemd-analyze"), bp::args = args, env, (bp::std_out & bp::std_err) > out,
                bp::std_in < bp::null);
    Verdict v;
    std::string line;
    while (std::getline(out, line)) {
        v.output += line + "\n";
    }
    c.wait();
    v.exit_code = c.exit_code();
    return v;
}

} // namespace

TEST_CASE("service files: systemd-analyze verify accepts both units without a warning", "[install]") {
    if (boost::process::search_path("systemd-analyze").empty()) {
        const char* require = std::getenv("GPUPOOL_REQUIRE_CONTAINERS");
        if (require != nullptr && std::string(require) == "1") {
            FAIL("systemd-analyze is not installed (package systemd, .ci/packages.txt)");
        }
        WARN("SKIPPED: systemd-analyze is not installed (package systemd): the units are not verified");
        return;
    }
    test::TempDir dir;
    fs::create_directories(dir.path() / "run");
    fs::permissions(dir.path() / "run", fs::perms::owner_all);
    // A binary path with a blank and a `%`: the quoting must bring the same path back to systemd.
    fs::create_directories(dir.path() / "my tools");
    const fs::path odd = dir.path() / "my tools" / "gpu%pool";
    fs::create_symlink(GPUPOOL_BINARY, odd);
    for (const fs::path& binary : {fs::path(GPUPOOL_BINARY), odd}) {
        for (const bool user : {false, true}) {
            const auto p = user ? user_paths() : system_paths();
            const auto file = dir.write(user ? "user/gpupool-worker.service" : "gpupool-worker.service",
                                        unit_for(p, pool_at(p), binary));
            const auto v = verify(file, user, dir.path() / "run");
            INFO((user ? "user unit, " : "system unit, ") << binary << ":\n" << v.output << test::slurp(file));
            CHECK(v.exit_code == 0);
            CHECK(v.output.empty());
        }
    }
    // The system unit for each engine, run by the service's user or (--as-root) by root.
    for (const char* runtime : {"podman", "docker", "process"}) {
        for (const bool as_root : {false, true}) {
            const auto p = system_paths();
            const auto file = dir.write("gpupool-worker.service",
                                        unit_for(p, with_runtime(pool_at(p), runtime), GPUPOOL_BINARY, as_root));
            const auto v = verify(file, false, dir.path() / "run");
            INFO(runtime << (as_root ? " as root" : " as gpupool-worker") << ":\n" << v.output << test::slurp(file));
            CHECK(v.exit_code == 0);
            CHECK(v.output.empty());
        }
    }
    // And it does complain when the program is missing: the check above is not vacuous.
    const auto p = system_paths();
    const auto missing = dir.write("missing.service", unit_for(p, pool_at(p), dir.path() / "no-such-gpupool"));
    const auto v = verify(missing, false, dir.path() / "run");
    CHECK(v.exit_code != 0);
    CHECK_THAT(v.output, Catch::Contains("no-such-gpupool"));
}

} // namespace test_service_files
} // namespace
