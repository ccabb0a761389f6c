#include "cmd/coordinator_install.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "cmd/worker_install.hpp"
#include "worker/install/coordinator_installer.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace gpupool::cmd {

namespace {

namespace fs = std::filesystem;

Result<worker::CoordinatorPaths> paths_for(const CoordinatorInstallOptions& o) {
    if (o.root == "/" && ::geteuid() != 0) {
        return make_error(ErrorCode::invalid_input,
                          "the coordinator service is system-wide: it writes /etc, makes a system user and runs "
                          "systemctl: run this as root (sudo)");
    }
    return worker::coordinator_paths(o.root);
}

// Where the operator finds the first admin token, and how to make another.
void print_next_steps(const worker::CoordinatorPaths& paths, const std::string& binary) {
    const std::string db = paths.db.string();
    std::cout << "The coordinator runs as the service gpupool-coordinator: `systemctl status gpupool-coordinator`, "
                 "its log: `journalctl -u gpupool-coordinator -f`.\n"
              << "A new pool's admin token is written once, on the first start, to " << paths.admin_token.string()
              << " (0600, never to the journal):\n"
              << "  sudo cat " << paths.admin_token.string() << "   # keep it somewhere safe, then: sudo rm "
              << paths.admin_token.string() << "\n"
              << "Lost it? With the service stopped, as its user: sudo systemctl stop gpupool-coordinator && sudo -u "
              << worker::k_coordinator_user << " " << binary << " coordinator --db " << db
              << " --new-admin-token && sudo systemctl start gpupool-coordinator\n"
              << "Renewed certificate: copy it over " << paths.tls_cert.string() << " and " << paths.tls_key.string()
              << ", then `sudo systemctl reload gpupool-coordinator` (docs/operating.md).\n";
}

} // namespace

int run_coordinator_install(const GlobalOptions& global, const CoordinatorInstallOptions& o) {
    auto paths = paths_for(o);
    if (!paths) {
        report_error(global, paths.error());
        return k_exit_usage;
    }
    if (o.listen.empty()) {
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "install needs the address to serve on: --listen HOST:PORT (like "
                                        "0.0.0.0:7443)",
                                        "--listen"));
        return k_exit_usage;
    }
    worker::CoordinatorInstallOptions io;
    io.paths = *paths;
    io.listen = o.listen;
    if (!o.tls_cert.empty()) {
        io.tls_cert = fs::absolute(o.tls_cert).lexically_normal();
    }
    if (!o.tls_key.empty()) {
        io.tls_key = fs::absolute(o.tls_key).lexically_normal();
    }
    if (!o.metrics_token_file.empty()) {
        io.metrics_token = fs::absolute(o.metrics_token_file).lexically_normal();
    }
    io.metrics_listen = o.metrics_listen;
    io.binary = this_binary();
    io.force = o.force;
    io.dry_run = o.dry_run;
    worker::SystemctlCommand systemctl(o.systemctl, false, o.sysusers);
    worker::ServiceReport report;
    auto st = worker::install_coordinator(io, systemctl, report);
    if (st || !global.json) { // --json: one document on stdout, the error's when it failed
        print_service_report(global, report, st.has_value(), false);
    }
    if (!st) {
        report_error(global, st.error());
        return st.error().code == ErrorCode::conflict || st.error().code == ErrorCode::invalid_input ? k_exit_usage
                                                                                                     : k_exit_failed;
    }
    if (o.dry_run) {
        if (!global.json) {
            std::cout << "Nothing was changed (--dry-run): the checks passed, and the above is what install would "
                         "do.\n";
        }
        return k_exit_ok;
    }
    if (!global.json) {
        print_next_steps(*paths, io.binary.string());
    }
    return k_exit_ok;
}

int run_coordinator_uninstall(const GlobalOptions& global, const CoordinatorInstallOptions& o) {
    auto paths = paths_for(o);
    if (!paths) {
        report_error(global, paths.error());
        return k_exit_usage;
    }
    worker::SystemctlCommand systemctl(o.systemctl, false, o.sysusers);
    worker::ServiceReport report;
    auto st = worker::uninstall_coordinator(*paths, systemctl, report);
    if (st || !global.json) {
        print_service_report(global, report, st.has_value(), false);
    }
    if (!st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    return k_exit_ok;
}

void register_coordinator_install(Cli& cli, CLI::App* coordinator) {
    auto o = std::make_shared<CoordinatorInstallOptions>();
    CLI::App* install = coordinator->add_subcommand(
        "install", "Run the coordinator as a hardened systemd service: its user, unit and TLS files; enable and "
                   "start it");
    install->add_option("--listen", o->listen, "HOST:PORT to serve on (a port below 1024 keeps CAP_NET_BIND_SERVICE)");
    install->add_option("--tls-cert", o->tls_cert,
                        "PEM certificate (chain) to serve HTTPS with: copied for the service");
    install->add_option("--tls-key", o->tls_key, "PEM private key of --tls-cert: copied, readable by the service only");
    install->add_option("--metrics-token-file", o->metrics_token_file,
                        "The Prometheus scrape token (one line, 32+ characters): copied, readable by the service "
                        "only; GET /metrics takes it besides admin tokens");
    install->add_option("--metrics-listen", o->metrics_listen,
                        "Also serve GET /metrics without a token on this loopback HOST:PORT");
    install->add_flag("--force", o->force, "Replace files an earlier install left that differ");
    install->add_flag("--dry-run", o->dry_run,
                      "Check what would make the service fail, then print every file, user and command install "
                      "would create; change nothing");
    CLI::App* uninstall = coordinator->add_subcommand(
        "uninstall", "Stop and disable the service, remove its unit and TLS copies (the database is kept)");
    for (CLI::App* c : {install, uninstall}) {
        c->add_option("--root", o->root, "Write under this directory instead of / (tests)")->group("");
        c->add_option("--systemctl", o->systemctl, "The systemctl program (tests)")->group("");
        c->add_option("--sysusers", o->sysusers, "The systemd-sysusers program (tests)")->group("");
        c->fallthrough();
    }
    install->callback([&cli, o] { cli.exit_code = run_coordinator_install(cli.global, *o); });
    uninstall->callback([&cli, o] { cli.exit_code = run_coordinator_uninstall(cli.global, *o); });
    add_help_footer(install,
                    "sudo gpupool coordinator install --listen 0.0.0.0:7443 --tls-cert fullchain.pem --tls-key "
                    "privkey.pem",
                    "docs/operating.md (Installing the coordinator as a service)", Reach::local);
    add_help_footer(uninstall, "sudo gpupool coordinator uninstall",
                    "docs/operating.md (Installing the coordinator as a service)", Reach::local);
}

} // namespace gpupool::cmd
