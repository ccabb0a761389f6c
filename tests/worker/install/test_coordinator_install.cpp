// `gpupool coordinator install/uninstall` against a temp root: the unit's text (hardening, the
// port's capability, the command) and systemd-analyze's verdict on it, then the installer with a
// recording fake (files, modes, the key's group, idempotency, --force, what systemctl is asked,
// uninstall), and the real systemd-sysusers making the user under the temp root.
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"
#include "worker/install/coordinator_installer.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_coordinator_install {

using namespace gpupool;
using namespace gpupool::worker;
namespace fs = std::filesystem;
namespace bp = boost::process;

namespace {

using Calls = std::vector<std::string>;
constexpr gid_t k_group = 4242; // the service's group in the temp root's /etc/group
const std::string k_enable = "enable --now gpupool-coordinator.service";

struct FileStat {
    unsigned mode = 0;
    gid_t gid = 0;
};

FileStat stat_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return {st.st_mode & 07777U, st.st_gid};
}

// The fake systemd: records the calls; create_system_users writes the group as systemd-sysusers would.
class FakeSystemd final : public Systemctl {
public:
    Status daemon_reload() override { return recording.daemon_reload(); }
    Status enable_start(const std::string& unit) override { return recording.enable_start(unit); }
    Status try_restart(const std::string& unit) override { return recording.try_restart(unit); }
    Status stop_disable(const std::string& unit) override { return recording.stop_disable(unit); }
    Status try_reload(const std::string& unit) override { return recording.try_reload(unit); }
    Status create_system_users(const fs::path& root, const fs::path& config) override {
        if (makes_group) {
            fs::create_directories(root / "etc");
            test::write_file(root / "etc/group", "root:x:0:\ngpupool-coordinator:x:" + std::to_string(k_group) + ":\n");
        }
        return recording.create_system_users(root, config);
    }
    const Calls& calls() const { return recording.calls; }

    RecordingSystemctl recording;
    bool makes_group = true;
};

struct Machine {
    test::TempDir dir;
    fs::path root = dir.path() / "root";
    CoordinatorPaths paths = coordinator_paths(root);
    test::TlsFiles a = test::make_self_signed(dir.path(), "a");
    test::TlsFiles b = test::make_self_signed(dir.path(), "b");

    CoordinatorInstallOptions options(bool tls = true) const {
        CoordinatorInstallOptions o;
        o.paths = paths;
        o.listen = "0.0.0.0:7443";
        if (tls) {
            o.tls_cert = a.cert;
            o.tls_key = a.key;
        }
        o.binary = GPUPOOL_BINARY;
        return o;
    }
    fs::path at(const fs::path& p) const { return paths.on_disk(p); }
    std::string unit() const { return test::slurp(at(paths.unit)); }
};

Status install(const CoordinatorInstallOptions& o, FakeSystemd& s, ServiceReport& r) {
    return install_coordinator(o, s, r);
}

std::string unit_text(const CoordinatorUnitInputs& in) {
    auto u = render_coordinator_unit(coordinator_paths("/"), in);
    REQUIRE(u.has_value());
    return *u;
}

CoordinatorUnitInputs inputs(const std::string& listen, bool tls) {
    return {GPUPOOL_BINARY, parse_service_listen(listen).value(), tls};
}

} // namespace

