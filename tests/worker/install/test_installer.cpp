// `gpupool worker install/uninstall` against a temp root: the installer with the recording fake
// systemctl (files, modes, idempotency, --force, --purge), then the real binary with a fake
// systemctl program (the options, the exit codes, what systemctl is asked).
#include "tests/support.hpp"
#include "worker/install/installer.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

using namespace gpupool;
using namespace gpupool::worker;
namespace fs = std::filesystem;

namespace {

using Calls = std::vector<std::string>;

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777U;
}

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

Status install(const InstallOptions& o, RecordingSystemctl& s, ServiceReport& r) {
    return install_service(o, s, r);
}

} // namespace

TEST_CASE("worker install: writes the token 0600, config and unit 0644, the work dir 0700, then enables it",
          "[install]") {
    Machine m;
    RecordingSystemctl s;
    ServiceReport r;
    REQUIRE(install(m.install_options(), s, r).has_value());
    CHECK(s.calls == Calls{"daemon-reload", "enable --now gpupool-worker.service"});
    CHECK(r.systemctl == s.calls);
    CHECK(test::slurp(m.at(m.paths.token)) == "gpp_0123456789abcdef\n");
    CHECK(mode_of(m.at(m.paths.token)) == 0600);
    CHECK(mode_of(m.at(m.paths.config)) == 0644);
    CHECK(mode_of(m.at(m.paths.unit)) == 0644);
    CHECK(mode_of(m.at(m.paths.work_dir)) == 0700);
    const auto pool = read_pool_table(test::slurp(m.at(m.paths.config)), "worker.toml");
    REQUIRE(pool.has_value());
    CHECK(pool->coordinator == "https://pool.example.org:7443");
    CHECK(pool->token_file == "/etc/gpupool/enroll.token"); // the machine's path, not the temp root's
    CHECK(pool->work_dir == "/var/lib/gpupool/worker");
    CHECK(pool->runtime == "podman");
    CHECK_THAT(test::slurp(m.at(m.paths.unit)), Catch::Contains("ExecStart=" + std::string(GPUPOOL_BINARY) + " worker"));
    REQUIRE(r.steps.size() == 4);
    CHECK(r.steps[0].what == "wrote");
    CHECK(r.steps[3].what == "created");
}

TEST_CASE("worker install: the same install twice changes nothing and only enables again", "[install]") {
    Machine m;
    RecordingSystemctl first;
    ServiceReport r1;
    REQUIRE(install(m.install_options(), first, r1).has_value());
    const auto unit_time = fs::last_write_time(m.at(m.paths.unit));
    RecordingSystemctl again;
    ServiceReport r2;
    REQUIRE(install(m.install_options(), again, r2).has_value());
    CHECK(again.calls == Calls{"enable --now gpupool-worker.service"});
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(r2.steps[i].what == "unchanged");
    }
    CHECK(r2.steps[3].what == "kept");
    CHECK(fs::last_write_time(m.at(m.paths.unit)) == unit_time);
}

TEST_CASE("worker install: different settings are refused without --force, replaced with it", "[install]") {
    Machine m;
    RecordingSystemctl s;
    ServiceReport r;
    REQUIRE(install(m.install_options(), s, r).has_value());
    // The owner added terms of their own to worker.toml.
    const std::string owners = test::slurp(m.at(m.paths.config)) + "\n[share]\nmax_jobs = 2\n";
    put(m.at(m.paths.config), owners);
    const std::string unit_before = test::slurp(m.at(m.paths.unit));

    auto moved = m.install_options();
    moved.coordinator = "https://new.example.org";
    moved.runtime = "docker";
    RecordingSystemctl refused_calls;
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
    CHECK(refused_calls.calls.empty());
    CHECK(test::slurp(m.at(m.paths.config)) == owners); // nothing was changed
    CHECK(test::slurp(m.at(m.paths.unit)) == unit_before);

    moved.force = true;
    RecordingSystemctl forced;
    ServiceReport forced_report;
    REQUIRE(install(moved, forced, forced_report).has_value());
    CHECK(forced.calls ==
          Calls{"daemon-reload", "try-restart gpupool-worker.service", "enable --now gpupool-worker.service"});
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
    RecordingSystemctl s;
    ServiceReport r;
    auto st = install(o, s, r);
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().field == "--token-file");
    o.token_source = m.dir.path() / "missing.token";
    CHECK_FALSE(install(o, s, r).has_value());
    CHECK_FALSE(fs::exists(m.root));
    CHECK(s.calls.empty());
}

