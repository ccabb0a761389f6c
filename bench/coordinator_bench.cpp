// How the coordinator's hot paths scale with the pool's history: a real Coordinator on a real
// SQLite file runs H finished jobs through the whole lifecycle (submit, place, start, complete),
// then times what happens many times a second in a live pool: a scheduling pass (idle, and with a
// queue that does not fit), a worker's poll for assignments, a heartbeat, and a job listing; and
// what a Prometheus scrape costs the coordinator thread (Coordinator::metrics() and the text, with
// the 200-job queue in place), and the dashboard's poll (the admin's overview). The metrics'
// events are attached, as in the service.
// Credits are enforced, with a weekly budget on the team, so every pass checks its spending.
// A coordinator whose hot paths walk its whole history slows down as the pool ages; these figures
// show whether it does.
//
//   coordinator_bench [--history 0,10000,50000] [--reps 200] [--workers 4] [--queued 200] [--dir /dev/shm]
//                     [--db postgresql://...]   (one empty pool database per --history value, `%h` in
//                                                the spec replaced by the value: bench/pg_bench.sh)
//
// TICK_PLACE_US is a pass that places one new single-core job (its CPUs are free on every worker, so
// the pass weighs it on all of them): what each one-job submission costs the coordinator thread.
// SUBMIT_US is one single-job submission, committed (submissions per second = 1e6 / it), timed last.
// --workers scales the fleet (every GPU is kept full, so the queued jobs still fit nowhere and
// each pass weighs them against every worker); --queued sets how many wait (200).
// A tick decides only when something changed (Coordinator::pass_due); the timed ticks let the quiet
// period pass first, so each one runs a full pass.
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/prometheus_metrics.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/store/open_store.hpp"
#include "core/store/sqlite_store.hpp"
#include "core/util/clock.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gpupool;
using namespace gpupool::coordinator;
namespace fs = std::filesystem;

namespace {

recipe::JobSpec spec(const std::string& name, std::int64_t gpu_milli, std::int64_t cpu_milli) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"true"};
    if (gpu_milli > 0) {
        s.resources.gpus = 1;
        s.resources.gpu_milli = gpu_milli;
    }
    s.resources.cpu_milli = cpu_milli;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = 86'400; // outlives the clock the timed passes advance
    return s;
}

struct Timing {
    double median_us = 0;
    double p99_us = 0;
};

