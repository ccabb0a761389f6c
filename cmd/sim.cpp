// `gpupool sim`: replays a cluster trace (or a generated workload) through the scheduler.
// The engines live in core/sim; this file is option wiring, data-file discovery and printing.
#include "cmd/sim.hpp"

#include "cmd/cli_app.hpp"
#include "core/sched/placement.hpp"
#include "core/sched/scorers.hpp"
#include "core/sim/alloc_sim.hpp"
#include "core/sim/decision_bench.hpp"
#include "core/sim/time_sim.hpp"
#include "core/sim/trace.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

namespace gpupool::cmd {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_default_data = "../shared/data/alibaba-gpu-v2023";

// The data folder: --data-dir, else ../shared/data/alibaba-gpu-v2023 next to the repository that
// holds the working directory or the binary (the binary sits in <repo>/build*/).
fs::path find_data_dir(const SimOptions& args) {
    if (!args.data_dir.empty()) {
        return args.data_dir;
    }
    std::vector<fs::path> starts{fs::current_path()};
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        starts.push_back(exe.parent_path());
    }
    for (const auto& start : starts) {
        for (fs::path d = start; !d.empty(); d = d.parent_path()) {
            fs::path candidate = d / k_default_data;
            if (fs::exists(candidate / "openb_node_list_gpu_node.csv", ec)) {
                return candidate.lexically_normal();
            }
            if (d == d.parent_path()) {
                break;
            }
        }
    }
    return fs::current_path() / k_default_data;
}

struct Inputs {
    fs::path nodes;
    fs::path pods;
    fs::path published;
    std::string workload;
};

Inputs resolve_inputs(const SimOptions& args) {
    const fs::path dir = find_data_dir(args);
    Inputs in;
    in.nodes = args.nodes.empty() ? dir / "openb_node_list_gpu_node.csv" : fs::path(args.nodes);
    in.pods = args.trace.empty() ? dir / "openb_pod_list_default.csv" : fs::path(args.trace);
    in.published = args.published.empty() ? dir / "fgd_published_alloc.csv" : fs::path(args.published);
    in.workload = args.workload.empty() ? in.pods.stem().string() : args.workload;
    return in;
}

// The trace's cluster and pods, read once per run for the mode that replays them.
struct Trace {
    Inputs in;
    std::vector<sim::TraceNode> nodes;
    std::vector<sim::TracePod> pods;
};

std::optional<Trace> load_trace(const GlobalOptions& global, const SimOptions& args) {
    Trace t;
    t.in = resolve_inputs(args);
    auto nodes = sim::load_nodes(t.in.nodes);
    if (!nodes) {
        report_error(global, nodes.error());
        return std::nullopt;
    }
    auto pods = sim::load_pods(t.in.pods);
    if (!pods) {
        report_error(global, pods.error());
        return std::nullopt;
    }
    t.nodes = std::move(*nodes);
    t.pods = std::move(*pods);
    return t;
}

const sim::PublishedResult* find_published(const std::vector<sim::PublishedResult>& rows, const std::string& workload,
                                           const std::string& policy) {
    for (const auto& r : rows) {
        if (r.workload == workload && sim::policy_key(r.policy) == policy) {
            return &r;
        }
    }
    return nullptr;
}

std::string fixed(double v, int decimals = 2) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

std::string pub(const sim::PublishedResult* p, double v, int decimals = 2) {
    return p == nullptr ? "-" : fixed(v, decimals);
}

std::size_t cp_index(int k) {
    auto it = std::find(sim::k_checkpoints.begin(), sim::k_checkpoints.end(), k);
    return static_cast<std::size_t>(it - sim::k_checkpoints.begin());
}