TEST_CASE("worker install: when systemctl fails the files stay and the report says how far it got", "[install]") {
    Machine m;
    RecordingSystemctl s;
    s.fail_on = "enable --now gpupool-worker.service";
    ServiceReport r;
    auto st = install(m.install_options(), s, r);
    REQUIRE_FALSE(st.has_value());
    CHECK(st.error().code == ErrorCode::io);
    CHECK(fs::exists(m.at(m.paths.unit)));
    CHECK(r.steps.size() == 4);
    CHECK(r.systemctl == Calls{"daemon-reload", "enable --now gpupool-worker.service"});
}

TEST_CASE("worker uninstall: stops (drains) and removes the service, keeps the work dir unless --purge", "[install]") {
    Machine m;
    auto o = m.install_options();
    o.work_dir = "/srv/gpupool-spool";
    {
        RecordingSystemctl s;
        ServiceReport r;
        REQUIRE(install(o, s, r).has_value());
    }
    put(m.at("/srv/gpupool-spool/worker.json"), "{}");
    RecordingSystemctl s;
    ServiceReport r;
    REQUIRE(uninstall_service({m.paths, false}, s, r).has_value());
    CHECK(s.calls == Calls{"disable --now gpupool-worker.service", "daemon-reload"});
    CHECK_FALSE(fs::exists(m.at(m.paths.unit)));
    CHECK_FALSE(fs::exists(m.at(m.paths.config)));
    CHECK_FALSE(fs::exists(m.at(m.paths.token)));
    CHECK_FALSE(fs::exists(m.at("/etc/gpupool"))); // emptied, so removed
    CHECK(fs::exists(m.at("/srv/gpupool-spool/worker.json")));
    CHECK(r.steps.back().what == "kept");
    CHECK(r.steps.back().path == "/srv/gpupool-spool"); // the work dir worker.toml named

    // Nothing installed any more: uninstall again asks systemd nothing and succeeds.
    RecordingSystemctl nothing;
    ServiceReport r2;
    REQUIRE(uninstall_service({m.paths, false}, nothing, r2).has_value());
    CHECK(nothing.calls.empty());
}

TEST_CASE("worker uninstall --purge removes the work dir, but only one that looks like a spool", "[install]") {
    Machine m;
    {
        RecordingSystemctl s;
        ServiceReport r;
        REQUIRE(install(m.install_options(), s, r).has_value());
    }
    put(m.at(m.paths.work_dir / "attempts/7/log"), "spooled");
    RecordingSystemctl s;
    ServiceReport r;
    REQUIRE(uninstall_service({m.paths, true}, s, r).has_value());
    CHECK_FALSE(fs::exists(m.at(m.paths.work_dir)));
    CHECK(fs::exists(m.at("/var/lib/gpupool"))); // only the work dir itself

    // A worker.toml that names some other directory (hand-edited): --purge refuses, changes nothing.
    Machine other;
    auto o = other.install_options();
    o.work_dir = "/home/owner/data";
    {
        RecordingSystemctl s2;
        ServiceReport r2;
        REQUIRE(install(o, s2, r2).has_value());
    }
    put(other.at("/home/owner/data/thesis.tex"), "precious");
    RecordingSystemctl s3;
    ServiceReport r3;
    auto refused = uninstall_service({other.paths, true}, s3, r3);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().field == "--purge");
    CHECK(s3.calls.empty());
    CHECK(fs::exists(other.at(other.paths.unit)));
    CHECK(test::slurp(other.at("/home/owner/data/thesis.tex")) == "precious");
}