TEST_CASE("coordinator unit: its own user, the database in the state directory, every hardening option",
          "[install][coordinator-install]") {
    const std::string u = unit_text(inputs("0.0.0.0:7443", true));
    CHECK_THAT(u, Catch::Contains("\nExecStart=" + std::string(GPUPOOL_BINARY) +
                                  " coordinator --db /var/lib/gpupool-coordinator/pool.db --listen 0.0.0.0:7443 "
                                  "--admin-token-file /var/lib/gpupool-coordinator/admin.token --tls-cert "
                                  "/etc/gpupool/coordinator/tls-cert.pem --tls-key "
                                  "/etc/gpupool/coordinator/tls-key.pem\n"));
    for (const char* line : {"User=gpupool-coordinator",
                             "Group=gpupool-coordinator",
                             "StateDirectory=gpupool-coordinator",
                             "StateDirectoryMode=0700",
                             "UMask=0077",
                             "ExecReload=/bin/kill -HUP $MAINPID",
                             "Restart=on-failure",
                             "RestartPreventExitStatus=2",
                             "LimitNOFILE=65536",
                             "CapabilityBoundingSet=",
                             "NoNewPrivileges=yes",
                             "ProtectSystem=strict",
                             "ProtectHome=yes",
                             "PrivateTmp=yes",
                             "PrivateDevices=yes",
                             "ProtectKernelTunables=yes",
                             "ProtectKernelModules=yes",
                             "ProtectKernelLogs=yes",
                             "ProtectControlGroups=yes",
                             "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
                             "RestrictNamespaces=yes",
                             "LockPersonality=yes",
                             "MemoryDenyWriteExecute=yes",
                             "RestrictRealtime=yes",
                             "SystemCallFilter=@system-service",
                             "SystemCallArchitectures=native",
                             "ProtectClock=yes",
                             "ProtectHostname=yes",
                             "ProtectProc=invisible",
                             "PrivateMounts=yes",
                             "RemoveIPC=yes",
                             "RestrictSUIDSGID=yes",
                             "WantedBy=multi-user.target"}) {
        CHECK_THAT(u, Catch::Contains("\n" + std::string(line) + "\n"));
    }
    CHECK_THAT(u, !Catch::Contains("AmbientCapabilities"));
    CHECK_THAT(u, !Catch::Contains("\nDynamicUser="));
    CHECK_THAT(u, !Catch::Contains("gpp_")); // no secret in the unit

    // Plain HTTP: no TLS options.
    const std::string plain = unit_text(inputs("[::]:7070", false));
    CHECK_THAT(plain,
               Catch::Contains("--listen [::]:7070 --admin-token-file /var/lib/gpupool-coordinator/admin.token\n"));
    CHECK_THAT(plain, !Catch::Contains("--tls-cert"));
}

TEST_CASE("coordinator unit: a port below 1024 keeps CAP_NET_BIND_SERVICE and nothing else",
          "[install][coordinator-install]") {
    const std::string u = unit_text(inputs("0.0.0.0:443", true));
    CHECK_THAT(u, Catch::Contains("\nCapabilityBoundingSet=CAP_NET_BIND_SERVICE\n"));
    CHECK_THAT(u, Catch::Contains("\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n"));
    CHECK_THAT(u, !Catch::Contains("\nCapabilityBoundingSet=\n"));
    const std::string high = unit_text(inputs("0.0.0.0:1024", true));
    CHECK_THAT(high, Catch::Contains("\nCapabilityBoundingSet=\n"));
    CHECK_THAT(high, !Catch::Contains("AmbientCapabilities"));
}

TEST_CASE("coordinator unit: bad --listen values and hidden binaries are refused", "[install][coordinator-install]") {
    for (const char* bad : {"7443", "0.0.0.0:0", "0.0.0.0:70000", ":7443", "0.0.0.0:", "host:74x3", "a b:1"}) {
        INFO(bad);
        auto l = parse_service_listen(bad);
        REQUIRE_FALSE(l);
        CHECK(l.error().field == "--listen");
    }
    CHECK(parse_service_listen("pool.example.org:7443").value().port == 7443);
    for (const char* hidden : {"/home/ops/gpupool", "/root/gpupool", "/run/user/1000/gpupool"}) {
        INFO(hidden);
        auto u = render_coordinator_unit(coordinator_paths("/"), {hidden, parse_service_listen("h:1").value(), false});
        REQUIRE_FALSE(u);
        CHECK_THAT(u.error().message, Catch::Contains("ProtectHome"));
    }
    CHECK(check_service_binary("/usr/local/bin/gpupool"));
    CHECK(check_service_binary("/homer/gpupool"));
    CHECK_FALSE(check_service_binary("gpupool"));
}

namespace {

// systemd-analyze's output and exit code for a unit file (unknown keys and bad values are
// warnings with exit 0: the output must be empty too).
std::pair<int, std::string> analyze(const std::vector<std::string>& args) {
    bp::ipstream out;
    bp::child c(bp::search_path("systemd-analyze"), bp::args = args, (bp::std_out & bp::std_err) > out,
                bp::std_in < bp::null);
    std::string text;
    std::string line;
    while (std::getline(out, line)) {
        text += line + "\n";
    }
    c.wait();
    return {c.exit_code(), text};
}

bool have_systemd_analyze() {
    if (!bp::search_path("systemd-analyze").empty()) {
        return true;
    }
    const char* require = std::getenv("GPUPOOL_REQUIRE_CONTAINERS");
    if (require != nullptr && std::string(require) == "1") {
        FAIL("systemd-analyze is not installed (package systemd, .ci/packages.txt)");
    }
    WARN("SKIPPED: systemd-analyze is not installed (package systemd): the coordinator's unit is not verified");
    return false;
}

} // namespace