Timing time_it(int reps, const std::function<void()>& f) {
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(reps));
    for (int i = 0; i < reps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

[[noreturn]] void die(const std::string& what, const Error& e) {
    std::cerr << "coordinator_bench: " << what << ": " << e.message << '\n';
    std::exit(1);
}

template <class T>
T must(Result<T> r, const std::string& what) {
    if (!r) {
        die(what, r.error());
    }
    return std::move(*r);
}

void must(const Status& s, const std::string& what) {
    if (!s) {
        die(what, s.error());
    }
}

struct Row {
    std::int64_t history = 0;
    double fill_s = 0;
    Timing tick_idle, tick_place, tick_queued, poll, heartbeat, list_all, list_50, scrape, overview, submit;
};

// The store to fill: a new SQLite file under `dir`, or the database `db_spec` names (`%h`: the history).
std::unique_ptr<store::Store> fresh_store(const fs::path& dir, const std::string& db_spec, std::int64_t history) {
    if (db_spec.empty()) {
        fs::remove_all(dir);
        fs::create_directories(dir);
        return must(store::SqliteStore::open(dir / "pool.db"), "open");
    }
    std::string spec = db_spec;
    if (auto at = spec.find("%h"); at != std::string::npos) {
        spec.replace(at, 2, std::to_string(history));
    }
    auto db = must(store::open_store(spec), "open " + spec);
    if (!must(db->load(), "load").teams.empty()) {
        die("open " + spec, make_error(ErrorCode::conflict, "the database already holds a pool; give an empty one"));
    }
    return db;
}

Row run(std::int64_t history, int reps, const fs::path& dir, const std::string& db_spec, int fleet, int queued) {
    auto db = fresh_store(dir, db_spec, history);
    util::ManualClock clock;
    CoordinatorOptions options;
    options.credits.enforce = true; // holds, settlements and a budget check in every pass, as in a real pool
    options.lease_ms = 86'400'000;  // timed passes advance the clock 5 s each: no worker goes silent
    options.worker_timeout_ms = 86'400'000;
    Coordinator coord(*db, clock, options);
    must(coord.start(), "start");
    PrometheusMetrics metrics;
    coord.set_events(&metrics);
    const Principal admin = must(coord.authenticate(must(init_admin(coord), "admin").secret), "auth");
    must(create_team(coord, admin, "bench", 1), "team");
    // Enough credits for everything; a weekly budget that never binds but is checked every pass.
    must(grant_credits(coord, admin, "bench", credits::k_max_amount, std::nullopt, "bench"), "grant");
    must(set_budget(coord, admin, "bench", std::nullopt, credits::k_max_amount), "budget");
    const Principal member =
        must(coord.authenticate(must(create_token(coord, admin, store::Role::member, "bench", "m"), "token").secret),
             "auth");
    const auto enroll = must(create_token(coord, admin, store::Role::enroll, "bench", "e", fleet), "token");
    std::vector<Principal> workers;
    for (int i = 0; i < fleet; ++i) {
        api::Inventory inv;
        inv.cpu_milli = 64'000;
        inv.memory_mib = 1 << 20;
        inv.gpus.push_back({0, "A100-80GB", 81920, "", ""});
        auto reg = must(coordinator::register_worker(coord, must(coord.authenticate(enroll.secret), "auth"),
                                                     "box-" + std::to_string(i), inv),
                        "register");
        workers.push_back(must(coord.authenticate(reg.secret), "auth"));
    }
    auto run_round = [&] {
        coord.tick();
        std::int64_t done = 0;
        for (const auto& w : workers) {
            for (const auto& a : must(coordinator::assignments(coord, w), "poll")) {
                must(coordinator::start_attempt(coord, w, a.attempt), "start");
                must(coordinator::complete_attempt(coord, w, a.attempt, 0, ""), "complete");
                ++done;
            }
        }
        clock.advance_ms(1000);
        return done;
    };

    // History: H small CPU jobs, submitted 1,000 at a time, run to success.
    Row row;
    row.history = history;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t submitted = 0; submitted < history;) {
        std::vector<recipe::JobSpec> batch;
        for (; submitted < history && batch.size() < 1000; ++submitted) {
            batch.push_back(spec("old-" + std::to_string(submitted), 0, 10));
        }
        must(coordinator::submit(coord, member, SubmitRequest{"history.toml", 0, std::move(batch), std::nullopt}),
             "submit");
        while (run_round() > 0) {
        }
    }
    row.fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Now a live pool: every GPU full of quarter-GPU jobs, started (submitted in as many sweeps as
    // the per-submission cap needs).
    for (int i = 0; i < 4 * fleet;) {
        std::vector<recipe::JobSpec> live;
        for (; i < 4 * fleet && live.size() < k_max_jobs_per_submission; ++i) {
            live.push_back(spec("live-" + std::to_string(i), 250, 1000));
        }
        must(coordinator::submit(coord, member, SubmitRequest{"live.toml", 0, std::move(live), std::nullopt}),
             "submit");
    }
    coord.tick();
    std::vector<std::vector<AttemptId>> running(workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i) {
        for (const auto& a : must(coordinator::assignments(coord, workers[i]), "poll")) {
            must(coordinator::start_attempt(coord, workers[i], a.attempt), "start");
            running[i].push_back(a.attempt);
        }
    }

    // A tick runs its pass only when something changed (pass_due): the quiet period is let pass
    // before each timed tick, so that each one decides, as after an event.
    const auto pass_now = [&] {
        clock.advance_ms(Coordinator::k_quiet_pass_ms);
        coord.tick();
    };
    row.tick_idle = time_it(reps, pass_now);
    // A pass that places one new single-core job on a fleet whose CPUs are mostly free: what every
    // one-job submission costs the coordinator thread. Each job is run to its end, untimed, so the
    // fleet is the same for every pass.
    std::map<WorkerId, std::size_t> index_of;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        index_of[*workers[i].worker] = i;
    }
    {
        std::vector<double> us;
        for (int i = 0; i < reps; ++i) {
            std::vector<recipe::JobSpec> one{spec("placed-" + std::to_string(i), 0, 1000)};
            const JobId id =
                must(coordinator::submit(coord, member, SubmitRequest{"one.toml", 0, std::move(one), std::nullopt}),
                     "submit")
                    .jobs[0];
            clock.advance_ms(Coordinator::k_quiet_pass_ms);
            const auto began = std::chrono::steady_clock::now();
            const auto woken = coord.tick();
            us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began).count());
            if (woken.size() != 1) {
                die("place", make_error(ErrorCode::internal, "pass " + std::to_string(i) + " placed the job on " +
                                                                 std::to_string(woken.size()) + " workers, not 1: " +
                                                                 must(read_job(coord, admin, id), "job").reason));
            }
            const Principal& w = workers[index_of.at(woken.front())];
            for (const auto& a : must(coordinator::assignments(coord, w), "poll")) {
                must(coordinator::start_attempt(coord, w, a.attempt), "start");
                must(coordinator::complete_attempt(coord, w, a.attempt, 0, ""), "complete");
            }
        }
        std::sort(us.begin(), us.end());
        row.tick_place = {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
    }
    row.poll = time_it(reps, [&] { (void)coordinator::assignments(coord, workers[0]); });
    row.heartbeat = time_it(reps, [&] { (void)coordinator::heartbeat(coord, workers[0], running[0]); });
    row.list_all = time_it(std::max(5, reps / 20), [&] { (void)list_jobs(coord, member, {}); });
    JobQuery newest;
    newest.limit = 50;
    row.list_50 = time_it(reps, [&] { (void)list_jobs(coord, member, newest); });
    // `queued` whole-GPU jobs that cannot fit while the quarter jobs run: each pass weighs them all.
    for (int left = queued; left > 0;) {
        std::vector<recipe::JobSpec> blocked;
        for (; left > 0 && blocked.size() < k_max_jobs_per_submission; --left) {
            blocked.push_back(spec("blocked-" + std::to_string(left), 1000, 1000));
        }
        must(coordinator::submit(coord, member, SubmitRequest{"blocked.toml", 0, std::move(blocked), std::nullopt}),
             "submit");
    }
    row.tick_queued = time_it(reps, pass_now);
    std::size_t bytes = 0;
    row.scrape = time_it(std::max(5, reps / 10), [&] { bytes = metrics.render(coord.metrics()).size(); });
    if (bytes == 0) {
        die("scrape", make_error(ErrorCode::internal, "an empty metrics text"));
    }
    // The dashboard's poll (GET /v1/pool) as an admin sees it.
    row.overview = time_it(std::max(5, reps / 10), [&] { (void)must(coord.overview(admin), "overview"); });
    // One-job submissions, committed each (the queue grows by `reps` jobs: last).
    int n = 0;
    row.submit = time_it(reps, [&] {
        std::vector<recipe::JobSpec> one{spec("sub-" + std::to_string(n++), 250, 100)};
        must(coordinator::submit(coord, member, SubmitRequest{"one.toml", 0, std::move(one), std::nullopt}), "submit");
    });
    coord.set_events(nullptr);
    return row;
}

