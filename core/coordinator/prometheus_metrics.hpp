// PrometheusMetrics: the coordinator's metrics in the Prometheus text format (GET /metrics),
// built with prometheus-cpp's core library. The only file that knows that library.
//
// It keeps what happens (CoordinatorEvents: store commits, scheduling passes, queue waits and run
// times; and every HTTP exchange, from net::ServerOptions::observe) in counters and histograms that
// live as long as the process, and renders them with the pool's state now (PoolMetrics, taken on
// the coordinator thread per scrape). Every metric is named gpupool_*; the names, labels and units
// are listed in docs/operating.md ("Metrics"), and ops/grafana-dashboard.json reads them.
//
// Label values come from members and owners (team and worker names, GPU models): the library
// escapes them, and label sets stay bounded by what the pool holds (teams, workers, models, routes —
// a route is its pattern, never the path a client sent). Thread-safe: observe() runs on the io
// threads, the events and render() on the coordinator thread.
#pragma once

#include "core/coordinator/metrics.hpp"
#include "core/net/http_server.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace gpupool::coordinator {

class PrometheusMetrics final : public CoordinatorEvents {
public:
    PrometheusMetrics();
    ~PrometheusMetrics() override;
    PrometheusMetrics(const PrometheusMetrics&) = delete;
    PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

    // An HTTP exchange (net::ServerOptions::observe).
    void observe(const net::Exchange& exchange);

    void store_committed(std::chrono::nanoseconds took, bool ok) override;
    // A group commit (the service's, with a store that groups writes) shared by `tasks` tasks.
    void group_committed(std::chrono::nanoseconds took, std::size_t tasks, bool ok);
    void scheduling_pass(std::chrono::nanoseconds took, std::size_t placed, std::size_t preempted) override;
    void attempt_placed(const std::string& team, std::int64_t queued_ms) override;
    void attempt_ended(const std::string& team, AttemptOutcome outcome, std::int64_t ran_ms) override;

    // The whole exposition (text format 0.0.4): what happened so far, and `state`.
    std::string render(const PoolMetrics& state) const;

private:
    struct Families;
    std::unique_ptr<Families> m;
};

// The Content-Type of render()'s text.
inline constexpr const char* k_prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

} // namespace gpupool::coordinator