// `systemd-analyze verify FILE` needs no running systemd (it loads the unit into an offline
// manager: syntax, every key's value, ExecStart's program executable), so it runs in a container
// as well; only a machine without the systemd package skips.
TEST_CASE("coordinator install: systemd-analyze verify accepts the installed unit without a warning",
          "[install][coordinator-install]") {
    if (!have_systemd_analyze()) {
        return;
    }
    for (const std::string listen : {"0.0.0.0:7443", "0.0.0.0:443"}) {
        for (const bool tls : {true, false}) {
            Machine m;
            auto o = m.options(tls);
            o.listen = listen;
            FakeSystemd s;
            ServiceReport r;
            REQUIRE(install(o, s, r));
            const auto [code, output] = analyze({"verify", m.at(m.paths.unit).string()});
            INFO(listen << (tls ? " https" : " http") << "\n"
                        << m.unit() << "\nsystemd-analyze verify said:\n"
                        << output);
            CHECK(code == 0);
            CHECK(output.empty());
            // And its exposure stays "OK" (2.0 or less out of 10): the hardening is all there.
            const auto [rated, rating] =
                analyze({"security", "--offline=yes", "--threshold=20", m.at(m.paths.unit).string()});
            INFO(rating);
            CHECK(rated == 0);
        }
    }
    // The check has teeth: a misspelled key and a missing binary are reported.
    test::TempDir dir;
    std::string broken = unit_text(inputs("0.0.0.0:7443", true));
    broken.replace(broken.find("ProtectHome=yes"), 15, "ProtectHomes=yes");
    broken.replace(broken.find(GPUPOOL_BINARY), std::string(GPUPOOL_BINARY).size(), "/nonexistent/gpupool");
    const fs::path bad = dir.write("gpupool-coordinator.service", broken);
    const auto [code, output] = analyze({"verify", bad.string()});
    CHECK(code != 0);
    CHECK_THAT(output, Catch::Contains("ProtectHomes") && Catch::Contains("/nonexistent/gpupool"));
}

TEST_CASE("coordinator install: writes the user's entry, the TLS copies (key 0640, the service's group) and the unit",
          "[install][coordinator-install]") {
    Machine m;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.options(), s, r));
    CHECK(s.calls() == Calls{"systemd-sysusers /etc/sysusers.d/gpupool-coordinator.conf", "daemon-reload", k_enable});
    CHECK(r.systemctl == s.calls());
    CHECK(test::slurp(m.at(m.paths.sysusers)) ==
          "# Written by `gpupool coordinator install`: the system user the coordinator service runs as\n"
          "# (its home is the state directory, which holds the pool's database).\n"
          "u gpupool-coordinator - \"gpupool coordinator\" /var/lib/gpupool-coordinator -\n");
    CHECK(test::slurp(m.at(m.paths.tls_cert)) == test::slurp(m.a.cert));
    CHECK(test::slurp(m.at(m.paths.tls_key)) == test::slurp(m.a.key));
    CHECK(stat_of(m.at(m.paths.sysusers)).mode == 0644);
    CHECK(stat_of(m.at(m.paths.unit)).mode == 0644);
    CHECK(stat_of(m.at(m.paths.tls_cert)).mode == 0644);
    CHECK(stat_of(m.at(m.paths.tls_key)).mode == 0640);
    CHECK(stat_of(m.at(m.paths.tls_key)).gid == k_group);
    CHECK_THAT(m.unit(), Catch::Contains("--tls-key /etc/gpupool/coordinator/tls-key.pem")); // the machine's path
    REQUIRE(r.steps.size() == 5);
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(r.steps[i].what == "wrote");
    }
    CHECK(r.steps[4].what == "kept");
    CHECK(r.steps[4].path == "/var/lib/gpupool-coordinator");
}

TEST_CASE("coordinator install: the same install twice changes nothing and only enables again",
          "[install][coordinator-install]") {
    Machine m;
    FakeSystemd first;
    ServiceReport r1;
    REQUIRE(install(m.options(), first, r1));
    const auto unit_time = fs::last_write_time(m.at(m.paths.unit));
    const auto key_time = fs::last_write_time(m.at(m.paths.tls_key));
    FakeSystemd again;
    ServiceReport r2;
    REQUIRE(install(m.options(), again, r2));
    CHECK(again.calls() == Calls{k_enable}); // the group exists: no systemd-sysusers either
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(r2.steps[i].what == "unchanged");
    }
    CHECK(fs::last_write_time(m.at(m.paths.unit)) == unit_time);
    CHECK(fs::last_write_time(m.at(m.paths.tls_key)) == key_time);
}

