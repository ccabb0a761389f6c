#include "core/verify/spot_check.hpp"

#include <boost/math/special_functions/beta.hpp>

#include <algorithm>
#include <random>

namespace gpupool::verify {

double sample_probability(const SpotCheckPolicy& policy, const CheckRecord& record) {
    if (policy.fraction <= 0) {
        return 0;
    }
    double boost = 1;
    if (policy.warmup_checks > 0 && record.checks() < policy.warmup_checks) {
        const double left = 1.0 - static_cast<double>(record.checks()) / static_cast<double>(policy.warmup_checks);
        boost += (std::max(policy.warmup_boost, 1.0) - 1.0) * left;
    }
    return std::clamp(policy.fraction * boost, 0.0, 1.0);
}

double reliability(const CheckRecord& record) {
    return (1.0 + static_cast<double>(record.agreed)) / (2.0 + static_cast<double>(record.checks()));
}

double forging_probability(const SpotCheckPolicy& policy, const CheckRecord& record) {
    const double a = 1.0 + static_cast<double>(record.disagreed);
    const double b = 1.0 + static_cast<double>(record.agreed);
    const double x = std::clamp(policy.max_rate, 0.0, 1.0);
    return boost::math::ibetac(a, b, x); // P(r > x) for r ~ Beta(a, b)
}

bool quarantined(const SpotCheckPolicy& policy, const CheckRecord& record) {
    return record.disagreed > 0 && forging_probability(policy, record) > policy.confidence;
}

DetectionResult simulate_detection(const DetectionCase& c) {
    DetectionResult out;
    out.input = c;
    SpotCheckPolicy policy;
    policy.fraction = c.fraction;
    std::mt19937_64 rng(c.seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<std::int64_t> caught_at;
    std::vector<std::int64_t> forged_passed;
    std::int64_t within_100 = 0;
    std::int64_t jobs_total = 0;
    std::int64_t replicas_total = 0;
    for (int run = 0; run < c.runs; ++run) {
        CheckRecord record;
        std::int64_t passed = 0;
        std::int64_t job = 0;
        bool caught = false;
        for (job = 1; job <= c.max_jobs && !caught; ++job) {
            const bool forged = u(rng) < c.forge_rate;
            const bool glitched = !forged && u(rng) < c.glitch_rate;
            const bool wrong = forged || glitched;
            if (u(rng) >= sample_probability(policy, record)) {
                passed += forged ? 1 : 0;
                continue;
            }
            ++replicas_total;
            // The checker is honest (a checker's own glitch is as likely as the worker's: rare).
            const bool checker_wrong = u(rng) < c.glitch_rate;
            if (wrong == checker_wrong) {
                ++record.agreed; // both right, or (improbably) both wrong alike
            } else {
                ++replicas_total; // the tie-break, by a third honest worker
                const bool third_wrong = u(rng) < c.glitch_rate;
                if (third_wrong == checker_wrong) {
                    ++record.disagreed; // the majority is against the worker
                } else {
                    ++record.agreed; // the worker was right; the checker glitched
                }
            }
            caught = quarantined(policy, record);
        }
        jobs_total += job - 1;
        if (caught) {
            caught_at.push_back(job - 1);
            forged_passed.push_back(passed);
            within_100 += job - 1 <= 100 ? 1 : 0;
        }
    }
    out.quarantined_within_100 = static_cast<double>(within_100) / c.runs;
    out.quarantined_ever = static_cast<double>(caught_at.size()) / c.runs;
    out.checks_per_job = jobs_total > 0 ? static_cast<double>(replicas_total) / static_cast<double>(jobs_total) : 0;
    if (caught_at.size() * 2 > static_cast<std::size_t>(c.runs)) {
        std::sort(caught_at.begin(), caught_at.end());
        std::sort(forged_passed.begin(), forged_passed.end());
        // Runs never caught count as later than any caught one.
        const auto at = [&](double q) {
            const auto i = static_cast<std::size_t>(q * c.runs);
            return i < caught_at.size() ? caught_at[i] : std::int64_t{-1};
        };
        out.median_jobs = at(0.5);
        out.p90_jobs = at(0.9);
        out.forged_accepted_median = forged_passed[static_cast<std::size_t>(0.5 * c.runs)];
    }
    return out;
}

} // namespace gpupool::verify