nlohmann::ordered_json summary_json(const sim::AllocSummary& s, const sim::PublishedResult* p, double wall_s) {
    nlohmann::ordered_json alloc = nlohmann::ordered_json::object();
    for (std::size_t k = 0; k < sim::k_checkpoints.size(); ++k) {
        alloc[std::to_string(sim::k_checkpoints[k])] = s.alloc_pct[k];
    }
    nlohmann::ordered_json j = {{"policy", sched::to_string(s.scorer)},
                                {"alloc_pct_at_arrived", alloc},
                                {"sd_at_130", s.sd_at_130},
                                {"unallocated_gpus_at_130", s.unallocated_gpus_at_130},
                                {"frag_pct_of_cluster_at_100", s.frag_pct_at_100},
                                {"wall_s", wall_s}};
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    for (const auto& r : s.runs) {
        runs.push_back({{"seed", r.seed},
                        {"alloc_pct_at_130", r.alloc_pct.back()},
                        {"alloc_pct_at_100", r.alloc_pct[cp_index(100)]},
                        {"pods", r.pods},
                        {"unplaced", r.unplaced}});
    }
    j["runs"] = runs;
    if (p != nullptr) {
        nlohmann::ordered_json palloc = nlohmann::ordered_json::object();
        for (std::size_t k = 0; k < sim::k_checkpoints.size() && k < p->alloc_pct.size(); ++k) {
            palloc[std::to_string(sim::k_checkpoints[k])] = p->alloc_pct[k];
        }
        j["published"] = {{"policy", p->policy},
                          {"alloc_pct_at_arrived", palloc},
                          {"sd_at_130", p->sd_at_130},
                          {"unallocated_gpus_at_130", p->unallocated_gpus_at_130},
                          {"frag_pct_of_cluster_at_100", p->frag_pct_at_100}};
    } else {
        j["published"] = nullptr;
    }
    return j;
}

int run_alloc_mode(const GlobalOptions& global, const SimOptions& args, Trace trace) {
    const Inputs& in = trace.in;
    auto& nodes = trace.nodes;
    auto& pods = trace.pods;
    std::vector<sim::PublishedResult> published;
    if (auto pr = sim::load_published(in.published)) {
        published = std::move(*pr);
    } else if (!args.published.empty()) {
        report_error(global, pr.error());
        return k_exit_failed;
    }
    std::vector<sched::ScorerKind> policies;
    if (args.policy == "all") {
        for (std::size_t i = 0; i < sched::scorers().size(); ++i) {
            policies.emplace_back(static_cast<std::uint8_t>(i)); // every scorer the registry holds
        }
    } else {
        auto k = sched::parse_scorer(args.policy);
        if (!k) {
            report_error(global, k.error());
            return k_exit_usage;
        }
        policies = {*k};
    }
    std::sort(pods.begin(), pods.end(), [](const sim::TracePod& a, const sim::TracePod& b) { return a.name < b.name; });
    sim::SimCluster cluster = sim::build_cluster(nodes);
    auto requests = sim::to_requests(pods, cluster.models, args.no_sharing);
    const unsigned threads = args.threads > 0 ? args.threads : std::max(1U, std::thread::hardware_concurrency());
    const std::string workload = in.workload + (args.no_sharing ? " (no sharing)" : "");
    const std::int64_t gpus = cluster.total_gpu_milli / sched::k_milli_per_gpu;

    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    if (!global.json) {
        std::cout << "gpupool sim: " << workload << ", " << nodes.size() << " nodes, " << gpus << " GPUs, "
                  << requests.size() << " pods; " << args.seeds << " seed(s) from " << args.first_seed << ", tune "
                  << fixed(args.tune, 2) << "x, " << threads << " thread(s)\n";
        if (args.no_sharing) {
            std::cout << "(no-sharing counterfactual: published figures are for the sharing workload)\n";
        }
        std::cout << "policy    alloc@100  (paper)  alloc@130  (paper)  sd@130  unalloc@130  (paper)  frag@100  (paper)"
                     "   wall_s\n";
    }
    for (auto policy : policies) {
        sim::AllocOptions opt;
        opt.scorer = policy;
        opt.seeds = args.seeds;
        opt.first_seed = args.first_seed;
        opt.tune_ratio = args.tune;
        opt.threads = threads;
        opt.tie_break = args.tie_break == "first" ? sched::TieBreak::first : sched::TieBreak::random;
        const auto start = std::chrono::steady_clock::now();
        sim::AllocSummary s = sim::run_alloc(cluster, requests, opt);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string key = policy == sched::ScorerKind::fgd_k8s ? "fgd" : sched::to_string(policy);
        const sim::PublishedResult* p = args.no_sharing ? nullptr : find_published(published, in.workload, key);
        if (global.json) {
            results.push_back(summary_json(s, p, wall));
            continue;
        }
        const std::size_t i100 = cp_index(100);
        char line[256];
        std::snprintf(
            line, sizeof line, "%-8s  %9s  %7s  %9s  %7s  %6s  %11s  %7s  %8s  %7s  %7s\n", sched::to_string(policy),
            fixed(s.alloc_pct[i100]).c_str(), pub(p, p ? p->alloc_pct[i100] : 0).c_str(),
            fixed(s.alloc_pct.back()).c_str(), pub(p, p ? p->alloc_pct.back() : 0).c_str(), fixed(s.sd_at_130).c_str(),
            fixed(s.unallocated_gpus_at_130, 0).c_str(), pub(p, p ? p->unallocated_gpus_at_130 : 0, 0).c_str(),
            fixed(s.frag_pct_at_100).c_str(), pub(p, p ? p->frag_pct_at_100 : 0).c_str(), fixed(wall, 2).c_str());
        std::cout << line << std::flush;
    }
    if (global.json) {
        nlohmann::ordered_json out = {{"mode", "alloc"},
                                      {"workload", in.workload},
                                      {"no_sharing", args.no_sharing},
                                      {"nodes", nodes.size()},
                                      {"gpus", gpus},
                                      {"pods", requests.size()},
                                      {"seeds", args.seeds},
                                      {"first_seed", args.first_seed},
                                      {"tune", args.tune},
                                      {"checkpoints", sim::k_checkpoints},
                                      {"results", results}};
        std::cout << out.dump(2) << '\n';
    } else {
        std::cout << "alloc@k: allocated GPU / cluster GPU (%) when the GPU requested by arrived pods reaches k% of "
                     "the cluster; paper: fgd_published_alloc.csv (10 seeds)\n";
    }
    return k_exit_ok;
}

