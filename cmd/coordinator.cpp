#include "cmd/cli_app.hpp"
#include "core/coordinator/service.hpp"
#include "core/credits/catalog.hpp"
#include "core/resources/quantity.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>

namespace gpupool::cmd {

struct CoordinatorCmdOptions {
    std::string listen = "127.0.0.1:7070";
    std::string db = "gpupool.db";
    std::string tls_cert;
    std::string tls_key;
    std::string lease = "30s";
    std::string port_file;
    std::string policy = "fgd";
    std::int64_t tick_ms = 250;
    std::string gpu_catalog; // empty: the embedded core/resources/gpus.toml
    std::string pool_fee = "0"; // percent of each charge
    std::string credits = "enforce"; // or "record"
    std::string settle = "24h";      // owners' earnings wait this long (voidable) before payout
    std::int64_t max_log_mib = 64;   // per attempt; 0 = no cap
    std::int64_t max_log_limit_mib = 1024; // what a recipe's [logs] max_size may ask for; 0 = no limit
    std::size_t max_connections_per_client = 512;
    bool new_admin_token = false;
};

namespace {

Result<std::pair<std::string, std::uint16_t>> parse_listen(const std::string& s) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon + 1 == s.size()) {
        return make_error(ErrorCode::invalid_input, "expected HOST:PORT, like 0.0.0.0:7070", "--listen");
    }
    std::string host = s.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    int port = 0;
    try {
        port = std::stoi(s.substr(colon + 1));
    } catch (const std::exception&) {
        port = -1;
    }
    if (port < 0 || port > 65535) {
        return make_error(ErrorCode::invalid_input, "port must be 0-65535", "--listen");
    }
    return std::make_pair(host, static_cast<std::uint16_t>(port));
}

} // namespace

