// PrometheusMetrics (prometheus_metrics.hpp): families, events, and rendering the state per scrape.
#include "core/coordinator/prometheus_metrics.hpp"

#include "core/util/thread_safety.hpp"

#include <map>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sstream>
#include <tuple>

namespace gpupool::coordinator {

namespace pm = prometheus;

namespace {

double seconds(std::chrono::nanoseconds d) {
    return std::chrono::duration<double>(d).count();
}
double credits_of(std::int64_t micro) {
    return static_cast<double>(micro) / 1e6;
}
double bytes_of(std::int64_t mib) {
    return static_cast<double>(mib) * 1024.0 * 1024.0;
}

const pm::Histogram::BucketBoundaries& latency_buckets() {
    static const pm::Histogram::BucketBoundaries b{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,   0.5,   1,      2.5,   5,    10,    30};
    return b;
}
const pm::Histogram::BucketBoundaries& pass_buckets() {
    static const pm::Histogram::BucketBoundaries b{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                   0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5};
    return b;
}
const pm::Histogram::BucketBoundaries& wait_buckets() {
    static const pm::Histogram::BucketBoundaries b{1,   5,    15,   30,   60,    120,   300,
                                                   600, 1800, 3600, 7200, 14400, 43200, 86400};
    return b;
}
const pm::Histogram::BucketBoundaries& run_buckets() {
    static const pm::Histogram::BucketBoundaries b{10, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 172800};
    return b;
}

} // namespace

struct PrometheusMetrics::Families {
    std::shared_ptr<pm::Registry> registry = std::make_shared<pm::Registry>();
    pm::Family<pm::Counter>& requests = pm::BuildCounter()
                                            .Name("gpupool_http_requests_total")
                                            .Help("HTTP requests answered, by method, route pattern and status")
                                            .Register(*registry);
    pm::Family<pm::Histogram>& latency =
        pm::BuildHistogram()
            .Name("gpupool_http_request_duration_seconds")
            .Help("Time from a request's header to its response, by method and route pattern (long polls wait)")
            .Register(*registry);
    pm::Histogram& commit = pm::BuildHistogram()
                                .Name("gpupool_store_commit_duration_seconds")
                                .Help("Time of each store transaction (SQLite commit included)")
                                .Register(*registry)
                                .Add({}, pass_buckets());
    pm::Family<pm::Counter>& commit_failures = pm::BuildCounter()
                                                   .Name("gpupool_store_commit_failures_total")
                                                   .Help("Store transactions that failed (nothing was written)")
                                                   .Register(*registry);
    pm::Histogram& group_commit = pm::BuildHistogram()
                                      .Name("gpupool_store_group_commit_duration_seconds")
                                      .Help("Time of each group commit: the one fsync that the requests "
                                            "handled together share")
                                      .Register(*registry)
                                      .Add({}, pass_buckets());
    pm::Histogram& group_size = pm::BuildHistogram()
                                    .Name("gpupool_store_group_tasks")
                                    .Help("Requests and passes that shared each group commit")
                                    .Register(*registry)
                                    .Add({}, pm::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256});
    pm::Histogram& pass = pm::BuildHistogram()
                              .Name("gpupool_scheduling_pass_duration_seconds")
                              .Help("Time of each scheduling pass, its commit included")
                              .Register(*registry)
                              .Add({}, pass_buckets());
    pm::Family<pm::Counter>& pass_actions = pm::BuildCounter()
                                                .Name("gpupool_scheduler_decisions_total")
                                                .Help("Attempts placed and preempted by scheduling passes")
                                                .Register(*registry);
    pm::Family<pm::Histogram>& queue_wait = pm::BuildHistogram()
                                                .Name("gpupool_queue_wait_seconds")
                                                .Help("How long each placed attempt's job waited in the queue, by team")
                                                .Register(*registry);
    pm::Family<pm::Histogram>& run_time = pm::BuildHistogram()
                                              .Name("gpupool_attempt_run_seconds")
                                              .Help("How long each ended attempt ran, by team and outcome")
                                              .Register(*registry);

