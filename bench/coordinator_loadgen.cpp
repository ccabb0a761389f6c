// The coordinator under load: a real `gpupool coordinator` process driven over HTTP by thousands of
// simulated workers and a stream of researchers (bench/loadgen/simulation.hpp), from one thread
// (libcurl's multi interface on epoll: bench/loadgen/http_driver.hpp). bench/load_bench.sh starts
// the coordinator, makes the team and tokens, runs this and stops everything.
//
//   coordinator_loadgen --url http://127.0.0.1:PORT --enroll-token T [--enroll-token T2 ...]
//                       --member-token M [--workers 1000] [--submit-rate 200] [--jobs-per-sweep 4]
//                       [--duration 60s] [--coordinator-pid PID] [--db pool.db] [--terms-team T] ...
//
// Phases: the ramp registers --workers at --register-rate (each then heartbeats and keeps a long poll
// parked); then --duration of steady load with the researchers, measured; then a wind-down that
// drops the parked polls and waits for the rest. Prints, for the measured window: requests per
// second, p50/p99/max per route (a long poll's wait left out: see the rows' names), jobs
// dispatched and completed per second, the coordinator's RSS and CPU (/proc of --coordinator-pid),
// the database's size, and every failure by kind. Exits 1 when any request failed (a status other
// than the route's success, or no answer), 2 on bad arguments.
#include "core/resources/quantity.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <vector>

#include "bench/loadgen/http_driver.hpp"
#include "bench/loadgen/simulation.hpp"
#include "bench/loadgen/stats.hpp"

using namespace gpupool;
using namespace gpupool::loadgen;

namespace {

struct Options {
    std::string url;
    SimOptions sim;
    std::string duration = "60s";
    std::string heartbeat = "10s";
    std::string poll_wait = "20s";
    std::int64_t run_ms = 2000;
    int coordinator_pid = 0;
    std::string db;
    std::vector<std::string> terms_teams;
};

// The soft limit on open files raised to the hard one; returns the limit now in force.
rlim_t raise_nofile() {
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    const rlim_t before = lim.rlim_cur;
    if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
        getrlimit(RLIMIT_NOFILE, &lim);
    }
    std::cout << "open files: soft limit " << before << " -> " << lim.rlim_cur << " (hard " << lim.rlim_max << ")\n";
    return lim.rlim_cur;
}

std::chrono::seconds seconds_of(const std::string& text, const std::string& flag) {
    auto s = resources::parse_duration_s(text);
    if (!s) {
        throw CLI::ValidationError(flag, s.error().message);
    }
    return std::chrono::seconds(*s);
}

std::int64_t file_size(const std::string& path) {
    std::error_code ec;
    auto n = std::filesystem::file_size(path, ec);
    return ec ? 0 : static_cast<std::int64_t>(n);
}

void add_options(CLI::App& app, Options& o) {
    SimOptions& s = o.sim;
    app.add_option("--url", o.url, "The coordinator, http://HOST:PORT")->required();
    app.add_option("--enroll-token", s.enroll_tokens, "Enrollment token(s); each registers 10,000 workers at most")
        ->required();
    app.add_option("--member-token", s.member_token, "A member token of the workers' team (submits)")->required();
    app.add_option("--workers", s.workers, "Simulated workers")->capture_default_str();
    app.add_option("--terms-team", o.terms_teams,
                   "The workers take only these teams' jobs (their owner's terms; repeatable; default: every team)");
    app.add_option("--slots", s.slots, "Jobs per worker at once (CPU-only inventory)")->capture_default_str();
    app.add_option("--register-rate", s.register_rate, "Registrations per second during the ramp")
        ->capture_default_str();
    app.add_option("--heartbeat", o.heartbeat, "Heartbeat period (each ±10 %)")->capture_default_str();
    app.add_option("--poll-wait", o.poll_wait, "A long poll's wait_ms")->capture_default_str();
    app.add_option("--run-ms", o.run_ms, "A job's simulated run time in ms (each ±50 %)")->capture_default_str();
    app.add_option("--submit-rate", s.submit_rate, "Sweeps submitted per second")->capture_default_str();
    app.add_option("--jobs-per-sweep", s.jobs_per_sweep, "Jobs in each sweep")->capture_default_str();
    app.add_option("--list-rate", s.list_rate, "GET /v1/jobs?limit=50 per second")->capture_default_str();
    app.add_option("--status-rate", s.status_rate, "GET /v1/jobs/{id} per second")->capture_default_str();
    app.add_option("--log-rate", s.log_rate, "GET /v1/jobs/{id}/logs per second")->capture_default_str();
    app.add_option("--duration", o.duration, "The measured window, after the ramp")->capture_default_str();
    app.add_option("--workers-per-shard", s.workers_per_shard, "Workers per connection cache")->capture_default_str();
    app.add_option("--spare-connections", s.spare_connections,
                   "Connections per shard beyond one per worker (heartbeats, attempt reports)")
        ->capture_default_str();
    app.add_option("--coordinator-pid", o.coordinator_pid, "The coordinator's pid (RSS, CPU from /proc)");
    app.add_option("--db", o.db, "The coordinator's SQLite file (its size, with the -wal file)");
    app.add_option("--seed", s.seed, "Random seed")->capture_default_str();
}