// `coordinator --new-admin-token`: the recovery for a lost admin token, by whoever can open the
// database file, while the coordinator is stopped.
int run_new_admin_token(const GlobalOptions& global, const CoordinatorCmdOptions& o) {
    auto tok = coordinator::recover_admin_token(o.db);
    if (!tok) {
        report_error(global, tok.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << nlohmann::json{{"id", tok->id}, {"token", tok->secret}, {"role", "admin"}}.dump() << std::endl;
    } else {
        std::cerr << "new admin token " << tok->id << " for " << o.db
                  << " (shown once; revoke the lost one with `gpupool admin token revoke ID`):" << std::endl;
        std::cout << tok->secret << std::endl;
    }
    return k_exit_ok;
}

int run_coordinator(const GlobalOptions& global, const CoordinatorCmdOptions& o) {
    if (o.new_admin_token) {
        return run_new_admin_token(global, o);
    }
    auto listen = parse_listen(o.listen);
    if (!listen) {
        report_error(global, listen.error());
        return k_exit_usage;
    }
    auto lease_s = resources::parse_duration_s(o.lease);
    if (!lease_s) {
        Error e = lease_s.error();
        e.field = "--lease";
        report_error(global, e);
        return k_exit_usage;
    }
    auto scorer = sched::parse_scorer(o.policy);
    if (!scorer) {
        Error e = scorer.error();
        e.field = "--policy";
        report_error(global, e);
        return k_exit_usage;
    }
    if (o.tls_cert.empty() != o.tls_key.empty()) {
        report_error(global, make_error(ErrorCode::invalid_input, "--tls-cert and --tls-key go together", "--tls-cert"));
        return k_exit_usage;
    }
    std::int64_t settle_s = 0;
    if (o.settle != "0") {
        auto parsed = resources::parse_duration_s(o.settle);
        if (!parsed) {
            Error e = parsed.error();
            e.field = "--settle";
            report_error(global, e);
            return k_exit_usage;
        }
        settle_s = *parsed;
    }
    coordinator::ServiceOptions so;
    so.http.host = listen->first;
    so.http.port = listen->second;
    so.http.tls_cert_file = o.tls_cert;
    so.http.tls_key_file = o.tls_key;
    so.db_path = o.db;
    so.coordinator.lease_ms = *lease_s * 1000;
    so.coordinator.worker_timeout_ms = *lease_s * 1000;
    so.coordinator.policy.placement.scorer = *scorer;
    so.tick = std::chrono::milliseconds(o.tick_ms);
    so.coordinator.credits.enforce = o.credits == "enforce";
    so.coordinator.credits.settle_ms = settle_s * 1000;
    so.coordinator.max_log_bytes = o.max_log_mib * 1024 * 1024;
    so.coordinator.max_log_limit_bytes = o.max_log_limit_mib * 1024 * 1024;
    so.http.max_connections_per_client = o.max_connections_per_client;
    if (!o.gpu_catalog.empty()) {
        std::ifstream in(o.gpu_catalog);
        if (!in) {
            report_error(global, make_error(ErrorCode::io, "cannot read `" + o.gpu_catalog + "`", "--gpu-catalog"));
            return k_exit_usage;
        }
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        auto rates = credits::parse_rate_catalog(text, o.gpu_catalog);
        if (!rates) {
            report_error(global, rates.error());
            return k_exit_usage;
        }
        so.coordinator.credits.rates = std::move(*rates);
    }
    auto fee = credits::parse_credits(o.pool_fee); // a percent, exact to 6 decimals
    if (!fee || *fee > 100 * credits::k_micro_per_credit) {
        report_error(global, make_error(ErrorCode::invalid_input, "expected a percentage from 0 to 100", "--pool-fee"));
        return k_exit_usage;
    }
    so.coordinator.credits.pool_fee_ppm = *fee / 100; // percent x 10^6 / 100 = parts per million

    // Block the stop signals in every thread; this one waits for them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    coordinator::CoordinatorService service(so);
    std::string admin_token;
    if (auto st = service.start(&admin_token); !st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    const std::string scheme = o.tls_cert.empty() ? "http" : "https";
    const std::string url = scheme + "://" + listen->first + ":" + std::to_string(service.port());
    if (!o.port_file.empty()) {
        std::ofstream(o.port_file) << service.port() << '\n';
    }
    spdlog::info("coordinator started: {} (store {}, policy {}, lease {}, credits {}, pool fee {}%, settle {})", url,
                 o.db, o.policy, o.lease, o.credits, o.pool_fee, o.settle);
    if (global.json) {
        nlohmann::json j = {{"url", url}, {"port", service.port()}, {"db", o.db}};
        if (!admin_token.empty()) {
            j["admin_token"] = admin_token;
        }
        std::cout << j.dump() << std::endl;
    } else {
        std::cout << "gpupool coordinator listening on " << url << " (store " << o.db << ")" << std::endl;
        if (!admin_token.empty()) {
            std::cout << "admin token (shown once, keep it safe): " << admin_token << std::endl;
        }
    }
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: shutting down", sig);
    service.stop();
    return k_exit_ok;
}

void register_coordinator(Cli& cli) {
    auto o = std::make_shared<CoordinatorCmdOptions>();
    CLI::App* sub = add_command(cli, "coordinator", "Run the pool's coordinator: HTTP API, scheduler, SQLite store");
    add_help_footer(sub,
                    "gpupool coordinator --db pool.db --listen 0.0.0.0:7070 --tls-cert cert.pem --tls-key key.pem\n"
                    "gpupool coordinator --db pool.db --new-admin-token   # with the coordinator stopped",
                    "README.md (What works today), docs/security.md, docs/credits.md, docs/api.md", Reach::local);
    sub->add_option("--listen", o->listen, "HOST:PORT to serve on (port 0 picks a free one)")->capture_default_str();
    sub->add_option("--db", o->db, "SQLite file (created on first start)")->capture_default_str();
    sub->add_option("--tls-cert", o->tls_cert, "PEM certificate: serve HTTPS");
    sub->add_option("--tls-key", o->tls_key, "PEM private key of --tls-cert");
    sub->add_option("--lease", o->lease, "How long an attempt survives without a heartbeat")->capture_default_str();
    sub->add_option("--policy", o->policy, "Placement policy: fgd, bestfit, packing, random")->capture_default_str();
    sub->add_option("--port-file", o->port_file, "Write the bound port to this file once listening");
    sub->add_option("--tick-ms", o->tick_ms, "Scheduling and lease-check period")->capture_default_str();
    sub->add_option("--gpu-catalog", o->gpu_catalog, "GPU rate catalog TOML (default: the embedded core/resources/gpus.toml)");
    sub->add_option("--pool-fee", o->pool_fee, "Percent of each charge kept by the pool-fee account")->capture_default_str();
    sub->add_option("--credits", o->credits,
                    "enforce: jobs wait for funds and unaffordable submissions are refused; record: charges are "
                    "recorded (balances may go negative) but nothing waits")
        ->capture_default_str()
        ->check(CLI::IsMember({"enforce", "record"}));
    sub->add_flag("--new-admin-token", o->new_admin_token,
                  "Print a new admin token for --db and exit (a lost admin token's recovery; the coordinator must "
                  "be stopped)");
    sub->add_option("--settle", o->settle,
                    "How long an owner's earnings for a job wait before they are paid out, so an admin who bans "
                    "a lying worker can void its results (`admin ban --void-since`); 0: at once")
        ->capture_default_str();
    sub->add_option("--max-log-mib", o->max_log_mib,
                    "Log kept per attempt: past it, the first MiB and the latest bytes (0: no cap)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{100'000}))
        ->capture_default_str();
    sub->add_option("--max-log-limit-mib", o->max_log_limit_mib,
                    "The most log per attempt a recipe may keep with [logs] max_size (0: no limit)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{64 * 1024}))
        ->capture_default_str();
    sub->add_option("--max-connections-per-client", o->max_connections_per_client,
                    "Open connections one address may hold (workers behind one NAT share one; 0: no cap)")
        ->capture_default_str();
    sub->callback([&cli, o] { cli.exit_code = run_coordinator(cli.global, *o); });
}

} // namespace gpupool::cmd
