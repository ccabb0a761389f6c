// Simulation: a pool's clients against a real coordinator, on one HttpDriver — W workers and a
// stream of researchers — for the load generator (bench/coordinator_loadgen.cpp).
//
// Each simulated worker follows the real worker's protocol (docs/api.md, "Workers"): it registers
// with an enrollment token (ramp_up, at a bounded rate), heartbeats every `heartbeat_every` with
// ±10 % jitter (the first one carries its inventory: CPU only, `slots` jobs at once; each its owner's
// terms when `terms` is set) listing the
// attempts it holds, and keeps one long poll parked at all times. An assignment is started, gets one
// small log chunk, and is completed with exit code 0 after a simulated run time; the poll is sent
// again as soon as it returns. A heartbeat's `stop` list drops those attempts.
//
// Researchers (run): `submit_rate` sweeps a second of `jobs_per_sweep` jobs running `true`, plus
// job listings (GET /v1/jobs?limit=50), status (GET /v1/jobs/{id}) and log reads of finished
// jobs, each at its own rate. Rates are kept open-loop: a slow answer does not slow the senders.
//
// Connections: the workers are split into shards of `workers_per_shard` (HttpDriver), each shard
// allowed one connection per worker (its parked poll) plus `spare_connections` for everything else
// its workers send; the researchers have a shard of their own.
//
// Everything runs on the driver's thread. Requests are recorded into the Stats given to the phase
// running when they end; what ends during wind_down() goes to its own Stats (failures count).
#pragma once

#include "core/api/owner_terms.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/loadgen/http_driver.hpp"
#include "bench/loadgen/stats.hpp"

namespace gpupool::loadgen {

struct SimOptions {
    std::size_t workers = 1000;
    std::vector<std::string> enroll_tokens; // used in turn (each allows at most 10,000 registrations)
    std::string member_token;
    double register_rate = 500; // registrations a second during the ramp
    std::int64_t slots = 4;
    std::chrono::milliseconds heartbeat_every{10'000};
    std::chrono::milliseconds poll_wait{20'000}; // what `gpupool worker` asks for
    std::chrono::milliseconds run_time{2'000};   // a job's simulated run time, ±50 %
    double submit_rate = 200;                    // sweeps a second
    std::int64_t jobs_per_sweep = 4;
    double list_rate = 5;
    double status_rate = 5;
    double log_rate = 5;
    // The owner's terms every worker states (registration and each heartbeat): `teams` set keeps the
    // simulated workers to those teams' jobs (the soak runs them beside real workers).
    std::optional<api::OwnerTerms> terms;
    std::size_t workers_per_shard = 100;
    long spare_connections = 8;
    unsigned seed = 1;
};

// The driver's shards and connections for these options (one shard more for the researchers).
DriverOptions driver_options(const SimOptions& o, const std::string& base_url);

class Simulation {
public:
    Simulation(HttpDriver& driver, SimOptions options);

    // Registers every worker at the bounded rate; each starts heartbeating and polling at once.
    // Returns once all have answered (or `limit` passed): false when any registration failed.
    bool ramp_up(Stats& stats, std::chrono::seconds limit);
    // The workers and the researchers for `duration`.
    void run(Stats& stats, std::chrono::seconds duration);
    // Sends nothing new, drops the parked polls and waits (at most `limit`) for the rest.
    void wind_down(Stats& stats, std::chrono::seconds limit);

    std::size_t registered() const { return m_registered; }

private:
    struct Worker {
        std::size_t index = 0;
        std::string token;
        std::uint64_t poll = 0;         // the parked poll's transfer (0: none)
        std::vector<std::int64_t> held; // attempts assigned to it and not yet completed
        bool inventory_sent = false;
    };

    std::size_t shard_of(const Worker& w) const { return w.index / m_options.workers_per_shard; }
    std::size_t researcher_shard() const;
    double uniform(double lo, double hi);
    // Runs `f` `rate` times a second from now until the run ends (open loop: catches up when late).
    void every(double rate, std::function<void()> f);
    void send(std::size_t shard, HttpRequest request, const std::string& route, long expect,
              std::function<void(HttpResult&)> then);

    void register_worker(std::size_t index);
    void heartbeat(Worker& w);
    void poll(Worker& w);
    void on_poll(Worker& w, HttpResult& r);
    void start_attempt(Worker& w, std::int64_t attempt, std::int64_t job);
    void complete_attempt(Worker& w, std::int64_t attempt, std::int64_t job);
    void submit();
    void list_jobs();
    void job_status();
    void read_log();

    HttpDriver& m_driver;
    SimOptions m_options;
    Stats* m_stats = nullptr;
    std::mt19937_64 m_rng;
    std::vector<Worker> m_workers;
    std::size_t m_registered = 0;
    std::size_t m_register_answers = 0;
    bool m_running = false;
    std::int64_t m_sweeps = 0;
    // Jobs submitted and not yet assigned: when their submission was sent (submit to assignment).
    std::unordered_map<std::int64_t, Clock::time_point> m_submitted_at;
    std::deque<std::int64_t> m_recent_jobs;   // for status reads
    std::deque<std::int64_t> m_finished_jobs; // for log reads
};

} // namespace gpupool::loadgen