TEST_CASE("coordinator install: different files are refused without --force, replaced with it",
          "[install][coordinator-install]") {
    Machine m;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.options(), s, r));
    const std::string unit_before = m.unit();
    const std::string key_before = test::slurp(m.at(m.paths.tls_key));

    auto moved = m.options();
    moved.listen = "0.0.0.0:8443";
    moved.tls_cert = m.b.cert;
    moved.tls_key = m.b.key;
    FakeSystemd refused_calls;
    ServiceReport refused_report;
    auto refused = install(moved, refused_calls, refused_report);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::conflict);
    CHECK(refused.error().field == "--force");
    CHECK_THAT(refused.error().message,
               Catch::Contains("/etc/gpupool/coordinator/tls-cert.pem: differs") &&
                   Catch::Contains("/etc/gpupool/coordinator/tls-key.pem: differs") &&
                   Catch::Contains("/etc/systemd/system/gpupool-coordinator.service: differs"));
    CHECK(refused_calls.calls().empty());
    CHECK(m.unit() == unit_before); // nothing was changed
    CHECK(test::slurp(m.at(m.paths.tls_key)) == key_before);

    moved.force = true;
    FakeSystemd forced;
    ServiceReport forced_report;
    REQUIRE(install(moved, forced, forced_report));
    CHECK(forced.calls() == Calls{"daemon-reload", "try-restart gpupool-coordinator.service", k_enable});
    CHECK_THAT(m.unit(), Catch::Contains("--listen 0.0.0.0:8443"));
    CHECK(test::slurp(m.at(m.paths.tls_key)) == test::slurp(m.b.key));
    CHECK(stat_of(m.at(m.paths.tls_key)).mode == 0640);
    CHECK(stat_of(m.at(m.paths.tls_key)).gid == k_group);
}

TEST_CASE("coordinator install: a renewed certificate alone is reloaded, not restarted",
          "[install][coordinator-install]") {
    Machine m;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.options(), s, r));
    auto renewed = m.options();
    renewed.tls_cert = m.b.cert;
    renewed.tls_key = m.b.key;
    renewed.force = true;
    FakeSystemd again;
    ServiceReport r2;
    REQUIRE(install(renewed, again, r2));
    // The unit is the same (it names the copies): no daemon-reload, and SIGHUP keeps the connections.
    CHECK(again.calls() == Calls{"try-reload-or-restart gpupool-coordinator.service", k_enable});
    CHECK(test::slurp(m.at(m.paths.tls_cert)) == test::slurp(m.b.cert));
}

TEST_CASE("coordinator install: unusable TLS files and bad options are refused before anything is written",
          "[install][coordinator-install]") {
    Machine m;
    auto mismatched = m.options();
    mismatched.tls_key = m.b.key; // A's certificate, B's key
    FakeSystemd s;
    ServiceReport r;
    auto st = install(mismatched, s, r);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == ErrorCode::invalid_input);
    CHECK_THAT(st.error().message, Catch::Contains("does not match"));

    auto missing = m.options();
    missing.tls_cert = m.dir.path() / "nope.pem";
    REQUIRE_FALSE(install(missing, s, r));

    auto half = m.options();
    half.tls_key.clear();
    auto h = install(half, s, r);
    REQUIRE_FALSE(h);
    CHECK(h.error().field == "--tls-cert");

    auto port0 = m.options();
    port0.listen = "0.0.0.0:0";
    auto p = install(port0, s, r);
    REQUIRE_FALSE(p);
    CHECK(p.error().field == "--listen");

    CHECK(s.calls().empty());
    CHECK_FALSE(fs::exists(m.root));
}

TEST_CASE("coordinator install: a group systemd-sysusers did not make is an error before the key is written",
          "[install][coordinator-install]") {
    Machine m;
    FakeSystemd s;
    s.makes_group = false;
    ServiceReport r;
    auto st = install(m.options(), s, r);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == ErrorCode::io);
    CHECK_THAT(st.error().message, Catch::Contains("gpupool-coordinator"));
    CHECK(s.calls() == Calls{"systemd-sysusers /etc/sysusers.d/gpupool-coordinator.conf"});
    CHECK_FALSE(fs::exists(m.at(m.paths.tls_key)));
    CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
}

