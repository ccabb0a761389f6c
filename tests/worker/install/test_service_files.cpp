// The text `gpupool worker install` writes: the unit (rules, quoting, systemd-analyze's verdict) and
// worker.toml's [pool] table (round trip, merging into an owner's file).
#include "tests/support.hpp"
#include "worker/install/service_files.hpp"

#include <boost/process.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

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

std::string unit_for(const ServicePaths& p, const PoolTable& pool, const fs::path& binary = GPUPOOL_BINARY) {
    auto u = render_unit(p, pool, UnitInputs{binary, std::chrono::seconds(300)});
    REQUIRE(u.has_value());
    return *u;
}

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
    // And it does complain when the program is missing: the check above is not vacuous.
    const auto p = system_paths();
    const auto missing = dir.write("missing.service", unit_for(p, pool_at(p), dir.path() / "no-such-gpupool"));
    const auto v = verify(missing, false, dir.path() / "run");
    CHECK(v.exit_code != 0);
    CHECK_THAT(v.output, Catch::Contains("no-such-gpupool"));
}
