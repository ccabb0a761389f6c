// `gpupool coordinator`: the pool's coordinator as a process (run_coordinator), and its recovery of
// a lost admin token (--new-admin-token).
#include "cmd/coordinator.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/coordinator_install.hpp"
#include "cmd/secret_file.hpp"
#include "core/coordinator/restore.hpp"
#include "core/coordinator/service.hpp"
#include "core/credits/catalog.hpp"
#include "core/net/loopback.hpp"
#include "core/net/open_files.hpp"
#include "core/resources/quantity.hpp"
#include "core/sched/placement.hpp"
#include "core/store/open_store.hpp"
#include "core/util/files.hpp"
#include "core/util/sha256.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <array>
#include <cctype>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace gpupool::cmd {

namespace {

Result<std::pair<std::string, std::uint16_t>> parse_listen(const std::string& s) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon + 1 == s.size()) {
        return make_error(ErrorCode::invalid_input, "expected HOST:PORT, like 0.0.0.0:7070", "--listen");
    }
    std::string host = net::listen_host(s);
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

// --metrics-token-file and --metrics-listen into the service's options.
Status metrics_options(const CoordinatorCmdOptions& o, coordinator::ServiceOptions& so) {
    if (!o.metrics_token_file.empty()) {
        auto token = read_secret_file(o.metrics_token_file, "--metrics-token-file");
        if (!token) {
            return token.error();
        }
        if (token->size() < 32 || token->find_first_of(" \t") != std::string::npos) {
            return make_error(ErrorCode::invalid_input,
                              "the scrape token must be one line of at least 32 characters (e.g. `openssl rand "
                              "-hex 32`)",
                              "--metrics-token-file");
        }
        so.metrics_token_sha256 = util::sha256_hex(*token);
    }
    if (!o.metrics_listen.empty()) {
        auto listen = parse_listen(o.metrics_listen);
        if (!listen) {
            Error e = listen.error();
            e.field = "--metrics-listen";
            return e;
        }
        if (!net::is_loopback_host(listen->first)) {
            return make_error(ErrorCode::invalid_input,
                              "serves metrics without a token, so only on a loopback address (127.0.0.1, ::1, "
                              "localhost); elsewhere use --metrics-token-file",
                              "--metrics-listen");
        }
        net::ServerOptions mo;
        mo.host = listen->first;
        mo.port = listen->second;
        so.metrics_listener = mo;
    }
    return {};
}

// --advertise and --takeover-after: how this coordinator shares a PostgreSQL store with others.
Status standby_options(const CoordinatorCmdOptions& o, coordinator::ServiceOptions& so) {
    auto takeover_s = resources::parse_duration_s(o.takeover_after);
    if (!takeover_s || *takeover_s < 1 || *takeover_s > 600) {
        return make_error(ErrorCode::invalid_input, "expected a duration from 1s to 10m, like 6s", "--takeover-after");
    }
    so.standby.takeover_after = std::chrono::seconds(*takeover_s);
    const std::string& advertise = o.advertise; // empty: the service makes it from --listen and its port
    if (!advertise.empty() && !advertise.starts_with("http://") && !advertise.starts_with("https://")) {
        return make_error(ErrorCode::invalid_input,
                          "expected the URL clients reach this coordinator at, like https://coord-2.example.org:7070",
                          "--advertise");
    }
    if (advertise.empty() && (so.http.host == "0.0.0.0" || so.http.host == "::")) {
        // Listening everywhere: clients sent here by a standby need a name, the machine's.
        std::array<char, 256> name{};
        if (gethostname(name.data(), name.size() - 1) == 0) {
            so.standby.advertise = std::string(o.tls_cert.empty() ? "http" : "https") + "://" + name.data() + ":" +
                                   std::to_string(so.http.port);
        }
        return {};
    }
    so.standby.advertise = advertise;
    return {};
}