TEST_CASE("coordinator uninstall: stops the service, removes unit, copies and user entry, keeps the database",
          "[install][coordinator-install]") {
    Machine m;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(m.options(), s, r));
    fs::create_directories(m.at(m.paths.state_dir));
    test::write_file(m.at(m.paths.db), "the pool");

    FakeSystemd failing;
    failing.recording.fail_on = "disable --now gpupool-coordinator.service";
    ServiceReport failed;
    REQUIRE_FALSE(uninstall_coordinator(m.paths, failing, failed));
    CHECK(fs::exists(m.at(m.paths.unit))); // nothing removed while it may still run

    FakeSystemd u;
    ServiceReport ur;
    REQUIRE(uninstall_coordinator(m.paths, u, ur));
    CHECK(u.calls() == Calls{"disable --now gpupool-coordinator.service", "daemon-reload"});
    for (const auto& p : {m.paths.unit, m.paths.tls_cert, m.paths.tls_key, m.paths.sysusers}) {
        CHECK_FALSE(fs::exists(m.at(p)));
    }
    CHECK_FALSE(fs::exists(m.at(m.paths.tls_cert).parent_path()));
    CHECK(test::slurp(m.at(m.paths.db)) == "the pool");
    REQUIRE(ur.steps.size() == 6); // unit, TLS certificate and key, scrape token (absent here), user's entry
    CHECK(ur.steps[0].what == "removed");
    CHECK(ur.steps[3].what == "absent");
    CHECK(ur.steps[5].what == "kept");
    CHECK_THAT(ur.steps[5].note, Catch::Contains("database"));

    // Twice: nothing is there, systemctl is not asked.
    FakeSystemd twice;
    ServiceReport tr;
    REQUIRE(uninstall_coordinator(m.paths, twice, tr));
    CHECK(twice.calls().empty());
    CHECK(tr.steps[0].what == "absent");
}

TEST_CASE("coordinator install: the real systemd-sysusers makes the service's user under the root",
          "[install][coordinator-install]") {
    if (bp::search_path("systemd-sysusers").empty() || ::geteuid() != 0) {
        WARN("SKIPPED: needs root and systemd-sysusers (package systemd) to make a user under a temp root");
        return;
    }
    Machine m;
    SystemctlCommand real("true", false); // systemctl itself is not run here: `true` stands in
    ServiceReport r;
    REQUIRE(install_coordinator(m.options(), real, r));
    CHECK(r.systemctl.front() == "systemd-sysusers /etc/sysusers.d/gpupool-coordinator.conf");
    const std::string group = test::slurp(m.root / "etc/group");
    REQUIRE_THAT(group, Catch::StartsWith("gpupool-coordinator:x:"));
    const auto gid = static_cast<gid_t>(std::stoul(group.substr(std::string("gpupool-coordinator:x:").size())));
    CHECK(stat_of(m.at(m.paths.tls_key)).gid == gid);
    CHECK_THAT(test::slurp(m.root / "etc/passwd"),
               Catch::Contains("gpupool-coordinator:x:") && Catch::Contains(":/var/lib/gpupool-coordinator:"));
}

TEST_CASE("coordinator install: the scrape token is copied for the service alone and a loopback metrics listener "
          "passed on",
          "[install][coordinator-install][metrics]") {
    Machine m;
    const fs::path token = m.dir.write("scrape.token", std::string(40, 'a') + "\n");
    auto o = m.options();
    o.metrics_token = token;
    o.metrics_listen = "127.0.0.1:9464";
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(o, s, r));
    CHECK(test::slurp(m.at(m.paths.metrics_token)) == test::slurp(token));
    CHECK(stat_of(m.at(m.paths.metrics_token)).mode == 0640);
    CHECK(stat_of(m.at(m.paths.metrics_token)).gid == k_group);
    CHECK_THAT(m.unit(), Catch::Contains("--metrics-token-file /etc/gpupool/coordinator/metrics.token") &&
                             Catch::Contains("--metrics-listen 127.0.0.1:9464"));
    if (have_systemd_analyze()) {
        const auto [code, output] = analyze({"verify", m.at(m.paths.unit).string()});
        INFO(m.unit() << "\n" << output);
        CHECK(code == 0);
    }
    // A new token is read at start only: the service restarts (a TLS file alone is reloaded).
    test::write_file(token, std::string(40, 'b') + "\n");
    o.force = true;
    FakeSystemd again;
    ServiceReport r2;
    REQUIRE(install(o, again, r2));
    CHECK(again.calls() == Calls{"try-restart gpupool-coordinator.service", k_enable});
    CHECK(test::slurp(m.at(m.paths.metrics_token)) == std::string(40, 'b') + "\n");
    // Uninstall takes the copy away.
    FakeSystemd u;
    ServiceReport ur;
    REQUIRE(uninstall_coordinator(m.paths, u, ur));
    CHECK_FALSE(fs::exists(m.at(m.paths.metrics_token)));
}

