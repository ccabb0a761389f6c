// The real `gpupool coordinator install/uninstall` under a temp root (--root), with fake systemctl
// and systemd-sysusers programs that log their arguments: the options, the exit codes, the report
// and what the operator is told about the admin token.
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_coordinator_install_cli {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

struct FakeTools {
    test::TempDir dir;
    fs::path root = dir.path() / "root";
    fs::path calls = dir.path() / "calls";
    fs::path systemctl = dir.write("systemctl", "#!/bin/sh\necho \"systemctl $*\" >> '" + calls.string() + "'\n");
    // Like systemd-sysusers --root=ROOT CONFIG: the group appears in ROOT/etc/group.
    fs::path sysusers = dir.write("sysusers", "#!/bin/sh\necho \"sysusers $*\" >> '" + calls.string() +
                                                  "'\nroot=${1#--root=}\nmkdir -p \"$root/etc\"\n"
                                                  "echo 'gpupool-coordinator:x:4242:' > \"$root/etc/group\"\n");
    FakeTools() {
        fs::permissions(systemctl, fs::perms::owner_all);
        fs::permissions(sysusers, fs::perms::owner_all);
    }
    std::vector<std::string> hidden() const {
        return {"--root", root.string(), "--systemctl", systemctl.string(), "--sysusers", sysusers.string()};
    }
    std::string logged() const { return fs::exists(calls) ? test::slurp(calls) : std::string(); }
};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

} // namespace

TEST_CASE("coordinator install CLI: installs, tells where the admin token will be, refuses changes without --force",
          "[coordinator-install-cli]") {
    FakeTools t;
    auto certs = test::make_self_signed(t.dir.path(), "pool");
    const std::vector<std::string> install{"coordinator", "install",           "--listen",  "0.0.0.0:7443",
                                           "--tls-cert",  certs.cert.string(), "--tls-key", certs.key.string()};
    auto first = test::run_gpupool(with(install, t.hidden()));
    INFO(first.out << first.err);
    REQUIRE(first.exit_code == 0);
    CHECK(t.logged() == "sysusers --root=" + t.root.string() + " " +
                            (t.root / "etc/sysusers.d/gpupool-coordinator.conf").string() +
                            "\nsystemctl daemon-reload\nsystemctl enable --now gpupool-coordinator.service\n");
    CHECK_THAT(first.out, Catch::Contains("wrote     /etc/systemd/system/gpupool-coordinator.service"));
    CHECK_THAT(first.out, Catch::Contains("wrote     /etc/gpupool/coordinator/tls-key.pem"));
    CHECK_THAT(first.out, Catch::Contains("sudo cat /var/lib/gpupool-coordinator/admin.token"));
    CHECK_THAT(first.out, Catch::Contains("--new-admin-token"));
    const std::string unit = test::slurp(t.root / "etc/systemd/system/gpupool-coordinator.service");
    CHECK_THAT(unit, Catch::Contains("--listen 0.0.0.0:7443 --admin-token-file"));

    // Another port without --force: a usage error naming the unit; nothing run.
    fs::remove(t.calls);
    auto refused = test::run_gpupool(with({"coordinator", "install", "--listen", "0.0.0.0:8443", "--tls-cert",
                                           certs.cert.string(), "--tls-key", certs.key.string()},
                                          t.hidden()));
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("gpupool-coordinator.service: differs") && Catch::Contains("--force"));
    CHECK(t.logged().empty());
    CHECK(test::slurp(t.root / "etc/systemd/system/gpupool-coordinator.service") == unit);

    // --json: one document.
    auto again = test::run_gpupool(with(with({"--json"}, install), t.hidden()));
    REQUIRE(again.exit_code == 0);
    auto j = nlohmann::json::parse(again.out);
    CHECK(j["ok"] == true);
    CHECK(j["systemctl"] == nlohmann::json::array({"enable --now gpupool-coordinator.service"}));

    auto removed = test::run_gpupool(with({"coordinator", "uninstall"}, t.hidden()));
    INFO(removed.err);
    CHECK(removed.exit_code == 0);
    CHECK_THAT(removed.out, Catch::Contains("removed   /etc/systemd/system/gpupool-coordinator.service") &&
                                Catch::Contains("kept      /var/lib/gpupool-coordinator"));
    CHECK_FALSE(fs::exists(t.root / "etc/gpupool/coordinator/tls-key.pem"));
}

TEST_CASE("coordinator install CLI: --listen is required and checked", "[coordinator-install-cli]") {
    FakeTools t;
    auto none = test::run_gpupool(with({"coordinator", "install"}, t.hidden()));
    CHECK(none.exit_code == 2);
    CHECK_THAT(none.err, Catch::Contains("--listen"));
    auto zero = test::run_gpupool(with({"coordinator", "install", "--listen", "0.0.0.0:0"}, t.hidden()));
    CHECK(zero.exit_code == 2);
    CHECK_THAT(zero.err, Catch::Contains("port from 1 to 65535"));
    CHECK(t.logged().empty());
}

} // namespace test_coordinator_install_cli
} // namespace