// The workload and cluster of a time run: generated, or the trace's.
struct TimeWorkload {
    sim::SimCluster cluster;
    std::vector<sim::TimedJob> jobs;
    std::vector<sched::TeamShare> teams;
    std::string source;
};

TimeWorkload time_workload(const SimOptions& args, std::optional<Trace> trace) {
    TimeWorkload w;
    if (args.generate) {
        sim::GenerateOptions g;
        g.teams = std::max(1, args.teams);
        g.jobs = args.jobs > 0 ? args.jobs : 2000;
        g.workers = std::max(1, args.workers);
        g.load = args.load;
        g.seed = args.first_seed;
        g.team_weights = args.team_weights;
        g.checkpoint_fraction = args.checkpoint_fraction;
        g.checkpoint_interval_s = args.checkpoint_interval_s;
        auto gen = sim::generate_workload(g);
        w.cluster = std::move(gen.cluster);
        w.jobs = std::move(gen.jobs);
        w.teams = std::move(gen.teams);
        w.source = "generated (" + std::to_string(g.teams) + " teams, " + std::to_string(g.jobs) + " jobs, " +
                   std::to_string(g.workers) + " workers x 8 GPUs, load " + fixed(g.load, 2) + ", " +
                   fixed(100.0 * g.checkpoint_fraction, 0) + "% checkpointing every " +
                   std::to_string(g.checkpoint_interval_s) + " s, seed " + std::to_string(g.seed) + ")";
        return w;
    }
    const Inputs& in = trace->in;
    w.cluster = sim::build_cluster(trace->nodes);
    w.jobs = sim::trace_jobs(trace->pods, w.cluster.models);
    for (auto& j : w.jobs) { // compress arrivals (run times unchanged) to raise the load
        j.request.submitted_at =
            static_cast<std::int64_t>(static_cast<double>(j.request.submitted_at) * args.arrival_scale);
    }
    if (args.jobs > 0 && args.jobs < static_cast<std::int64_t>(w.jobs.size())) {
        w.jobs.resize(static_cast<std::size_t>(args.jobs));
    }
    for (std::size_t i = 0; i < args.team_weights.size(); ++i) {
        w.teams.push_back(sched::TeamShare{sched::TeamId(static_cast<std::int64_t>(i) + 1), args.team_weights[i], 0.0});
    }
    w.source = in.pods.string() + " (creation/deletion times, arrivals x " + fixed(args.arrival_scale, 3) + ")";
    return w;
}