std::string us(const Timing& t) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f / %.0f", t.median_us, t.p99_us);
    return buf;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"coordinator hot paths against the pool's history"};
    std::vector<std::int64_t> history{0, 10'000, 50'000};
    int reps = 200;
    int fleet = 4;
    int queued = 200;
    std::string dir = fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    app.add_option("--history", history, "finished jobs before timing (comma-separated)")->delimiter(',');
    app.add_option("--reps", reps, "repetitions per figure")->check(CLI::PositiveNumber);
    app.add_option("--workers", fleet, "workers, one A100 each (their GPUs are filled before timing)")
        ->check(CLI::Range(1, 100'000));
    app.add_option("--dir", dir, "where the SQLite file goes (tmpfs keeps fsync out of the figures)");
    app.add_option("--queued", queued, "jobs queued that fit nowhere while the passes are timed")
        ->check(CLI::Range(1, 1'000'000));
    std::string db_spec;
    app.add_option("--db", db_spec, "another store instead (postgresql://...; %h: the history value)");
    CLI11_PARSE(app, argc, argv);
    const fs::path base = fs::path(dir) / ("gpupool-coordinator-bench-" + std::to_string(::getpid()));

    const char* engine = db_spec.empty() ? "sqlite" : "postgres";
    std::printf("%-8s %9s %8s %16s %16s %18s %14s %14s %16s %14s %14s %14s %14s\n", "STORE", "HISTORY", "FILL_S",
                "TICK_IDLE_US", "TICK_PLACE_US", ("TICK_" + std::to_string(queued) + "Q_US").c_str(), "POLL_US",
                "HEARTBEAT_US", "LIST_ALL_US", "LIST_50_US", "SCRAPE_US", "OVERVIEW_US", "SUBMIT_US");
    std::printf("%-8s %9s %8s %16s %16s %18s %14s %14s %16s %14s %14s %14s %14s\n", "", "", "", "median / p99",
                "median / p99", "median / p99", "median / p99", "median / p99", "median / p99", "median / p99",
                "median / p99", "median / p99", "median / p99");
    for (auto h : history) {
        Row r = run(h, reps, base, db_spec, fleet, queued);
        std::printf("%-8s %9lld %8.1f %16s %16s %18s %14s %14s %16s %14s %14s %14s %14s\n", engine,
                    static_cast<long long>(r.history), r.fill_s, us(r.tick_idle).c_str(), us(r.tick_place).c_str(),
                    us(r.tick_queued).c_str(), us(r.poll).c_str(), us(r.heartbeat).c_str(), us(r.list_all).c_str(),
                    us(r.list_50).c_str(), us(r.scrape).c_str(), us(r.overview).c_str(), us(r.submit).c_str());
        std::fflush(stdout);
    }
    fs::remove_all(base);
    return 0;
}
