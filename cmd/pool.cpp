// `gpupool pool`: the pool at a glance in the terminal (GET /v1/pool, core/coordinator/overview.hpp):
// the totals, the workers and how much of each GPU is given out, what runs where, the queue with why
// each job waits, the jobs that ended last, and credits per team. --json prints the answer as it is.
#include "cmd/cli.hpp"
#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/api/pool.hpp"
#include "core/client/read_answer.hpp"
#include "core/credits/money.hpp"

#include <cstdio>
#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace {

std::string percent(std::int64_t part, std::int64_t whole) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.0f%%",
                  whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
    return buf;
}

// "0.25" of a GPU from milli-GPUs.
std::string gpu_share(std::int64_t milli) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(milli) / 1000.0);
    return buf;
}

// How a GPU's shares are held: "mps", "watchdog", or "NOT ENFORCED" (never silent).
std::string enforcement_text(const wire::PoolGpu& gpu) {
    const std::string& e = gpu.memory_enforcement;
    return e.empty() ? "?" : e == "none" ? "NOT ENFORCED" : e;
}

void print_workers(const std::vector<wire::PoolWorker>& workers) {
    std::vector<std::vector<std::string>> rows{
        {"WORKER", "NAME", "OWNER", "STATE", "GPU", "MODEL", "SHARES", "GIVEN OUT", "JOBS"}};
    for (const auto& w : workers) {
        const std::string id = std::to_string(w.id.value());
        bool first = true;
        for (const auto& g : w.gpus) {
            rows.push_back({first ? id : "", first ? w.name : "", first ? w.team : "", first ? w.presence : "",
                            std::to_string(g.index) + (g.healthy ? "" : " (unhealthy)"), g.model, enforcement_text(g),
                            percent(g.allocated_milli, 1000), std::to_string(g.jobs)});
            first = false;
        }
        if (first) {
            rows.push_back({id, w.name, w.team, w.presence, "-", "(CPU only)", "-", "-", "-"});
        }
    }
    print_table(rows);
}

void print_jobs(const std::string& title, const std::vector<wire::PoolJob>& jobs, bool running, bool queued,
                std::int64_t total) {
    std::cout << '\n' << title;
    if (queued && total > static_cast<std::int64_t>(jobs.size())) {
        std::cout << " (the first " << jobs.size() << " of " << total << ")";
    }
    std::cout << '\n';
    if (jobs.empty()) {
        std::cout << "  none\n";
        return;
    }
    std::vector<std::vector<std::string>> rows;
    if (running) {
        rows.push_back({"JOB", "NAME", "TEAM", "BY", "WORKER", "GPU", "SHARE", "SINCE (UTC)"});
    } else if (queued) {
        rows.push_back({"JOB", "NAME", "TEAM", "BY", "SUBMITTED (UTC)", "WHY IT WAITS"});
    } else {
        rows.push_back({"JOB", "NAME", "TEAM", "STATE", "EXIT", "ENDED (UTC)", "REASON"});
    }
    for (const auto& j : jobs) {
        const std::string id = std::to_string(j.id.value());
        if (running) {
            rows.push_back({id, j.name, j.team, j.submitter, j.worker_name, std::to_string(j.gpu_index),
                            gpu_share(j.gpu_milli), format_time(j.since)});
        } else if (queued) {
            rows.push_back({id, j.name, j.team, j.submitter, format_time(j.since), j.why});
        } else {
            rows.push_back({id, j.name, j.team, j.state, j.exit_code ? std::to_string(*j.exit_code) : "-",
                            format_time(j.since), j.why});
        }
    }
    print_table(rows);
}

void print_overview(const wire::PoolOverviewReply& o) {
    const wire::PoolTotals& t = o.totals;
    const std::int64_t online = t.gpu_milli_online;
    const std::int64_t given = t.gpu_milli_allocated;
    std::cout << "pool at " << format_time(o.at) << " UTC: " << t.workers_online << " of " << t.workers
              << " workers online, " << t.gpus_online << " GPUs, " << gpu_share(given) << " of " << gpu_share(online)
              << " GPUs given out (" << percent(given, online) << "), " << t.gpus_shared
              << " GPUs shared by several jobs; " << t.jobs_running << " running, " << t.jobs_queued << " queued\n\n";
    print_workers(o.workers);
    if (o.detail == "summary") {
        std::cout << "(GIVEN OUT and JOBS count your team's jobs only; the totals above are the pool's)\n";
    }
    print_jobs("Running", o.running, true, false, 0);
    print_jobs("Queue", o.queued, false, true, t.jobs_queued);
    print_jobs("Ended lately", o.recent, false, false, 0);
    std::cout << "\nCredits\n";
    std::vector<std::vector<std::string>> rows{{"TEAM", "BALANCE", "IN ESCROW"}};
    for (const auto& c : o.credits) {
        rows.push_back({c.team, credits::format_credits(c.balance_micro), credits::format_credits(c.held_micro)});
    }
    print_table(rows);
}

struct PoolOptions {
    GlobalOptions global{};
};

int run_pool(const PoolOptions& o) {
    auto api = connect(o.global);
    if (!api) {
        return k_exit_failed;
    }
    auto r = client::read_answer(api->get("/v1/pool"), "GET /v1/pool", wire::pool_overview_from_json);
    if (!r) {
        report_error(o.global, r.error());
        return k_exit_failed;
    }
    if (o.global.json) {
        std::cout << wire::to_json(*r).dump(2) << '\n';
    } else {
        print_overview(*r);
    }
    return k_exit_ok;
}

} // namespace

void register_pool(Cli& cli) {
    auto o = std::make_shared<PoolOptions>();
    CLI::App* sub = add_command(cli, "pool",
                                "The pool at a glance: workers and how much of each GPU is given out, what runs "
                                "where, the queue and why it waits, recent jobs, credits");
    add_help_footer(sub, "gpupool pool\ngpupool --json pool", "docs/operating.md (Watching the pool)",
                    Reach::coordinator);
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_pool(*o);
    });
}

} // namespace gpupool::cmd
