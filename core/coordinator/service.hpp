// CoordinatorService: the coordinator as a network service — the HTTP API (/v1) in front of a
// Coordinator, a Store and a clock.
//
// Threads: the HTTP server's io threads parse requests; every request is then handed, as a
// command, to ONE coordinator thread that owns the Coordinator (no locks around pool state). Long
// polls from workers are parked on that thread and answered as soon as a scheduling pass places
// something on the worker, or after their wait. A periodic tick expires leases and runtimes and
// schedules. Every state change is committed to the store before its reply is sent.
// stop() is graceful and idempotent: it stops accepting, answers parked polls, finishes in-flight
// requests (up to the server's grace period) and joins the threads.
#pragma once

#include "core/coordinator/coordinator.hpp"
#include "core/net/http_server.hpp"
#include "core/util/files.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

namespace gpupool::coordinator {

struct ServiceOptions {
    net::ServerOptions http;
    std::filesystem::path db_path;
    CoordinatorOptions coordinator;
    std::chrono::milliseconds tick{250};
    std::chrono::milliseconds max_poll_wait{25'000};
};

class CoordinatorService {
public:
    explicit CoordinatorService(ServiceOptions options);
    ~CoordinatorService();
    CoordinatorService(const CoordinatorService&) = delete;
    CoordinatorService& operator=(const CoordinatorService&) = delete;

    // Opens the store, rebuilds the state, starts serving. When the pool has no admin yet, the
    // secret of a new admin token is placed in `first_admin_token` (to be shown once).
    Status start(std::string* first_admin_token = nullptr);
    void stop();
    std::uint16_t port() const;
    // Every route the API serves (for the authorization-matrix test and the docs).
    std::vector<net::RouteInfo> routes() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// The lock that lets one process at a time use a pool's database (`<db>.lock`): the coordinator
// holds it while it runs; `coordinator --new-admin-token` needs it too, so it runs only while the
// coordinator is stopped. A conflict says so.
Result<util::FileLock> lock_database(const std::filesystem::path& db_path);

// Creates a new admin token in a stopped pool's database (the recovery for a lost admin token),
// holding the database lock while it does.
Result<IssuedToken> recover_admin_token(const std::filesystem::path& db_path);

// The HTTP status an ErrorCode maps to.
int http_status(ErrorCode code);

// Request bodies nest at most this deep (a job spec needs five levels).
inline constexpr std::size_t k_max_json_depth = 32;
// Parses a request body that must be a JSON object (empty text: {}), refusing deeper nesting than
// `max_depth` before anything is built. Errors are invalid_input with the field "body".
Result<nlohmann::json> parse_json_object(std::string_view text, std::size_t max_depth = k_max_json_depth);

} // namespace gpupool::coordinator