// Peak RSS and open fds of the coordinator, sampled every second while `live` is set; every 5 s a
// line says how the run goes (requests in flight, the coordinator's CPU over those 5 s).
struct Peaks {
    std::int64_t rss_kib = 0;
    std::int64_t fds = 0;
    std::int64_t lag_us = 0; // the generator's own timers, at worst
    int seconds = 0;
    double cpu_s = 0; // the coordinator's, at the last progress line
};

void sample_every_second(HttpDriver& driver, int pid, std::shared_ptr<Peaks> peaks, std::shared_ptr<bool> live) {
    driver.at(Clock::now() + std::chrono::seconds(1), [&driver, pid, peaks, live] {
        if (!*live) {
            return;
        }
        const auto p = read_proc(pid);
        if (p) {
            peaks->rss_kib = std::max(peaks->rss_kib, p->rss_kib);
            peaks->fds = std::max(peaks->fds, p->fds);
        }
        const auto lag = std::chrono::duration_cast<std::chrono::microseconds>(driver.take_max_timer_lag()).count();
        peaks->lag_us = std::max<std::int64_t>(peaks->lag_us, lag);
        if (++peaks->seconds % 5 == 0 && p) {
            std::cout << "  t=" << peaks->seconds << "s: " << driver.in_flight() << " requests in flight; coordinator "
                      << std::fixed << std::setprecision(2) << (p->cpu_s - peaks->cpu_s) / 5 << " cores, RSS "
                      << p->rss_kib / 1024 << " MiB, " << p->fds << " open files" << std::endl;
            std::cout.unsetf(std::ios::fixed);
            std::cout << std::setprecision(6);
            peaks->cpu_s = p->cpu_s;
        }
        sample_every_second(driver, pid, peaks, live);
    });
}

// The busiest threads' CPU over the window, in cores, busiest first.
std::string busiest_threads(const std::map<int, double>& before, const std::map<int, double>& after, double seconds) {
    std::vector<double> cores;
    for (const auto& [tid, cpu] : after) {
        auto it = before.find(tid);
        cores.push_back((cpu - (it == before.end() ? 0 : it->second)) / seconds);
    }
    std::sort(cores.rbegin(), cores.rend());
    std::ostringstream out;
    out << std::fixed << std::setprecision(2);
    for (std::size_t i = 0; i < std::min<std::size_t>(4, cores.size()); ++i) {
        out << (i == 0 ? "" : ", ") << cores[i];
    }
    return out.str();
}

// The measured window as /proc saw the coordinator, and the generator's own CPU.
struct Window {
    std::optional<ProcSample> before, after;
    std::map<int, double> threads_before, threads_after;
    double seconds = 0;
    double own_cpu_s = 0;
};

void print_process(const Options& o, const Window& w, const Peaks& peaks) {
    if (o.coordinator_pid != 0 && w.before && w.after) {
        std::cout << "coordinator: RSS " << w.after->rss_kib / 1024 << " MiB at the end, " << peaks.rss_kib / 1024
                  << " MiB at most (VmHWM " << w.after->hwm_kib / 1024 << " MiB); CPU "
                  << (w.after->cpu_s - w.before->cpu_s) / w.seconds << " cores on average (busiest threads: "
                  << busiest_threads(w.threads_before, w.threads_after, w.seconds) << "); " << w.after->threads
                  << " threads; " << peaks.fds << " open files at most\n";
    }
    if (!o.db.empty()) {
        std::cout << "database: " << file_size(o.db) / 1024 << " KiB + WAL " << file_size(o.db + "-wal") / 1024
                  << " KiB\n";
    }
    std::cout << "load generator: " << w.own_cpu_s / w.seconds << " cores; its timers ran "
              << static_cast<double>(peaks.lag_us) / 1000.0 << " ms late at worst\n";
}

