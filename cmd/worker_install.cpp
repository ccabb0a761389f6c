#include "cmd/worker_install.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/config/client_config.hpp"
#include "worker/install/installer.hpp"
#include "worker/install/preflight.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace gpupool::cmd {

namespace {

namespace fs = std::filesystem;

Result<worker::ServicePaths> paths_for(const WorkerInstallOptions& o) {
    const auto scope = o.user ? worker::ServiceScope::user : worker::ServiceScope::system;
    if (!o.user && o.root == "/" && ::geteuid() != 0) {
        return make_error(ErrorCode::invalid_input,
                          "a system-wide service writes /etc and runs systemctl: run this as root (sudo), or install "
                          "it for yourself with --user",
                          "--user");
    }
    const char* home = std::getenv("HOME");
    return worker::service_paths(scope, o.root, home != nullptr ? home : "");
}

} // namespace

void print_service_report(const GlobalOptions& global, const worker::ServiceReport& r, bool ok, bool user) {
    if (global.json) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& s : r.steps) {
            steps.push_back({{"action", s.what}, {"path", s.path}, {"note", s.note}});
        }
        std::cout << nlohmann::json{{"ok", ok},
                                    {"dry_run", r.dry_run},
                                    {"files", steps},
                                    {"systemctl", r.systemctl},
                                    {"warnings", r.warnings}}
                         .dump(2)
                  << '\n';
        return;
    }
    for (const auto& s : r.steps) {
        std::cout << "  " << s.what << std::string(s.what.size() < 10 ? 10 - s.what.size() : 1, ' ')
                  << printable(s.path) << (s.note.empty() ? "" : "  (" + printable(s.note) + ")") << '\n';
    }
    for (const auto& c : r.systemctl) {
        std::cout << (r.dry_run ? "  would run " : "  ran       ")
                  << (c.starts_with("systemd-sysusers") ? ""
                      : user                            ? "systemctl --user "
                                                        : "systemctl ")
                  << c << '\n';
    }
    for (const auto& w : r.warnings) {
        std::cerr << "warning: " << printable(w) << '\n';
    }
}

std::filesystem::path this_binary() {
    std::error_code ec;
    auto p = fs::canonical("/proc/self/exe", ec);
    return ec ? fs::path() : p;
}

int run_worker_install(const GlobalOptions& global, const WorkerInstallOptions& o) {
    auto paths = paths_for(o);
    if (!paths) {
        report_error(global, paths.error());
        return k_exit_usage;
    }
    worker::InstallOptions io;
    io.paths = *paths;
    io.coordinator = o.coordinator.empty() && global.url ? *global.url : o.coordinator;
    io.token_source = global.token_file ? *global.token_file : o.token_file;
    if (io.coordinator.empty() || io.token_source.empty()) {
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "install needs the pool (--coordinator URL) and an enrollment token in a file "
                                        "(--token-file FILE, from `gpupool admin enroll TEAM`)",
                                        io.coordinator.empty() ? "--coordinator" : "--token-file"));
        return k_exit_usage;
    }
    if (!o.work_dir.empty()) {
        io.work_dir = fs::absolute(o.work_dir).lexically_normal();
    }
    io.runtime = o.runtime;
    io.binary = this_binary();
    io.force = o.force;
    io.as_root = o.as_root;
    io.dry_run = o.dry_run;
    worker::ServiceReport report;
    // What would make the service fail, before anything is written (preflight.hpp).
    auto token = config::read_token_file(io.token_source, "--token-file");
    if (!token) {
        report_error(global, token.error());
        return k_exit_usage;
    }
    worker::WorkerPreflight pre;
    pre.coordinator = io.coordinator;
    pre.token = *token;
    pre.ca_cert = global.ca_cert.value_or(std::string());
    pre.runtime = io.runtime;
    auto warnings = worker::preflight_worker(pre);
    if (!warnings) {
        report_error(global, warnings.error());
        return k_exit_failed;
    }
    report.warnings = *warnings;
    worker::SystemctlCommand systemctl(o.systemctl, o.user, o.sysusers);
    auto st = worker::install_service(io, systemctl, report);
    if (st || !global.json) { // --json: one document on stdout, the error's when it failed
        print_service_report(global, report, st.has_value(), o.user);
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
        std::ifstream written(paths->on_disk(paths->config));
        std::string line;
        std::cout << paths->config.string() << ":\n";
        while (std::getline(written, line)) {
            if (!line.starts_with("#")) {
                std::cout << "  " << printable(line) << '\n';
            }
        }
        const std::string u = o.user ? " --user" : "";
        std::cout << "The worker runs as the service gpupool-worker: `systemctl" << u
                  << " status gpupool-worker`, its log: `journalctl" << (o.user ? " --user" : "")
                  << " -u gpupool-worker -f`; settings in " << paths->config.string() << ".\n";
        if (o.user) {
            std::cout << "To keep it running while you are logged out: `loginctl enable-linger $USER`.\n";
        } else if (o.as_root) {
            std::cout << "It runs as root (--as-root): read the warning above.\n";
        } else {
            const std::string user(worker::k_worker_user);
            std::cout << "It runs as the system user " << user << ", not root"
                      << (o.runtime == "docker" ? " (in the group docker: root-equivalent, see the warning above)"
                                                : " (podman rootless)")
                      << ". The owner's controls: `sudo gpupool worker status --config " << paths->config.string()
                      << "`.\n";
        }
    }
    return k_exit_ok;
}