// A duration flag where "0" means none: its seconds, or the parse error naming `flag`.
Result<std::int64_t> duration_or_zero_s(const std::string& text, const char* flag) {
    if (text == "0") {
        return std::int64_t{0};
    }
    auto parsed = resources::parse_duration_s(text);
    if (!parsed) {
        Error e = parsed.error();
        e.field = flag;
        return e;
    }
    return *parsed;
}

// --dist DIR: the files handed out to GPU owners, read and hashed once, now (dist.hpp).
Status dist_options(const CoordinatorCmdOptions& o, coordinator::ServiceOptions& so) {
    if (o.dist.empty()) {
        return {};
    }
    std::vector<std::string> warnings;
    auto dist = coordinator::DistFiles::open(std::filesystem::absolute(o.dist), warnings);
    if (!dist) {
        return dist.error();
    }
    for (const auto& w : warnings) {
        spdlog::warn("{}", w);
    }
    std::string names;
    for (const auto& f : (*dist)->files()) {
        names += (names.empty() ? "" : ", ") + f.name;
    }
    spdlog::info("--dist {}: serving {} to GPU owners at /dist/ (with SHA256SUMS and install.sh)", o.dist,
                 names.empty() ? "no file (none is named gpupool-VERSION-linux-ARCH)" : names);
    so.dist = std::move(*dist);
    return {};
}

// The service's options from the command line's (every error here is a usage error).
Result<coordinator::ServiceOptions> service_options(const CoordinatorCmdOptions& o) {
    auto listen = parse_listen(o.listen);
    if (!listen) {
        return listen.error();
    }
    auto lease_s = resources::parse_duration_s(o.lease);
    if (!lease_s) {
        Error e = lease_s.error();
        e.field = "--lease";
        return e;
    }
    auto scorer = sched::parse_scorer(o.policy);
    if (!scorer) {
        Error e = scorer.error();
        e.field = "--policy";
        return e;
    }
    if (o.tls_cert.empty() != o.tls_key.empty()) {
        return make_error(ErrorCode::invalid_input, "--tls-cert and --tls-key go together", "--tls-cert");
    }
    auto settle_s = duration_or_zero_s(o.settle, "--settle");
    if (!settle_s) {
        return settle_s.error();
    }
    auto idle_s = duration_or_zero_s(o.idle_timeout, "--idle-timeout");
    if (!idle_s) {
        return idle_s.error();
    }
    auto members_see = coordinator::members_see_from_string(o.members_see);
    if (!members_see) {
        return make_error(ErrorCode::invalid_input, "expected summary or full, got `" + o.members_see + "`",
                          "--members-see");
    }
    coordinator::ServiceOptions so;
    so.coordinator.members_see = *members_see;
    so.coordinator.public_recipe_repos = o.public_recipe_repos;
    so.coordinator.spot_checks.fraction = o.verify_fraction;
    so.coordinator.spot_check_seed = o.verify_seed;
    so.coordinator.idle_timeout_s = *idle_s;
    so.coordinator.whole_gpu_only_unenforced = o.whole_gpu_only_unenforced;
    so.http.host = listen->first;
    so.http.port = listen->second;
    so.http.tls_cert_file = o.tls_cert;
    so.http.tls_key_file = o.tls_key;
    if (auto spec = store::parse_store_spec(o.db); spec && spec->engine == store::Engine::sqlite) {
        // `admin backup` copies the pool beside it: where there is room for one.
        so.backup_dir = std::filesystem::absolute(spec->location).parent_path();
    }
    so.coordinator.lease_ms = *lease_s * 1000;
    so.coordinator.worker_timeout_ms = *lease_s * 1000;
    so.coordinator.policy.placement.scorer = *scorer;
    if (o.score_sample) {
        so.coordinator.policy.placement.sampling.scored = *o.score_sample;
    }
    so.tick = std::chrono::milliseconds(o.tick_ms);
    so.coordinator.sample_every_ms = o.sample_ms;
    so.coordinator.credits.enforce = o.credits == "enforce";
    so.coordinator.credits.settle_ms = *settle_s * 1000;
    so.coordinator.max_log_bytes = o.max_log_mib * 1024 * 1024;
    so.coordinator.max_log_limit_bytes = o.max_log_limit_mib * 1024 * 1024;
    so.http.max_connections_per_client = o.max_connections_per_client;
    auto body_mib = resources::parse_memory_mib(o.max_body_memory);
    if (!body_mib || *body_mib < 1) {
        return make_error(ErrorCode::invalid_input,
                          "expected a size of at least 1MiB, like \"256MiB\" or \"1GiB\", got `" + o.max_body_memory +
                              "`",
                          "--max-body-memory");
    }
    so.http.max_body_memory = static_cast<std::size_t>(*body_mib) << 20;
    if (!o.gpu_catalog.empty()) {
        std::ifstream in(o.gpu_catalog);
        if (!in) {
            return make_error(ErrorCode::io, "cannot read `" + o.gpu_catalog + "`", "--gpu-catalog");
        }
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        auto rates = credits::parse_rate_catalog(text, o.gpu_catalog);
        if (!rates) {
            return rates.error();
        }
        so.coordinator.credits.rates = std::move(*rates);
    }
    auto fee = credits::parse_credits(o.pool_fee); // a percent, exact to 6 decimals
    if (!fee || *fee > 100 * credits::k_micro_per_credit) {
        return make_error(ErrorCode::invalid_input, "expected a percentage from 0 to 100", "--pool-fee");
    }
    so.coordinator.credits.pool_fee_ppm = *fee / 100; // percent x 10^6 / 100 = parts per million
    if (auto st = metrics_options(o, so); !st) {
        return st.error();
    }
    if (auto st = standby_options(o, so); !st) {
        return st.error();
    }
    if (auto st = dist_options(o, so); !st) {
        return st.error();
    }
    return so;
}

