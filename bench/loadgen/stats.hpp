// What the load generator measures and how it prints it: latencies per route, errors by kind,
// counters (jobs submitted, dispatched, completed), and the coordinator process as /proc shows it.
//
// Stats keeps every sample (microseconds, 4 bytes each: a minute at 10,000 requests a second is
// a few MiB), so the percentiles are exact. A route's samples are the requests it answered; rows
// that are not requests (a long poll's lateness past its wait, submit-to-assignment) are recorded
// with `sample`. Not thread safe (the generator has one thread).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/loadgen/http_driver.hpp"

namespace gpupool::loadgen {

// A request that got no HTTP answer, by kind: "refused", "timeout", "reset", or curl's own words.
std::string failure_kind(CURLcode code);

class Stats {
public:
    // One answered (or failed) request of `route`; `ok`: the status was the one expected.
    void request(const std::string& route, const HttpResult& r, bool ok);
    // A derived latency (not a request): shown as its own row, apart from the routes.
    void sample(const std::string& row, Clock::duration d);
    void count(const std::string& counter, std::int64_t n = 1);
    std::int64_t counter(const std::string& name) const;
    std::int64_t failures() const { return m_failures; }
    std::int64_t requests() const { return m_requests; }

    // The table: per route count, rate over `seconds`, p50/p99/max end to end, p99 of the server's
    // part, and what failed; then the derived rows, the counters and the failures by kind.
    void print(std::ostream& out, double seconds) const;

private:
    struct Row {
        std::vector<std::uint32_t> total_us;
        std::vector<std::uint32_t> server_us;
        std::map<long, std::int64_t> statuses; // HTTP status -> count (0: none)
        std::int64_t failed = 0;
    };
    std::map<std::string, Row> m_routes;
    std::map<std::string, std::vector<std::uint32_t>> m_samples;
    std::map<std::string, std::int64_t> m_counters;
    std::map<std::string, std::int64_t> m_failure_kinds; // "route: kind" -> count
    std::int64_t m_failures = 0;
    std::int64_t m_requests = 0;
};

// The coordinator process now (Linux /proc): resident memory, its peak, CPU time, threads, open fds.
struct ProcSample {
    std::int64_t rss_kib = 0;
    std::int64_t hwm_kib = 0;
    std::int64_t threads = 0;
    std::int64_t fds = 0;
    double cpu_s = 0; // user + system since it started
};
std::optional<ProcSample> read_proc(int pid);

// CPU time (user + system, seconds) of each of the process's threads, by thread id: which thread is
// busy (the coordinator's one thread, or the HTTP server's io threads).
std::map<int, double> read_thread_cpu(int pid);

// The generator's own CPU time (user + system), in seconds.
double own_cpu_s();

} // namespace gpupool::loadgen
