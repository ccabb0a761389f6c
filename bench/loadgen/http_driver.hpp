// HttpDriver: thousands of concurrent HTTP requests from one thread, for the coordinator's load
// generator (bench/coordinator_loadgen.cpp). It exists so that ten thousand simulated workers cost
// one thread and one socket each, not a thread each.
//
// libcurl's multi interface in its socket form (curl_multi_socket_action) on an epoll set: the
// loop waits on every socket at once and hands curl only the ones that are ready, so a parked long
// poll costs nothing per turn of the loop. Timers (`at`) run on the same thread, between transfers.
//
// Connections: `shards` multi handles, each with its own connection cache, all on one epoll set. A
// transfer sent on a shard takes an idle keep-alive connection of that shard when there is one and
// opens another otherwise, up to `connections_per_shard`; past that it waits in curl's queue for
// one to free up (its latency then includes the wait: it is what a client sees). A parked long poll
// holds its connection for its wait; the other requests of the shard's workers (heartbeats,
// attempt reports) share the connections that are not parked. Shards, because curl looks for an
// idle connection by walking every connection it holds to the host: ten thousand in one cache
// would cost a walk of ten thousand per request.
//
// Not thread safe: every member is called on the thread that runs run() (callbacks included).
// Failures are results, not exceptions: a transfer that gets no HTTP answer has status 0 and its
// curl code (refused, timed out, reset).
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gpupool::loadgen {

using Clock = std::chrono::steady_clock;

struct HttpRequest {
    std::string method = "GET"; // GET, POST, PUT
    std::string target;         // path and query: "/v1/workers/poll?wait_ms=20000"
    std::string token;          // Authorization: Bearer (empty: none)
    std::string body;           // sent as is (POST/PUT)
    std::chrono::milliseconds timeout{10'000};
};

struct HttpResult {
    long status = 0; // 0: no HTTP answer (see `curl`)
    CURLcode curl = CURLE_OK;
    std::string body;
    Clock::duration elapsed{};      // from send() to the answer: queueing for a connection included
    Clock::duration server{};       // from the request's last byte sent to the answer's first byte
    bool reused_connection = false; // false: this request opened a connection
};

using Done = std::function<void(HttpResult&&)>;

struct DriverOptions {
    // "http://127.0.0.1:7070", or several comma-separated (an active coordinator and its standbys):
    // requests go to one until it refuses the connection, times out or answers 503 (a standby), then
    // to the next.
    std::string base_url;
    std::size_t shards = 1;
    long connections_per_shard = 64; // open connections per shard at most (parked polls included)
    std::chrono::milliseconds connect_timeout{5'000};
};

class HttpDriver {
public:
    explicit HttpDriver(DriverOptions options);
    ~HttpDriver();
    HttpDriver(const HttpDriver&) = delete;
    HttpDriver& operator=(const HttpDriver&) = delete;

    // Starts a request on `shard` (< shards); `done` runs on this thread when it ends (never from
    // inside send()). Returns an id for cancel().
    std::uint64_t send(std::size_t shard, HttpRequest request, Done done);
    // Drops a request in flight without calling its `done` (a parked poll at the end of a run).
    void cancel(std::uint64_t id);
    // Runs `f` on this thread at `when` (at once when it has passed).
    void at(Clock::time_point when, std::function<void()> f);
    // Serves transfers and timers until `stop()` returns true (checked after each turn) or `deadline`.
    void run(Clock::time_point deadline, const std::function<bool()>& stop);

    std::size_t in_flight() const;
    // How late timers ran, at worst, since the last call (the generator's own lag).
    Clock::duration take_max_timer_lag();

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace gpupool::loadgen
