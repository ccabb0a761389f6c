// `gpupool sim --mode verify`: the spot-check policy (core/verify/spot_check.hpp) against workers that
// forge a share of their results, and against honest ones that glitch: how soon a forger is
// quarantined, what the checks cost, and how often an honest worker is wrongly quarantined. The
// figures docs/evidence.md quotes come from here.
#include "cmd/cli_app.hpp"
#include "cmd/sim.hpp"
#include "core/verify/spot_check.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

namespace gpupool::cmd {

int run_verify_mode(const GlobalOptions& global, const SimOptions& args) {
    const std::vector<double> fractions{0.01, 0.02, 0.05, 0.1, 0.2};
    const std::vector<double> forge_rates{0.01, 0.05, 0.2, 0.5, 1.0};
    const int runs = std::max(args.seeds, 1) * 200; // --seeds 10: 2,000 runs a case
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    auto one = [&](double fraction, double forge, double glitch) {
        verify::DetectionCase c;
        c.fraction = fraction;
        c.forge_rate = forge;
        c.glitch_rate = glitch;
        c.runs = runs;
        c.max_jobs = 1000;
        c.seed = args.first_seed + 1;
        return verify::simulate_detection(c);
    };
    std::vector<verify::DetectionResult> results;
    for (double f : fractions) {
        for (double r : forge_rates) {
            results.push_back(one(f, r, 0.0));
        }
        results.push_back(one(f, 0.0, 0.0));   // honest
        results.push_back(one(f, 0.0, 0.001)); // honest, glitching once in 1,000 results
    }
    for (const auto& r : results) {
        rows.push_back({{"fraction", r.input.fraction},
                        {"forge_rate", r.input.forge_rate},
                        {"glitch_rate", r.input.glitch_rate},
                        {"runs", r.input.runs},
                        {"quarantined_within_100_jobs", r.quarantined_within_100},
                        {"quarantined_within_1000_jobs", r.quarantined_ever},
                        {"median_jobs_to_quarantine", r.median_jobs},
                        {"p90_jobs_to_quarantine", r.p90_jobs},
                        {"forged_results_accepted_median", r.forged_accepted_median},
                        {"replicas_per_job", r.checks_per_job}});
    }
    if (global.json) {
        std::cout << nlohmann::ordered_json{{"mode", "verify"}, {"cases", rows}}.dump() << '\n';
        return k_exit_ok;
    }
    std::cout << "gpupool sim --mode verify: " << runs << " runs a case, up to 1,000 jobs each (seed "
              << args.first_seed + 1 << ")\n"
              << "fraction  forges  glitches  caught<=100  caught<=1000  median  p90   forged passed  replicas/job\n";
    for (const auto& r : results) {
        char line[200];
        std::snprintf(line, sizeof line, "%8.2f  %6.2f  %8.3f  %10.1f%%  %11.1f%%  %6lld  %4lld  %13lld  %12.3f\n",
                      r.input.fraction, r.input.forge_rate, r.input.glitch_rate, 100 * r.quarantined_within_100,
                      100 * r.quarantined_ever, static_cast<long long>(r.median_jobs),
                      static_cast<long long>(r.p90_jobs), static_cast<long long>(r.forged_accepted_median),
                      r.checks_per_job);
        std::cout << line;
    }
    std::cout << "(median and p90: jobs run until quarantine; -1 where most runs were never quarantined)\n";
    return k_exit_ok;
}

} // namespace gpupool::cmd