// `coordinator --new-admin-token`: the recovery for a lost admin token, by whoever can open the
// database file, while the coordinator is stopped.
int run_new_admin_token(const GlobalOptions& global, const CoordinatorCmdOptions& o, const std::string& password) {
    auto tok = coordinator::recover_admin_token(o.db, password);
    if (!tok) {
        report_error(global, tok.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << nlohmann::json{{"id", tok->id.value()}, {"token", tok->secret}, {"role", "admin"}}.dump()
                  << std::endl;
    } else {
        std::cerr << "new admin token " << tok->id.value() << " for " << o.db
                  << " (shown once; revoke the lost one with `gpupool admin token revoke ID`):" << std::endl;
        std::cout << tok->secret << std::endl;
    }
    return k_exit_ok;
}

// `coordinator --restore FILE`: the backup is checked and put in place, then the coordinator starts.
int run_restore(const GlobalOptions& global, const CoordinatorCmdOptions& o) {
    auto report = coordinator::restore_pool({o.restore, o.db, o.force_restore});
    if (!report) {
        report_error(global, report.error());
        // A refusal that --force-restore overrides is a usage error; a pool held by a running
        // coordinator (unavailable: store::lock_database) fails as every lock conflict does
        // (CONTRIBUTING.md).
        return report.error().code == ErrorCode::conflict ? k_exit_usage : k_exit_failed;
    }
    const auto& r = report->restored;
    spdlog::info("restored {} over {}: {} teams, {} tokens, {} workers, {} jobs, {} attempts, {} ledger entries{}",
                 o.restore, o.db, r.teams, r.tokens, r.workers, r.jobs, r.attempts, r.ledger_entries,
                 report->replaced ? " (replaced a pool with " + std::to_string(report->replaced->jobs) + " jobs)"
                                  : std::string());
    return k_exit_ok;
}

// The first admin token into `file` (0600) instead of stdout, for a service whose output is a
// journal that others read. If the file cannot be written the token is lost (the pool has it):
// the message says how to make another.
Status write_admin_token(const std::string& file, const std::string& token) {
    if (auto st = util::write_private_file(file, token + "\n"); !st) {
        Error e = st.error();
        e.message = "the new pool's admin token could not be written (" + e.message +
                    "); stop the coordinator and make another with `gpupool coordinator --db DB --new-admin-token`";
        e.field = "--admin-token-file";
        return e;
    }
    spdlog::warn("a new pool: its admin token is in {} (0600); keep it somewhere safe and delete the file", file);
    return {};
}

// Waits for SIGINT or SIGTERM; each SIGHUP in between reloads the TLS files (without TLS it is
// only logged). A failed reload keeps the certificate served so far.
void wait_for_stop(const sigset_t& signals, coordinator::CoordinatorService& service, const CoordinatorCmdOptions& o) {
    while (true) {
        int sig = 0;
        if (sigwait(&signals, &sig) != 0) {
            continue;
        }
        if (sig != SIGHUP) {
            spdlog::info("signal {}: shutting down", sig);
            return;
        }
        if (o.tls_cert.empty()) {
            spdlog::info("SIGHUP: nothing to reload (no --tls-cert)");
            continue;
        }
        if (auto st = service.reload_tls(); !st) {
            spdlog::error("SIGHUP: TLS reload failed, still serving the previous certificate: {}", st.error().message);
        } else {
            spdlog::info("SIGHUP: reloaded the TLS certificate {} and key {}; new connections use them", o.tls_cert,
                         o.tls_key);
        }
    }
}

// Open files: the soft limit raised to the hard one (one descriptor per connection: a pool's workers
// each keep a long poll open), and the connections served sized within it. An explicit
// --max-connections is kept, with a warning when the limit cannot hold it.
void size_connections(const CoordinatorCmdOptions& o, net::ServerOptions& http) {
    const net::OpenFilesLimit files = net::raise_open_files_limit();
    const std::size_t room = net::connections_within(files.now);
    http.max_connections = o.max_connections != 0 ? o.max_connections : room;
    spdlog::info("open files: at most {} (soft limit was {}, hard limit {}); serving at most {} connections at once",
                 files.now, files.before, files.hard, http.max_connections);
    if (http.max_connections > room) {
        spdlog::warn("--max-connections {} is more than {} open files hold ({} kept for the database and uploads): "
                     "past {} connections, new ones wait unanswered; raise the hard limit (LimitNOFILE=)",
                     http.max_connections, files.now, net::k_reserved_files, room);
    }
}

} // namespace