// The scheduling policy of a time run: the pool's defaults, or the rules before issue #12.
sched::Policy time_policy(const SimOptions& args, sched::ScorerKind scorer) {
    sched::Policy policy;
    policy.placement.scorer = scorer;
    policy.seed = args.first_seed;
    policy.ordering.half_life_s = args.half_life_s;
    policy.ordering.mode = args.order == "class-first"   ? sched::OrderMode::class_first
                           : args.order == "share-first" ? sched::OrderMode::share_first
                                                         : sched::OrderMode::high_first;
    policy.preemption.enabled = !args.no_preemption;
    policy.preemption.min_runtime_s = args.min_runtime_s;
    policy.preemption.grace_s = args.grace_s;
    if (args.max_preemptions >= 0) {
        policy.preemption.max_per_job = args.max_preemptions;
    }
    return args.old_policy ? sched::legacy_policy(policy) : policy;
}

double waste_pct(const sim::TimeSimResult& r) {
    return r.gpu_seconds > 0.0 ? 100.0 * r.lost_gpu_seconds / r.gpu_seconds : 0.0;
}

nlohmann::ordered_json contended_json(const sim::ContendedResult& c) {
    nlohmann::ordered_json teams = nlohmann::ordered_json::array();
    for (const auto& t : c.teams) {
        teams.push_back({{"team", t.team},
                         {"weight", t.weight},
                         {"share", t.share},
                         {"fair_share", t.fair_share},
                         {"deviation", t.deviation}});
    }
    return {{"seconds", c.contended_s},
            {"gpu_seconds", c.gpu_seconds},
            {"worst_deviation", c.worst_deviation},
            {"jain_index", c.jain_index},
            {"teams", teams}};
}

void print_time_json(const SimOptions& args, const std::string& source, const sim::TimeSimResult& r, double wall) {
    nlohmann::ordered_json util = nlohmann::ordered_json::array();
    for (const auto& [t, u] : r.utilization) {
        util.push_back({{"time", t}, {"allocated", u}});
    }
    nlohmann::ordered_json tj = nlohmann::ordered_json::array();
    for (const auto& t : r.teams) {
        tj.push_back(
            {{"team", t.team}, {"weight", t.weight}, {"gpu_seconds", t.gpu_seconds}, {"jobs_started", t.jobs_started}});
    }
    nlohmann::ordered_json out = {
        {"mode", "time"},
        {"source", source},
        {"policy", args.policy},
        {"rules", args.old_policy ? "old" : "current"},
        {"jobs", r.jobs},
        {"started", r.started},
        {"finished", r.finished},
        {"rejected", r.rejected},
        {"preemptions", r.preemptions},
        {"preempted_jobs", r.preempted_jobs},
        {"most_preemptions_of_a_job", r.most_preemptions_of_a_job},
        {"gpu_seconds", r.gpu_seconds},
        {"lost_gpu_seconds", r.lost_gpu_seconds},
        {"waste_pct", waste_pct(r)},
        {"queueing_delay_s",
         {{"p50", r.delay_p50_s}, {"p90", r.delay_p90_s}, {"p99", r.delay_p99_s}, {"p99_high", r.delay_p99_high_s}}},
        {"utilization_avg", r.utilization_avg},
        {"utilization", util},
        {"contended", contended_json(r.contended)},
        {"jain_index", r.jain_index},
        {"teams", tj},
        {"schedule_calls", r.schedule_calls},
        {"wall_s", wall}};
    std::cout << out.dump(2) << '\n';
}