TEST_CASE("coordinator install: a metrics listener off loopback or a missing scrape token is refused before anything "
          "is written",
          "[install][coordinator-install][metrics]") {
    for (const std::string listen : {"0.0.0.0:9464", "10.0.0.5:9464", "pool.example.org:9464", "127.0.0.1"}) {
        Machine m;
        auto o = m.options();
        o.metrics_listen = listen;
        FakeSystemd s;
        ServiceReport r;
        auto st = install(o, s, r);
        INFO(listen);
        REQUIRE_FALSE(st);
        CHECK(st.error().field == "--metrics-listen");
        CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
        CHECK(s.calls().empty());
    }
    Machine m;
    auto o = m.options();
    o.metrics_token = m.dir.path() / "missing.token";
    FakeSystemd s;
    ServiceReport r;
    auto st = install(o, s, r);
    REQUIRE_FALSE(st);
    CHECK(st.error().field == "--metrics-token-file");
    CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
}

TEST_CASE("coordinator install --dry-run: every file, user and call is reported and nothing changes, and plain HTTP off "
          "loopback is warned about",
          "[install][coordinator-install]") {
    Machine m;
    auto o = m.options(false); // 0.0.0.0:7443 without TLS
    o.dry_run = true;
    FakeSystemd s;
    ServiceReport r;
    REQUIRE(install(o, s, r).has_value());
    CHECK(r.dry_run);
    CHECK_FALSE(fs::exists(m.root));
    CHECK(s.recording.calls.empty());
    std::map<std::string, std::string> steps;
    for (const auto& step : r.steps) {
        steps[step.path] = step.what;
    }
    CHECK(steps["/etc/group"] == "would add");
    CHECK(steps["/etc/sysusers.d/gpupool-coordinator.conf"] == "would write");
    CHECK(steps["/etc/systemd/system/gpupool-coordinator.service"] == "would write");
    REQUIRE(r.systemctl.size() == 3);
    CHECK(r.systemctl[0].starts_with("systemd-sysusers "));
    CHECK(r.systemctl[2] == "enable --now gpupool-coordinator.service");
    REQUIRE(r.warnings.size() == 1);
    CHECK_THAT(r.warnings[0], Catch::Contains("--listen 0.0.0.0:7443 serves plain HTTP"));

    // With TLS: the key and certificate copies too, and no warning.
    auto tls = m.options(true);
    tls.dry_run = true;
    ServiceReport t;
    REQUIRE(install(tls, s, t).has_value());
    CHECK(t.warnings.empty());
    CHECK(std::any_of(t.steps.begin(), t.steps.end(),
                      [](const auto& st) { return st.what == "would write" && st.path.ends_with("tls-key.pem"); }));
    CHECK_FALSE(fs::exists(m.root));
}

TEST_CASE("coordinator install: a binary under /tmp or closed to the service's user is refused before anything",
          "[install][coordinator-install]") {
    Machine m;
    auto o = m.options();
    o.binary = "/tmp/gpupool";
    FakeSystemd s;
    ServiceReport r;
    auto st = install(o, s, r);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains("under /tmp"));
    const fs::path closed = fs::path(GPUPOOL_BINARY).parent_path() / ("closed-c-" + std::to_string(::getpid()));
    fs::create_directories(closed);
    fs::create_symlink(GPUPOOL_BINARY, closed / "gpupool");
    fs::permissions(closed, fs::perms::owner_all);
    o.binary = closed / "gpupool";
    st = install(o, s, r);
    std::error_code ec;
    fs::remove_all(closed, ec);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error().message, Catch::Contains("gpupool-coordinator cannot reach"));
    CHECK_FALSE(fs::exists(m.root));
    CHECK(s.recording.calls.empty());
}

} // namespace test_coordinator_install
} // namespace