TEST_CASE("worker uninstall: when the service does not stop, nothing is removed", "[install]") {
    Machine m;
    {
        RecordingSystemctl s;
        ServiceReport r;
        REQUIRE(install(m.install_options(), s, r).has_value());
    }
    RecordingSystemctl s;
    s.fail_on = "disable --now gpupool-worker.service";
    ServiceReport r;
    REQUIRE_FALSE(uninstall_service({m.paths, true}, s, r).has_value());
    CHECK(fs::exists(m.at(m.paths.unit)));
    CHECK(fs::exists(m.at(m.paths.config)));
    CHECK(fs::exists(m.at(m.paths.work_dir)));
}

TEST_CASE("worker install/uninstall: the real binary under a temp root with a fake systemctl program", "[install]") {
    test::TempDir dir;
    const auto calls = dir.path() / "calls";
    const auto fake = dir.write("systemctl", "#!/bin/sh\necho \"$*\" >> '" + calls.string() + "'\n");
    fs::permissions(fake, fs::perms::owner_all);
    const auto token = dir.write("enroll.token", "gpp_0123456789abcdef\n");
    const auto root = dir.path() / "root";
    const std::vector<std::string> hidden{"--root", root.string(), "--systemctl", fake.string()};
    auto with = [&hidden](std::vector<std::string> args) {
        args.insert(args.end(), hidden.begin(), hidden.end());
        return args;
    };

    auto r = test::run_gpupool(with({"worker", "install", "--coordinator", "https://pool.example.org:7443",
                                     "--token-file", token.string()}));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("wrote     /etc/gpupool/enroll.token") &&
                          Catch::Contains("ran       systemctl enable --now gpupool-worker.service") &&
                          Catch::Contains("coordinator = 'https://pool.example.org:7443'"));
    CHECK_THAT(r.out, !Catch::Contains("would offer")); // `worker` itself did not run
    CHECK(test::slurp(calls) == "daemon-reload\nenable --now gpupool-worker.service\n");
    CHECK(mode_of(root / "etc/gpupool/enroll.token") == 0600);

    auto refused = test::run_gpupool(with({"worker", "install", "--coordinator", "https://other.example.org",
                                           "--token-file", token.string()}));
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("--force"));
    CHECK_THAT(test::slurp(root / "etc/gpupool/worker.toml"), Catch::Contains("pool.example.org:7443"));

    auto missing = test::run_gpupool(with({"worker", "install", "--token-file", token.string()}));
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.err, Catch::Contains("--coordinator"));
    auto process = test::run_gpupool(with({"worker", "install", "--coordinator", "https://p", "--token-file",
                                           token.string(), "--runtime", "process"}));
    CHECK(process.exit_code == 2);

    auto gone = test::run_gpupool(with({"worker", "uninstall", "--purge"}));
    INFO(gone.out << gone.err);
    CHECK(gone.exit_code == 0);
    CHECK_THAT(gone.err, Catch::Contains("drains first"));
    CHECK(test::slurp(calls) ==
          "daemon-reload\nenable --now gpupool-worker.service\ndisable --now gpupool-worker.service\ndaemon-reload\n");
    CHECK_FALSE(fs::exists(root / "etc/gpupool"));
    CHECK_FALSE(fs::exists(root / "var/lib/gpupool/worker"));

    // --user: the owner's own paths under HOME (this process's, below the temp root), systemctl --user.
    fs::remove(calls);
    const auto user = test::run_gpupool(with({"worker", "install", "--user", "--coordinator",
                                              "https://pool.example.org:7443", "--token-file", token.string()}));
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
    RecordingSystemctl s;
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
    CHECK(r.steps[1].what == "replaced");
    CHECK(r.steps[1].note == "the old file did not parse: replaced whole");
}