void print_time_text(const SimOptions& args, const std::string& source, const sim::TimeSimResult& r, double wall) {
    std::cout << "gpupool sim --mode time: " << source << ", policy " << args.policy
              << (args.old_policy ? " (old rules)" : "") << "\n"
              << "jobs " << r.jobs << ", started " << r.started << ", finished " << r.finished << ", rejected "
              << r.rejected << "\n"
              << "preemptions " << r.preemptions << " of " << r.preempted_jobs << " jobs (most of one job "
              << r.most_preemptions_of_a_job << "); waste: lost " << fixed(r.lost_gpu_seconds / 3600.0, 1) << " of "
              << fixed(r.gpu_seconds / 3600.0, 1) << " GPU-hours (" << fixed(waste_pct(r), 1) << "%)\n"
              << "queueing delay: p50 " << fixed(r.delay_p50_s, 0) << "s, p90 " << fixed(r.delay_p90_s, 0) << "s, p99 "
              << fixed(r.delay_p99_s, 0) << "s (high priority p99 " << fixed(r.delay_p99_high_s, 0) << "s)\n"
              << "GPU utilization: average " << fixed(100.0 * r.utilization_avg, 1) << "%; samples:";
    for (const auto& [t, u] : r.utilization) {
        std::cout << ' ' << fixed(100.0 * u, 0) << '%';
    }
    const sim::ContendedResult& c = r.contended;
    std::cout << "\nfairness under contention (" << fixed(c.contended_s / 3600.0, 1)
              << " h with 2+ teams queued): worst |share - fair| / fair " << fixed(100.0 * c.worst_deviation, 1)
              << "%, Jain " << fixed(c.jain_index, 3) << " over share / fair\n";
    for (const auto& t : c.teams) {
        std::cout << "  team " << t.team << " weight " << fixed(t.weight, 1) << ": " << fixed(100.0 * t.share, 1)
                  << "% of GPU-time, fair " << fixed(100.0 * t.fair_share, 1) << "% ("
                  << (t.share >= t.fair_share ? "+" : "-") << fixed(100.0 * t.deviation, 1) << "%)\n";
    }
    std::cout << "fairness (Jain, whole-run GPU-time / weight over " << r.teams.size()
              << " teams; blind to contention): " << fixed(r.jain_index, 3) << "\n";
    for (const auto& t : r.teams) {
        std::cout << "  team " << t.team << " weight " << fixed(t.weight, 1) << ": " << fixed(t.gpu_seconds / 3600.0, 1)
                  << " GPU-hours, " << t.jobs_started << " jobs\n";
    }
    std::cout << r.schedule_calls << " schedule() calls in " << fixed(wall, 2) << " s\n";
}

int run_time_mode(const GlobalOptions& global, const SimOptions& args, std::optional<Trace> trace) {
    TimeWorkload w = time_workload(args, std::move(trace));
    auto scorer = sched::parse_scorer(args.policy);
    if (!scorer) {
        report_error(global, scorer.error());
        return k_exit_usage;
    }
    sim::TimeSimOptions opt;
    opt.policy = time_policy(args, *scorer);
    opt.max_events = args.max_events;
    if (*scorer == sched::ScorerKind::fgd) {
        std::vector<sched::JobRequest> reqs;
        for (const auto& j : w.jobs) {
            reqs.push_back(j.request);
        }
        opt.policy.placement.workload = sched::typical_workload(reqs);
    }
    const auto start = std::chrono::steady_clock::now();
    sim::TimeSimResult r = sim::run_time_sim(w.cluster, w.jobs, w.teams, opt);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (global.json) {
        print_time_json(args, w.source, r, wall);
    } else {
        print_time_text(args, w.source, r, wall);
    }
    return k_exit_ok;
}