int run_coordinator(const GlobalOptions& global, const CoordinatorCmdOptions& o) {
    auto spec = store::parse_store_spec(o.db);
    if (!spec) {
        report_error(global, spec.error());
        return k_exit_usage;
    }
    std::string password;
    if (!o.db_password_file.empty()) {
        auto secret = read_secret_file(o.db_password_file, "--db-password-file");
        if (!secret) {
            report_error(global, secret.error());
            return k_exit_usage;
        }
        password = std::move(*secret);
    }
    if (o.new_admin_token) {
        return run_new_admin_token(global, o, password);
    }
    auto so = service_options(o);
    if (!so) {
        report_error(global, so.error());
        return k_exit_usage;
    }
    if (o.restore_only && o.restore.empty()) {
        report_error(global, make_error(ErrorCode::invalid_input, "goes with --restore FILE", "--restore-only"));
        return k_exit_usage;
    }
    if (!o.restore.empty()) {
        if (int code = run_restore(global, o); code != k_exit_ok || o.restore_only) {
            return code;
        }
    }
    // Block the stop signals and SIGHUP (reload the TLS files) in every thread; this one waits for them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    size_connections(o, so->http);
    store::OpenOptions oo;
    oo.password = password;
    oo.sqlite_checkpoint_delay = std::chrono::milliseconds(o.sqlite_checkpoint_ms);
    auto opened = store::open_store(*spec, oo);
    if (!opened) {
        report_error(global, opened.error());
        return k_exit_failed;
    }
    coordinator::CoordinatorService service(*so, std::move(*opened), coordinator::system_clock());
    std::string admin_token;
    if (auto st = service.start(&admin_token); !st) {
        report_error(global, st.error());
        return k_exit_failed;
    }
    const std::string scheme = o.tls_cert.empty() ? "http" : "https";
    const std::string url = scheme + "://" + so->http.host + ":" + std::to_string(service.port());
    if (!service.active()) {
        spdlog::info("coordinator standing by on {}: the pool ({}) is served by {}; taking over when it stops", url,
                     o.db, service.active_address());
    }
    spdlog::info("coordinator started: {} (store {}, policy {}, lease {}, credits {}, pool fee {}%, settle {})", url,
                 o.db, o.policy, o.lease, o.credits, o.pool_fee, o.settle);
    if (service.metrics_port() != 0) {
        spdlog::info("metrics (no token) on http://{}:{}/metrics", so->metrics_listener->host, service.metrics_port());
    }
    if (!admin_token.empty() && !o.admin_token_file.empty()) {
        if (auto st = write_admin_token(o.admin_token_file, admin_token); !st) {
            report_error(global, st.error());
            service.stop();
            return k_exit_failed;
        }
    }
    if (global.json) {
        nlohmann::json j = {{"url", url}, {"port", service.port()}, {"db", o.db}, {"active", service.active()}};
        if (!admin_token.empty() && o.admin_token_file.empty()) {
            j["admin_token"] = admin_token;
        }
        std::cout << j.dump() << std::endl;
    } else {
        std::cout << "gpupool coordinator listening on " << url << " (store " << o.db << ")"
                  << (service.active() ? "" : "; standing by, the pool is served by " + service.active_address())
                  << std::endl;
        if (!admin_token.empty() && o.admin_token_file.empty()) {
            std::cout << "admin token (shown once, keep it safe): " << admin_token << std::endl;
        }
    }
    // Last, and whole at once: whoever waits for this file finds the banner and token printed.
    if (!o.port_file.empty()) {
        if (auto st = util::write_private_file(o.port_file, std::to_string(service.port()) + "\n"); !st) {
            report_error(global, st.error());
            service.stop();
            return k_exit_failed;
        }
    }
    wait_for_stop(signals, service, o);
    service.stop();
    return k_exit_ok;
}