    // Per-label metrics found once (Family::Add builds a metric before it looks for an existing one).
    util::Mutex mu;
    std::map<std::tuple<std::string, std::string, int>, pm::Counter*> request_counters GUARDED_BY(mu);
    std::map<std::pair<std::string, std::string>, pm::Histogram*> latency_histograms GUARDED_BY(mu);
};

PrometheusMetrics::PrometheusMetrics() : m(std::make_unique<Families>()) {
    // Both decisions from the start, so that a rate() over them exists before the first preemption.
    m->pass_actions.Add({{"decision", "placed"}});
    m->pass_actions.Add({{"decision", "preempted"}});
    m->commit_failures.Add({});
}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::observe(const net::Exchange& e) {
    const std::string method(e.method);
    const std::string route = e.route.empty() ? std::string("unmatched") : std::string(e.route);
    pm::Counter* counter = nullptr;
    pm::Histogram* histogram = nullptr;
    {
        util::MutexLock lock(m->mu);
        auto& c = m->request_counters[{method, route, e.status}];
        if (c == nullptr) {
            c = &m->requests.Add({{"method", method}, {"route", route}, {"code", std::to_string(e.status)}});
        }
        auto& h = m->latency_histograms[{method, route}];
        if (h == nullptr) {
            h = &m->latency.Add({{"method", method}, {"route", route}}, latency_buckets());
        }
        counter = c;
        histogram = h;
    }
    counter->Increment();
    histogram->Observe(seconds(e.duration));
}

void PrometheusMetrics::store_committed(std::chrono::nanoseconds took, bool ok) {
    m->commit.Observe(seconds(took));
    if (!ok) {
        m->commit_failures.Add({}).Increment();
    }
}

void PrometheusMetrics::group_committed(std::chrono::nanoseconds took, std::size_t tasks, bool ok) {
    m->group_commit.Observe(seconds(took));
    m->group_size.Observe(static_cast<double>(tasks));
    if (!ok) {
        m->commit_failures.Add({}).Increment();
    }
}

void PrometheusMetrics::scheduling_pass(std::chrono::nanoseconds took, std::size_t placed, std::size_t preempted) {
    m->pass.Observe(seconds(took));
    m->pass_actions.Add({{"decision", "placed"}}).Increment(static_cast<double>(placed));
    m->pass_actions.Add({{"decision", "preempted"}}).Increment(static_cast<double>(preempted));
}

void PrometheusMetrics::attempt_placed(const std::string& team, std::int64_t queued_ms) {
    m->queue_wait.Add({{"team", team}}, wait_buckets()).Observe(static_cast<double>(queued_ms) / 1000.0);
}

void PrometheusMetrics::attempt_ended(const std::string& team, AttemptOutcome outcome, std::int64_t ran_ms) {
    m->run_time.Add({{"team", team}, {"outcome", to_string(outcome)}}, run_buckets())
        .Observe(static_cast<double>(ran_ms) / 1000.0);
}