int run_worker_uninstall(const GlobalOptions& global, const WorkerInstallOptions& o) {
    auto paths = paths_for(o);
    if (!paths) {
        report_error(global, paths.error());
        return k_exit_usage;
    }
    std::error_code ec;
    if (!global.json && fs::exists(paths->on_disk(paths->unit), ec)) {
        std::cerr << "gpupool worker: stopping the service; the worker drains first (running jobs may finish, up to "
                     "its drain grace)"
                  << std::endl;
    }
    worker::SystemctlCommand systemctl(o.systemctl, o.user);
    worker::ServiceReport report;
    auto st = worker::uninstall_service({*paths, o.purge}, systemctl, report);
    if (st || !global.json) {
        print_service_report(global, report, st.has_value(), o.user);
    }
    if (!st) {
        report_error(global, st.error());
        return st.error().code == ErrorCode::invalid_input ? k_exit_usage : k_exit_failed;
    }
    return k_exit_ok;
}

void register_worker_install(Cli& cli, CLI::App* worker) {
    auto o = std::make_shared<WorkerInstallOptions>();
    CLI::App* install = worker->add_subcommand(
        "install", "Run the worker as a systemd service: write its config and unit, enable and start it");
    install->add_flag("--user", o->user, "The owner's own service (systemctl --user, rootless podman), not system-wide");
    install->add_option("--coordinator", o->coordinator, "The pool's coordinator URL (or the global --url)");
    install->add_option("--work-dir", o->work_dir,
                        "The spool (default /var/lib/gpupool/worker; --user: ~/.local/share/gpupool/worker)");
    install->add_option("--runtime", o->runtime, "How jobs run: podman or docker")
        ->check(CLI::IsMember({"podman", "docker"}))
        ->capture_default_str();
    install->add_flag("--force", o->force, "Replace settings an earlier install left that differ");
    install->add_flag("--dry-run", o->dry_run,
                      "Check what would make the service fail, then print every file, user and command install "
                      "would create; change nothing");
    install->add_flag("--as-root", o->as_root,
                      "Run the system-wide service as root, not as the system user gpupool-worker (dangerous: a job "
                      "that fools the worker acts as root)");
    CLI::App* uninstall = worker->add_subcommand(
        "uninstall", "Stop the service (the worker drains first), disable it and remove its unit and config");
    uninstall->add_flag("--user", o->user, "The owner's own service (systemctl --user)");
    uninstall->add_flag("--purge", o->purge, "Also remove the work dir (spooled results, the worker's identity)");
    for (CLI::App* c : {install, uninstall}) {
        c->add_option("--root", o->root, "Write under this directory instead of / (tests)")->group("");
        c->add_option("--systemctl", o->systemctl, "The systemctl program (tests)")->group("");
        c->add_option("--sysusers", o->sysusers, "The systemd-sysusers program (tests)")->group("");
        c->fallthrough();
    }
    install->callback([&cli, o] { cli.exit_code = run_worker_install(cli.global, *o); });
    uninstall->callback([&cli, o] { cli.exit_code = run_worker_uninstall(cli.global, *o); });
    add_help_footer(install,
                    "sudo gpupool worker install --coordinator https://pool.example.org:7443 --token-file enroll.token\n"
                    "gpupool worker install --user --coordinator https://pool.example.org:7443 --token-file "
                    "enroll.token",
                    "docs/worker.md (Running as a service)", Reach::coordinator);
    add_help_footer(uninstall, "sudo gpupool worker uninstall\ngpupool worker uninstall --user --purge",
                    "docs/worker.md (Running as a service)", Reach::local);
}

} // namespace gpupool::cmd