namespace {

// Where it listens and keeps the pool: the address, the store and TLS.
void add_store_options(CLI::App* sub, CoordinatorCmdOptions& o) {
    sub->add_option("--listen", o.listen, "HOST:PORT to serve on (port 0 picks a free one)")->capture_default_str();
    sub->add_option("--db", o.db,
                    "The pool's store: a SQLite file, as a path or sqlite:PATH (created on first start), or a "
                    "PostgreSQL database, postgresql://USER@HOST/DB (no password in it)")
        ->capture_default_str();
    sub->add_option("--db-password-file", o.db_password_file,
                    "PostgreSQL: the password, one line (else PGPASSWORD or ~/.pgpass)");
    sub->add_option("--advertise", o.advertise,
                    "PostgreSQL: this coordinator's URL as clients reach it; standbys send clients there (default: "
                    "from --listen)");
    sub->add_option("--takeover-after", o.takeover_after,
                    "PostgreSQL: a standby coordinator takes over this long after the active one stops renewing "
                    "its lease")
        ->capture_default_str();
    sub->add_option("--tls-cert", o.tls_cert, "PEM certificate: serve HTTPS");
    sub->add_option("--tls-key", o.tls_key, "PEM private key of --tls-cert (both are read again on SIGHUP)");
}

// What it hands out, and the secrets it writes or reads: the static files, the first admin
// token, the metrics' access.
void add_handout_options(CLI::App* sub, CoordinatorCmdOptions& o) {
    sub->add_option("--dist", o.dist,
                    "Hand out the static gpupool files found in DIR (gpupool-VERSION-linux-ARCH, from make static; "
                    "and ca.pem, the pool's CA) to GPU owners, without a token, at /dist/ with SHA256SUMS and an "
                    "install script: `admin enroll` then prints the one command an owner runs (docs/static.md)");
    sub->add_option("--admin-token-file", o.admin_token_file,
                    "A new pool's first admin token goes to this file (0600) instead of stdout (for a service whose "
                    "output goes to a journal)");
    sub->add_option("--metrics-token-file", o.metrics_token_file,
                    "GET /metrics (Prometheus) also takes `Authorization: Bearer` with the secret in this file "
                    "(one line, 32+ characters), besides admin tokens");
    sub->add_option("--metrics-listen", o.metrics_listen,
                    "Also serve GET /metrics, without a token, on this loopback HOST:PORT (for a Prometheus on "
                    "the same machine)");
}

// How the pool is run: leases, idle GPUs, placement and what members see.
void add_policy_options(CLI::App* sub, CoordinatorCmdOptions& o) {
    sub->add_option("--lease", o.lease, "How long an attempt survives without a heartbeat")->capture_default_str();
    sub->add_option("--idle-timeout", o.idle_timeout,
                    "A GPU job that holds its share without using the GPU this long is stopped and charged for the "
                    "time it held (a recipe's resources.idle_timeout overrides it; 0: never)")
        ->capture_default_str();
    sub->add_flag("--whole-gpu-only-unenforced", o.whole_gpu_only_unenforced,
                  "Place only whole-GPU jobs on GPUs whose workers cannot enforce a fractional share (memory "
                  "enforcement `none`)");
    sub->add_option("--members-see", o.members_see,
                    "What members see of each GPU's use in the pool overview (`gpupool pool`, the dashboard): "
                    "summary (their own team's use, the pool's totals) or full (every team's use, as admins)")
        ->capture_default_str();
    sub->add_option("--public-recipe-repo", o.public_recipe_repos,
                    "A recipe repository (as clients configure it) whose runs every team may count in `recipe "
                    "list`; other repositories' history is each team's own (repeatable)");
    sub->add_option("--verify-fraction", o.verify_fraction,
                    "Spot checks (docs/evidence.md): run this share of succeeded results again on another owner's "
                    "worker, paid from the pool fee, and quarantine workers whose results disagree (0: off; a "
                    "worker's first checks are sampled up to 5x as often)")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    sub->add_option("--verify-seed", o.verify_seed, "Seed of the spot checks' draws (0: random; for tests)")->group("");
    sub->add_option("--policy", o.policy, "Placement policy: fgd, bestfit, packing, random")->capture_default_str();
    const sched::Sampling sampling;
    sub->add_option("--score-sample", o.score_sample,
                    "In pools of more than " + std::to_string(sampling.all_up_to) +
                        " workers, score each job on this many workers that fit it, from a random place in the "
                        "pool, instead of on all (0: all; default " +
                        std::to_string(sampling.scored) + ")");
}

// The process's own rhythm: the port file, the scheduling tick, SQLite's checkpoints, the
// dashboard's samples.
void add_process_options(CLI::App* sub, CoordinatorCmdOptions& o) {
    sub->add_option("--port-file", o.port_file, "Write the bound port to this file once listening");
    sub->add_option("--tick-ms", o.tick_ms, "Scheduling and lease-check period")->capture_default_str();
    sub->add_option("--sqlite-checkpoint-ms", o.sqlite_checkpoint_ms,
                    "SQLite: copy the write-ahead log into the database on a thread of its own this long after a "
                    "commit, so that commits do not wait for it (0: SQLite's own checkpoints, on the coordinator "
                    "thread)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{60'000}))
        ->capture_default_str();
    // For tests (a chart with points in seconds); hidden from --help.
    sub->add_option("--sample-ms", o.sample_ms, "How often the pool is sampled for the dashboard's chart")
        ->check(CLI::Range(std::int64_t{100}, std::int64_t{3'600'000}))
        ->group("");
}

// Credits: the rate catalog, the pool's fee, enforcement, and when owners are paid.
void add_credit_options(CLI::App* sub, CoordinatorCmdOptions& o) {
    sub->add_option("--gpu-catalog", o.gpu_catalog,
                    "GPU rate catalog TOML (default: the embedded core/resources/gpus.toml)");
    sub->add_option("--pool-fee", o.pool_fee, "Percent of each charge kept by the pool-fee account")
        ->capture_default_str();
    sub->add_option("--credits", o.credits,
                    "enforce: jobs wait for funds and unaffordable submissions are refused; record: charges are "
                    "recorded (balances may go negative) but nothing waits")
        ->capture_default_str()
        ->check(CLI::IsMember({"enforce", "record"}));
    sub->add_option("--settle", o.settle,
                    "How long an owner's earnings for a job wait before they are paid out, so an admin who bans "
                    "a lying worker can void its results (`admin ban --void-since`); 0: at once")
        ->capture_default_str();
}

// Restoring a backup and recovering a lost admin token, instead of (or before) serving.
void add_recovery_options(CLI::App* sub, CoordinatorCmdOptions& o) {
    sub->add_option("--restore", o.restore,
                    "Put this backup (`gpupool admin backup FILE`) in place of --db, checked first, then start; "
                    "refused over a database that changed after the backup unless --force-restore");
    sub->add_flag("--force-restore", o.force_restore, "With --restore: replace --db even if it is newer");
    sub->add_flag("--restore-only", o.restore_only,
                  "With --restore: exit once the backup is in place instead of serving (for a coordinator that "
                  "runs as a service: restore while it is stopped, as its user, then start it)");
    sub->add_flag("--new-admin-token", o.new_admin_token,
                  "Print a new admin token for --db and exit (a lost admin token's recovery; the coordinator must "
                  "be stopped)");
}

// Limits on what clients may hold: logs per attempt, connections, request bodies in memory.
void add_limit_options(CLI::App* sub, CoordinatorCmdOptions& o) {
    sub->add_option("--max-log-mib", o.max_log_mib,
                    "Log kept per attempt: past it, the first MiB and the latest bytes (0: no cap)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{100'000}))
        ->capture_default_str();
    sub->add_option("--max-log-limit-mib", o.max_log_limit_mib,
                    "The most log per attempt a recipe may keep with [logs] max_size (0: no limit)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{64 * 1024}))
        ->capture_default_str();
    sub->add_option("--max-connections", o.max_connections,
                    "Open connections at once, every client's (each worker keeps one for its long poll); more are "
                    "closed as they come (0: as many as the open-files limit holds, which the coordinator raises "
                    "to its hard limit)")
        ->capture_default_str();
    sub->add_option("--max-connections-per-client", o.max_connections_per_client,
                    "Open connections one address may hold (workers behind one NAT share one; 0: no cap)")
        ->capture_default_str();
    sub->add_option("--max-body-memory", o.max_body_memory,
                    "Request bodies held in memory at once, all clients' together (\"256MiB\", \"1GiB\"); a body "
                    "that would go past it is told 503 with Retry-After before it is read")
        ->capture_default_str();
}

} // namespace

void register_coordinator(Cli& cli) {
    auto o = std::make_shared<CoordinatorCmdOptions>();
    CLI::App* sub =
        add_command(cli, "coordinator", "Run the pool's coordinator: HTTP API, scheduler, SQLite or PostgreSQL store");
    add_help_footer(sub,
                    "gpupool coordinator --db pool.db --listen 0.0.0.0:7070 --tls-cert cert.pem --tls-key key.pem\n"
                    "gpupool coordinator --db pool.db --new-admin-token   # with the coordinator stopped\n"
                    "gpupool coordinator --db postgresql://gpupool@db/gpupool --db-password-file db.pw "
                    "--advertise https://coord-1:7070   # and a standby with coord-2",
                    "README.md (What works today), docs/operating.md (Running on PostgreSQL), docs/api.md",
                    Reach::local);
    add_store_options(sub, *o);
    add_handout_options(sub, *o);
    add_policy_options(sub, *o);
    add_process_options(sub, *o);
    add_credit_options(sub, *o);
    add_recovery_options(sub, *o);
    add_limit_options(sub, *o);
    register_coordinator_install(cli, sub);
    sub->callback([&cli, o, sub] {
        if (sub->get_subcommands().empty()) { // not install, uninstall
            cli.exit_code = run_coordinator(cli.global, *o);
        }
    });
}

} // namespace gpupool::cmd
