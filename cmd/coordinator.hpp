// `gpupool coordinator`: its options and the function that runs it, callable without argv (tests);
// register_coordinator (cli.hpp) wires them to the command line.
#pragma once

#include "cmd/cli.hpp"
#include "core/store/wal_checkpointer.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::cmd {

struct CoordinatorCmdOptions {
    std::string listen = "127.0.0.1:7070";
    std::string db = "gpupool.db"; // a store spec: a SQLite path, sqlite:PATH or postgresql://... (store::open_store)
    std::string tls_cert;
    std::string tls_key;
    std::string lease = "30s";
    std::string port_file;
    std::string policy = "fgd";
    std::optional<std::size_t> score_sample; // workers scored per job in large pools (none: sched::Sampling's)
    std::int64_t tick_ms = 250;
    // Background WAL checkpoints this long after a commit; 0: SQLite's own.
    std::int64_t sqlite_checkpoint_ms = store::k_checkpoint_delay.count();
    std::int64_t sample_ms = 60'000; // the dashboard's utilisation samples (hidden --sample-ms: tests)
    std::string gpu_catalog; // empty: the embedded core/resources/gpus.toml
    std::string pool_fee = "0"; // percent of each charge
    std::string credits = "enforce"; // or "record"
    std::string settle = "24h";      // owners' earnings wait this long (voidable) before payout
    std::int64_t max_log_mib = 64;   // per attempt; 0 = no cap
    std::int64_t max_log_limit_mib = 1024; // what a recipe's [logs] max_size may ask for; 0 = no limit
    std::size_t max_connections_per_client = 64;
    std::string max_body_memory = "256MiB"; // request bodies in memory at once, all together
    std::size_t max_connections = 0; // connections at once; 0: as many as the open-files limit holds
    bool new_admin_token = false;
    std::string restore;        // a backup (`admin backup`) to put in place of --db before starting
    bool force_restore = false; // ... even over a database that changed after the backup
    bool restore_only = false;  // ... then exit instead of serving (a service restores while stopped)
    std::string admin_token_file; // a new pool's admin token goes here (0600), not to stdout
    std::string metrics_token_file; // GET /metrics also takes the secret in this file
    std::string metrics_listen;     // HOST:PORT on loopback: GET /metrics without a token
    std::string dist;               // a folder of static gpupool files handed out to owners (/dist/)
    std::string db_password_file;   // PostgreSQL: the password, one line (never in the URL)
    std::string advertise;          // this coordinator's URL for clients (default: from --listen)
    std::string takeover_after = "6s"; // a standby takes over this long after the active one stops
    std::string idle_timeout = "30m";  // a GPU job idle on its GPU this long is stopped ("0": never)
    bool whole_gpu_only_unenforced = false; // no fractional jobs on GPUs whose shares nothing enforces
    std::string members_see = "summary"; // or "full": how much of each GPU's use members see (GET /v1/pool)
    // Recipe repositories whose history every team sees (POST /v1/recipes/history); others: own team's.
    std::vector<std::string> public_recipe_repos{};
    double verify_fraction = 0.0;  // spot checks: the share of succeeded results run again (0: off)
    std::uint64_t verify_seed = 0; // their draws' seed (0: random), for repeatable tests
};

// Serves until SIGINT or SIGTERM (blocked in every thread, waited for here; SIGHUP, blocked and
// waited for the same way, re-reads the TLS files and serves on), or with
// `new_admin_token` prints a new admin token for a stopped pool and returns. Returns the exit code:
// usage errors (a bad --listen, --db scheme, ...) are k_exit_usage before anything is opened.
int run_coordinator(const GlobalOptions& global, const CoordinatorCmdOptions& o);

} // namespace gpupool::cmd
