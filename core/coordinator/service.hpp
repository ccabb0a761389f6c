// CoordinatorService: the coordinator as a network service — the HTTP API (/v1) in front of a
// Coordinator, a Store and a clock.
//
// The service is handed its store (store::open_store picks one from the coordinator's --db) and its
// clock; it opens no database itself. It owns the store from then on and closes it in stop(), so
// that another process may take the database once the service has stopped.
//
// Threads: the HTTP server's io threads read requests and parse their small JSON bodies; large
// bodies (and uploads' checksums) are parsed on a parse thread of the service's own, so that no
// request waits behind another's parse. Every request is then handed, as a command, to ONE
// coordinator thread that owns the Coordinator (no locks around pool state). Long
// polls from workers are parked on that thread and answered as soon as a scheduling pass places
// something on the worker, or after their wait. A periodic tick expires leases and runtimes and
// schedules. Every state change is committed to the store before its reply is sent.
// stop() is graceful and idempotent: it stops accepting, answers parked polls, finishes in-flight
// requests (up to the server's grace period) and joins the threads.
#pragma once

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/dist.hpp"
#include "core/net/http_server.hpp"
#include "core/store/store.hpp"
#include "core/util/clock.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace gpupool::coordinator {

namespace service_detail {
struct ServiceState;
}

struct ServiceOptions {
    net::ServerOptions http;
    CoordinatorOptions coordinator;
    std::chrono::milliseconds tick{250};
    std::chrono::milliseconds max_poll_wait{25'000};
    // Where `admin backup` writes the copy it then sends (empty: the system's temporary
    // directory). The coordinator puts it beside a SQLite database: room for a copy of it is there.
    std::filesystem::path backup_dir{};
    // GET /metrics (the Prometheus text format; prometheus_metrics.hpp) is served on the API's
    // listener to admin tokens and, when this is set, to the scrape token whose SHA-256 (hex) it
    // is; and, when `metrics_listener` is set, without a token on a second plain-HTTP listener that
    // serves nothing else (`gpupool coordinator --metrics-listen` keeps that one on loopback).
    std::string metrics_token_sha256{};
    std::optional<net::ServerOptions> metrics_listener{};
    // The files handed out to GPU owners without a token (`coordinator --dist DIR`; dist.hpp): the
    // static gpupool files, their SHA256SUMS, the install script, GET /v1/dist. Null: the routes
    // answer 404 and /v1/dist says how to turn them on.
    std::shared_ptr<const DistFiles> dist{};
    // Several coordinators on one shared store (PostgreSQL; store::Store::shared): the one holding the
    // pool's lease serves, the others stand by and take over once it stops renewing.
    struct Standby {
        std::string advertise{}; // this coordinator's URL as clients reach it (kept in the lease)
        // A standby takes over this long after the active one last renewed; the active one renews
        // every third of it, and steps down by itself when it could not for this long.
        std::chrono::milliseconds takeover_after{6'000};
        std::chrono::milliseconds retry{1'000}; // how often a standby tries to take the lease
    } standby{};
};

class CoordinatorService {
public:
    // `clock` must outlive the service (system_clock() does).
    CoordinatorService(ServiceOptions options, std::unique_ptr<store::Store> store, const util::Clock& clock);
    ~CoordinatorService();
    CoordinatorService(const CoordinatorService&) = delete;
    CoordinatorService& operator=(const CoordinatorService&) = delete;

    // Takes the pool's lease, rebuilds the state from the store, starts serving. On a shared store
    // whose lease another coordinator holds it starts as a standby instead (active() is false): it
    // answers every request 503 with the active one's address and takes over when that one stops.
    // When the pool has no admin yet, the secret of a new admin token is placed in
    // `first_admin_token` (to be shown once). A service starts once: after stop() its store is closed.
    Status start(std::string* first_admin_token = nullptr);
    // Whether this coordinator holds the pool's lease and serves (false: a standby). Any thread.
    bool active() const;
    // The address of the coordinator that serves the pool as this one last saw it (its own when active).
    std::string active_address() const;
    void stop();
    // Re-reads the TLS certificate and key (net::HttpServer::reload_tls): new connections get them,
    // open ones keep theirs; on failure the old ones stay. From any thread but an io thread's handler.
    Status reload_tls();
    std::uint16_t port() const;
    // The metrics listener's port (0 without one).
    std::uint16_t metrics_port() const;
    // Every route the API serves (for the authorization-matrix test and the docs).
    std::vector<net::RouteInfo> routes() const;

private:
    std::unique_ptr<service_detail::ServiceState> m_impl;
};

// The process's real clock (a util::SystemClock that lives as long as the program).
const util::Clock& system_clock();

// Creates a new admin token in a stopped pool's database (the recovery for a lost admin token):
// `db_spec` as --db names it (store::open_store); the store must exist, and is held exclusively
// (for SQLite, its lock file) while the token is made.
// `password`: PostgreSQL's, when it comes from a file (store::OpenOptions::password).
Result<IssuedToken> recover_admin_token(const std::string& db_spec, const std::string& password = {});

// The HTTP status an ErrorCode maps to.
int http_status(ErrorCode code);

// Request bodies nest at most this deep (a job spec needs five levels).
inline constexpr std::size_t k_max_json_depth = 32;
// Parses a request body that must be a JSON object (empty text: {}), refusing deeper nesting than
// `max_depth` before anything is built. Errors are invalid_input with the field "body"; with
// `max_jobs` (0: no cap), the object's "jobs" array may hold that many items, and one more is
// refused with the field "jobs", also before anything is built (and before the rest is read).
Result<nlohmann::json> parse_json_object(std::string_view text, std::size_t max_depth = k_max_json_depth,
                                         std::size_t max_jobs = 0);

} // namespace gpupool::coordinator