int run_decision_mode(const GlobalOptions& global, const SimOptions& args, const Trace& trace) {
    auto scorer = sched::parse_scorer(args.policy);
    if (!scorer) {
        report_error(global, scorer.error());
        return k_exit_usage;
    }
    sim::SimCluster cluster = sim::build_cluster(trace.nodes);
    auto requests = sim::to_requests(trace.pods, cluster.models, false);
    sim::DecisionBenchOptions opt;
    opt.scorer = *scorer;
    opt.seed = args.first_seed;
    opt.queued = args.jobs > 0 ? static_cast<std::size_t>(args.jobs) : 10000;
    const auto origin = std::chrono::steady_clock::now();
    auto now_s = [origin] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count(); };
    sim::DecisionBenchResult r = sim::run_decision_bench(cluster, requests, opt, now_s);
    std::vector<double> d = r.decision_s;
    std::sort(d.begin(), d.end());
    auto pct = [&](double p) {
        if (d.empty()) {
            return 0.0;
        }
        auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(d.size())));
        return d[std::clamp<std::size_t>(rank, 1, d.size()) - 1];
    };
    if (global.json) {
        nlohmann::ordered_json out = {
            {"mode", "decision"},
            {"policy", args.policy},
            {"workers", r.workers},
            {"gpus", r.gpus},
            {"loaded_pct", r.loaded_pct},
            {"queued", r.queued},
            {"decision_ms", {{"p50", 1e3 * pct(50)}, {"p99", 1e3 * pct(99)}, {"max", 1e3 * pct(100)}}},
            {"schedule_s", r.schedule_s},
            {"schedule_placed", r.schedule_placed}};
        std::cout << out.dump(2) << '\n';
        return k_exit_ok;
    }
    std::cout << "gpupool sim --mode decision: " << r.workers << " workers, " << r.gpus << " GPUs loaded to "
              << fixed(r.loaded_pct, 1) << "%, " << r.queued << " queued jobs, policy " << args.policy << "\n"
              << "one decision (place one job): p50 " << fixed(1e3 * pct(50), 3) << " ms, p99 "
              << fixed(1e3 * pct(99), 3) << " ms, max " << fixed(1e3 * pct(100), 3) << " ms over " << d.size()
              << " jobs\n"
              << "one schedule() over the whole queue: " << fixed(r.schedule_s, 3) << " s, " << r.schedule_placed
              << " placed\n";
    return k_exit_ok;
}

} // namespace

int run_sim(const SimOptions& args) {
    const GlobalOptions& global = args.global;
    if (args.mode == "verify") {
        return run_verify_mode(global, args); // no trace: sim_verify.cpp
    }
    // The trace is read here, once, for whichever mode replays it (all but a generated time run).
    std::optional<Trace> trace;
    if (!(args.mode == "time" && args.generate)) {
        trace = load_trace(global, args);
        if (!trace) {
            return k_exit_failed;
        }
    }
    if (args.mode == "time") {
        return run_time_mode(global, args, std::move(trace));
    }
    if (args.mode == "decision") {
        return run_decision_mode(global, args, *trace);
    }
    return run_alloc_mode(global, args, std::move(*trace));
}