int run(const Options& o) {
    SimOptions sim = o.sim;
    sim.heartbeat_every = seconds_of(o.heartbeat, "--heartbeat");
    sim.poll_wait = seconds_of(o.poll_wait, "--poll-wait");
    sim.run_time = std::chrono::milliseconds(o.run_ms);
    if (!o.terms_teams.empty()) {
        sim.terms = api::OwnerTerms{};
        sim.terms->teams = o.terms_teams;
    }
    const auto duration = seconds_of(o.duration, "--duration");
    sim.workers_per_shard = std::max<std::size_t>(1, sim.workers_per_shard);
    const DriverOptions d = driver_options(sim, o.url);
    const rlim_t nofile = raise_nofile();
    const auto most = static_cast<rlim_t>(d.connections_per_shard) * d.shards + 64;
    if (most > nofile) {
        std::cerr << "coordinator_loadgen: up to " << most << " connections, but only " << nofile
                  << " open files allowed; fewer --spare-connections or workers\n";
        return 2;
    }
    std::cout << "workers " << sim.workers << " (" << d.shards - 1 << " shards of " << sim.workers_per_shard << ", "
              << d.connections_per_shard << " connections each at most), slots " << sim.slots << ", heartbeat "
              << o.heartbeat << ", poll wait " << o.poll_wait << ", run " << o.run_ms
              << " ms; researchers: " << sim.submit_rate << " sweeps/s of " << sim.jobs_per_sweep << " jobs, "
              << sim.list_rate << " lists/s, " << sim.status_rate << " status/s, " << sim.log_rate << " log reads/s\n";

    HttpDriver driver(d);
    Simulation simulation(driver, sim);
    Stats ramp;
    const auto t0 = Clock::now();
    const auto ramp_limit =
        std::chrono::seconds(static_cast<std::int64_t>(static_cast<double>(sim.workers) / sim.register_rate) + 60);
    const bool all = simulation.ramp_up(ramp, ramp_limit);
    const double ramp_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "\n== ramp: " << simulation.registered() << " of " << sim.workers << " workers registered in "
              << ramp_s << " s\n";
    ramp.print(std::cout, ramp_s);

    Stats steady;
    auto peaks = std::make_shared<Peaks>();
    auto live = std::make_shared<bool>(true);
    sample_every_second(driver, o.coordinator_pid, peaks, live);
    Window w;
    w.before = read_proc(o.coordinator_pid);
    peaks->cpu_s = w.before ? w.before->cpu_s : 0;
    (void)driver.take_max_timer_lag(); // the ramp's
    w.threads_before = read_thread_cpu(o.coordinator_pid);
    const double own_before = own_cpu_s();
    const auto t1 = Clock::now();
    simulation.run(steady, duration);
    w.seconds = std::chrono::duration<double>(Clock::now() - t1).count();
    w.after = read_proc(o.coordinator_pid);
    w.threads_after = read_thread_cpu(o.coordinator_pid);
    w.own_cpu_s = own_cpu_s() - own_before;
    *live = false;

    Stats tail;
    simulation.wind_down(tail, std::chrono::seconds(30));
    std::cout << "\n== steady load: " << w.seconds << " s, " << steady.requests() << " requests, "
              << static_cast<double>(steady.requests()) / w.seconds << " per second\n";
    steady.print(std::cout, w.seconds);
    print_process(o, w, *peaks);
    std::cout << "\n== wind-down (requests in flight at the end; parked polls dropped)\n";
    tail.print(std::cout, 1);
    const std::int64_t failed = ramp.failures() + steady.failures() + tail.failures();
    if (!all || failed > 0) {
        std::cout << "\nFAILED: " << failed << " requests failed" << (all ? "" : "; not every worker registered")
                  << '\n';
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"The coordinator under load: simulated workers and researchers over HTTP"};
    Options o;
    add_options(app, o);
    CLI11_PARSE(app, argc, argv);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int code = 2;
    try {
        code = run(o);
    } catch (const CLI::Error& e) {
        std::cerr << "coordinator_loadgen: " << e.what() << '\n';
    }
    curl_global_cleanup();
    return code;
}