namespace {

// The pool's state now, in a registry of its own made for one scrape.
void add_state(pm::Registry& r, const PoolMetrics& s) {
    auto& jobs = pm::BuildGauge()
                     .Name("gpupool_jobs")
                     .Help("Jobs queued, assigned or running now, by state, team and priority")
                     .Register(r);
    for (const auto& j : s.live_jobs) {
        jobs.Add({{"state", j.state}, {"team", j.team}, {"priority", j.priority}}).Set(static_cast<double>(j.count));
    }
    auto& ended = pm::BuildGauge()
                      .Name("gpupool_jobs_ended")
                      .Help("Jobs that ended since the pool began, by state and team (a voided result re-queues one)")
                      .Register(r);
    for (const auto& j : s.ended_jobs) {
        ended.Add({{"state", j.state}, {"team", j.team}}).Set(static_cast<double>(j.count));
    }
    auto& oldest = pm::BuildGauge()
                       .Name("gpupool_queue_oldest_wait_seconds")
                       .Help("How long each team's oldest queued job has waited so far")
                       .Register(r);
    for (const auto& [team, waited] : s.oldest_queued_s) {
        oldest.Add({{"team", team}}).Set(waited);
    }
    auto& attempts = pm::BuildCounter()
                         .Name("gpupool_attempts_ended_total")
                         .Help("Attempts that ended since the pool began, by outcome")
                         .Register(r);
    for (std::size_t i = 0; i < k_attempt_outcomes; ++i) {
        attempts.Add({{"outcome", to_string(static_cast<AttemptOutcome>(i))}})
            .Increment(static_cast<double>(s.attempts[i]));
    }
    auto& gpu_time = pm::BuildCounter()
                         .Name("gpupool_attempt_gpu_seconds_total")
                         .Help("GPU time held by ended attempts (GPU share x run time), by outcome; the "
                               "preempted_* outcomes are work lost to preemption")
                         .Register(r);
    for (std::size_t i = 0; i < k_attempt_outcomes; ++i) {
        gpu_time.Add({{"outcome", to_string(static_cast<AttemptOutcome>(i))}}).Increment(s.attempt_gpu_seconds[i]);
    }
    auto& workers = pm::BuildGauge()
                        .Name("gpupool_workers")
                        .Help("Workers by GPU model (cpu: none) and state (online, paused, off-hours, reclaimed, "
                              "draining, drained, offline, banned)")
                        .Register(r);
    for (const auto& w : s.workers) {
        workers.Add({{"gpu_model", w.gpu_model}, {"state", w.state}}).Set(static_cast<double>(w.count));
    }
    auto& gpus = pm::BuildGauge()
                     .Name("gpupool_gpus")
                     .Help("GPUs by model and state (their worker's, or unhealthy for a failing or reclaimed GPU)")
                     .Register(r);
    for (const auto& g : s.gpus) {
        gpus.Add({{"gpu_model", g.model}, {"state", g.state}}).Set(static_cast<double>(g.count));
    }
}

void add_memory(pm::Registry& r, const PoolMetrics& s) {
    auto gauge = [&](const char* name, const char* help) -> pm::Family<pm::Gauge>& {
        return pm::BuildGauge().Name(name).Help(help).Register(r);
    };
    auto& offered = gauge("gpupool_gpu_memory_offered_bytes", "GPU memory of the GPUs that take work now");
    auto& allocated = gauge("gpupool_gpu_memory_allocated_bytes", "GPU memory given to active attempts' shares");
    auto& used = gauge("gpupool_gpu_memory_used_bytes", "GPU memory in use, as the workers' drivers report it");
    auto& reporting = gauge("gpupool_gpu_memory_reporting_gpus", "GPUs whose worker reports the memory in use");
    auto& ratio = gauge("gpupool_gpu_allocation_ratio", "Allocated over offered GPU memory");
    auto& sharing = gauge("gpupool_gpu_sharing_ratio",
                          "Active attempts per busy GPU: above 1, sharing runs more jobs than whole GPUs would");
    for (const auto& mem : s.memory) {
        const pm::Labels l{{"gpu_model", mem.model}};
        offered.Add(l).Set(bytes_of(mem.offered_mib));
        allocated.Add(l).Set(bytes_of(mem.allocated_mib));
        used.Add(l).Set(bytes_of(mem.used_mib));
        reporting.Add(l).Set(static_cast<double>(mem.gpus_reporting_use));
        ratio.Add(l).Set(
            mem.offered_mib > 0 ? static_cast<double>(mem.allocated_mib) / static_cast<double>(mem.offered_mib) : 0.0);
        sharing.Add(l).Set(
            mem.busy_gpus > 0 ? static_cast<double>(mem.gpu_attempts) / static_cast<double>(mem.busy_gpus) : 0.0);
    }
    auto& age = gauge("gpupool_worker_heartbeat_age_seconds",
                      "Seconds since each worker's last heartbeat (workers not banned or drained)");
    for (const auto& h : s.heartbeats) {
        age.Add({{"worker", std::to_string(h.worker)}, {"name", h.name}}).Set(h.age_s);
    }
    // Spot checks (docs/evidence.md): alert on gpupool_workers_quarantined > 0.
    gauge("gpupool_workers_quarantined", "Workers quarantined now because their spot checks disagreed")
        .Add({})
        .Set(static_cast<double>(s.workers_quarantined));
    auto& reliability = gauge("gpupool_worker_reliability",
                              "Each spot-checked worker's reliability score: (1 + agreed) / (2 + checks)");
    auto& checks = gauge("gpupool_worker_spot_checks", "Each spot-checked worker's checks, by verdict");
    for (const auto& c : s.checked) {
        const std::string id = std::to_string(c.worker);
        reliability.Add({{"worker", id}, {"name", c.name}}).Set(c.reliability);
        checks.Add({{"worker", id}, {"name", c.name}, {"verdict", "agreed"}}).Set(static_cast<double>(c.agreed));
        checks.Add({{"worker", id}, {"name", c.name}, {"verdict", "disagreed"}}).Set(static_cast<double>(c.disagreed));
    }
}

void add_credits(pm::Registry& r, const PoolMetrics& s) {
    auto gauge = [&](const char* name, const char* help) -> pm::Family<pm::Gauge>& {
        return pm::BuildGauge().Name(name).Help(help).Register(r);
    };
    auto& granted = gauge("gpupool_team_granted_credits", "Credits granted to each team since the pool began, "
                                                          "net of adjustments and expiries");
    auto& earned = gauge("gpupool_team_earned_credits", "Credits each team's workers earned since the pool began");
    auto& spent = gauge("gpupool_team_spent_credits", "Credits each team's jobs spent since the pool began (fees in)");
    auto& balance = gauge("gpupool_team_balance_credits", "Each team's available credits now");
    auto& held = gauge("gpupool_team_held_credits", "Each team's credits in escrow for its running attempts");
    for (const auto& c : s.credits) {
        const pm::Labels l{{"team", c.team}};
        granted.Add(l).Set(credits_of(c.totals.granted));
        earned.Add(l).Set(credits_of(c.totals.earned));
        spent.Add(l).Set(credits_of(c.totals.spent));
        balance.Add(l).Set(credits_of(c.balance));
        held.Add(l).Set(credits_of(c.held));
    }
    gauge("gpupool_ledger_imbalance_credits",
          "Every account's balance summed (0 unless the ledger is broken: alert on anything else)")
        .Add({})
        .Set(credits_of(s.ledger_total));
    gauge("gpupool_ledger_escrow_unaccounted_credits",
          "Escrow's balance less what active attempts hold (0 unless the ledger is broken)")
        .Add({})
        .Set(credits_of(s.escrow_unaccounted));
}

} // namespace

std::string PrometheusMetrics::render(const PoolMetrics& state) const {
    pm::Registry now;
    pm::BuildGauge()
        .Name("gpupool_build_info")
        .Help("The coordinator's version (always 1)")
        .Register(now)
        .Add({{"version", GPUPOOL_VERSION}})
        .Set(1);
    add_state(now, state);
    add_memory(now, state);
    add_credits(now, state);
    auto families = m->registry->Collect();
    auto current = now.Collect();
    families.insert(families.end(), std::make_move_iterator(current.begin()), std::make_move_iterator(current.end()));
    std::ostringstream out;
    pm::TextSerializer().Serialize(out, families);
    return out.str();
}

} // namespace gpupool::coordinator
