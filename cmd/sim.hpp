// `gpupool sim`: replays a cluster trace (or a generated workload) through the scheduler: the FGD
// paper's allocation protocol, a run over time, or the latency of one decision.
// run_sim does the work for parsed options (tests call it without argv); register_sim (cli.hpp)
// wires it to the command line.
#pragma once

#include "cmd/cli.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::cmd {

struct SimOptions {
    GlobalOptions global{};
    std::string mode = "alloc";
    std::string policy = "fgd";
    std::string data_dir{};
    std::string trace{};
    std::string nodes{};
    std::string published{};
    std::string workload{};
    int seeds = 10;
    std::uint64_t first_seed = 0;
    double tune = 1.3;
    bool no_sharing = false;
    unsigned threads = 0;
    std::string tie_break = "random";
    // time mode
    bool generate = false;
    int teams = 4;
    std::int64_t jobs = 0; // 0: 2000 generated, the whole trace, 10000 queued (decision)
    int workers = 32;
    double load = 1.2;
    std::vector<double> team_weights{};
    std::int64_t min_runtime_s = 600;
    std::int64_t grace_s = 60;
    double half_life_s = 7.0 * 24 * 3600;
    bool no_preemption = false;
    bool old_policy = false;           // sched::legacy_policy: the rules before issue #12
    std::string order = "high-first";  // sched::OrderMode
    std::int64_t max_preemptions = -1; // per job; -1: the policy's default, 0: no cap
    double checkpoint_fraction = 0.0;  // generated: jobs that checkpoint
    std::int64_t checkpoint_interval_s = 600;
    std::int64_t max_events = 0;
    double arrival_scale = 1.0;
};

// The exit code (cli.hpp); results go to stdout, problems to stderr.
int run_sim(const SimOptions& options);

// `--mode verify` (sim_verify.cpp): the spot-check policy's detection curve; needs no trace.
int run_verify_mode(const GlobalOptions& global, const SimOptions& args);

} // namespace gpupool::cmd