void register_sim(Cli& cli) {
    CLI::App* sub =
        add_command(cli, "sim", "Replay a cluster trace through the scheduler and report allocation and fragmentation");
    add_help_footer(sub, "gpupool sim --policy all\ngpupool sim --mode time --policy fgd", "docs/scheduler.md",
                    Reach::local);
    auto args = std::make_shared<SimOptions>();
    sub->add_option("--mode", args->mode,
                    "alloc: the FGD paper's arrivals-only protocol (default); time: arrivals and departures over "
                    "time; decision: latency of one decision on the trace's cluster with a long queue; verify: how "
                    "soon spot checks catch a worker that forges results (docs/evidence.md)")
        ->check(CLI::IsMember({"alloc", "time", "decision", "verify"}));
    sub->add_option("--policy", args->policy, "Placement scorer: fgd, bestfit, packing, random, or all (alloc mode)");
    sub->add_option("--data-dir", args->data_dir,
                    "Folder with the Alibaba trace (default ../shared/data/alibaba-gpu-v2023 beside the repository)");
    sub->add_option("--trace", args->trace, "Pod list CSV (default <data-dir>/openb_pod_list_default.csv)");
    sub->add_option("--nodes", args->nodes, "Node list CSV (default <data-dir>/openb_node_list_gpu_node.csv)");
    sub->add_option("--published", args->published,
                    "Published results CSV to compare with (default <data-dir>/fgd_published_alloc.csv)");
    sub->add_option("--workload", args->workload, "Workload name in the published CSV (default: the pod file's name)");
    sub->add_option("--seeds", args->seeds, "Number of seeds (default 10)")->check(CLI::Range(1, 1000));
    sub->add_option("--first-seed", args->first_seed, "First seed (default 0); also the generator's seed in time mode");
    sub->add_option("--tune", args->tune,
                    "Append random pods until requested GPU reaches this x cluster GPUs (default 1.3)")
        ->check(CLI::Range(0.0, 10.0));
    sub->add_flag("--no-sharing", args->no_sharing, "Counterfactual: round fractional GPU requests up to a whole GPU");
    sub->add_option("--threads", args->threads, "Threads for seeds (default: all cores)");
    sub->add_option("--tie-break", args->tie_break, "Equal scores: random (seeded, default) or first (worker order)")
        ->check(CLI::IsMember({"random", "first"}));
    sub->add_flag("--generate", args->generate, "Time mode: a generated workload instead of the trace");
    sub->add_option("--teams", args->teams, "Generated: teams (default 4)")->check(CLI::Range(1, 64));
    sub->add_option(
           "--jobs", args->jobs,
           "Generated: jobs (default 2000); trace: replay only the first N; decision: queue length (default 10000)")
        ->check(CLI::Range(1, 10000000));
    sub->add_option("--workers", args->workers, "Generated: workers of 8 GPUs (default 32)")
        ->check(CLI::Range(1, 10000));
    sub->add_option("--load", args->load, "Generated: offered GPU load / cluster GPUs (default 1.2)")
        ->check(CLI::Range(0.01, 100.0));
    sub->add_option("--team-weights", args->team_weights, "Fair-share weights of teams 1..n (default 1 each)");
    sub->add_option("--min-runtime", args->min_runtime_s,
                    "Preemption: minimum run time of a victim, seconds (default 600)");
    sub->add_option("--grace", args->grace_s, "Preemption: grace period, seconds (default 60)");
    sub->add_option("--half-life", args->half_life_s, "Fair share: half-life of usage, seconds (default 7 days)");
    sub->add_flag("--no-preemption", args->no_preemption, "Time mode: never preempt");
    sub->add_flag("--old-policy", args->old_policy,
                  "Time mode: the rules before issue #12 (classes first across teams, fewest victims, no cap per job)");
    sub->add_option("--order", args->order,
                    "Time mode: high-first (default: submitted-high jobs, then fair share, then class within a "
                    "team), share-first, or class-first (the old order)")
        ->check(CLI::IsMember({"high-first", "share-first", "class-first"}));
    sub->add_option("--max-preemptions", args->max_preemptions,
                    "Preemption: earlier attempts after which a job is not preempted again (default 1; 0 = no cap)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000}));
    sub->add_option("--checkpoint-fraction", args->checkpoint_fraction,
                    "Generated: fraction of jobs that checkpoint and lose only the work since their last save "
                    "(default 0)")
        ->check(CLI::Range(0.0, 1.0));
    sub->add_option("--checkpoint-interval", args->checkpoint_interval_s,
                    "Generated: seconds between a checkpointing job's saves (default 600)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{86400 * 30}));
    sub->add_option("--arrival-scale", args->arrival_scale,
                    "Time mode, trace: multiply arrival times by this (< 1 compresses arrivals; run times unchanged)")
        ->check(CLI::Range(0.0001, 1000.0));
    sub->add_option("--max-events", args->max_events, "Time mode: stop after this many event times (0 = all)");
    sub->callback([&cli, args] {
        args->global = cli.global;
        cli.exit_code = run_sim(*args);
    });
}

} // namespace gpupool::cmd
