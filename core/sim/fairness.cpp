#include "core/sim/fairness.hpp"

#include "core/sim/time_sim.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpupool::sim {

std::vector<double> water_fill(double capacity, const std::vector<double>& demands,
                               const std::vector<double>& weights) {
    const std::size_t n = demands.size();
    auto weight = [&](std::size_t i) { return i < weights.size() && weights[i] > 0.0 ? weights[i] : 1.0; };
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    // Claimants whose demand per weight is smallest are satisfied first.
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return demands[a] / weight(a) < demands[b] / weight(b); });
    std::vector<double> out(n, 0.0);
    double left = std::max(0.0, capacity);
    double weight_left = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        weight_left += weight(i);
    }
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = order[k];
        const double level = weight_left > 0.0 ? left / weight_left : 0.0;
        const double give = std::min(std::max(0.0, demands[i]), level * weight(i));
        out[i] = give;
        left -= give;
        weight_left -= weight(i);
    }
    return out;
}

bool ContendedFairness::add(double duration_s, const std::vector<TeamSample>& teams) {
    std::size_t waiting = 0;
    double allocated = 0.0;
    for (const auto& t : teams) {
        waiting += t.queued > 0.0 ? 1 : 0;
        allocated += t.allocated;
    }
    if (waiting < 2 || duration_s <= 0.0) {
        return false;
    }
    std::vector<double> demands;
    std::vector<double> weights;
    for (const auto& t : teams) {
        demands.push_back(t.allocated + t.queued);
        weights.push_back(t.weight);
    }
    const std::vector<double> fair = water_fill(allocated, demands, weights);
    m_contended_s += duration_s;
    for (std::size_t i = 0; i < teams.size(); ++i) {
        auto it = std::find_if(m_teams.begin(), m_teams.end(), [&](const auto& e) { return e.first == teams[i].team; });
        if (it == m_teams.end()) {
            m_teams.emplace_back(teams[i].team, Sums{});
            it = std::prev(m_teams.end());
        }
        it->second.weight = teams[i].weight > 0.0 ? teams[i].weight : 1.0;
        it->second.allocated += teams[i].allocated * duration_s;
        it->second.fair += fair[i] * duration_s;
    }
    return true;
}

ContendedResult ContendedFairness::result() const {
    ContendedResult r;
    r.contended_s = m_contended_s;
    for (const auto& [team, s] : m_teams) {
        r.gpu_seconds += s.allocated;
    }
    auto sorted = m_teams;
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<double> ratios;
    for (const auto& [team, s] : sorted) {
        TeamFairness t;
        t.team = team;
        t.weight = s.weight;
        if (r.gpu_seconds > 0.0) {
            t.share = s.allocated / r.gpu_seconds;
            t.fair_share = s.fair / r.gpu_seconds;
        }
        // A team that held GPUs also wanted them, so its fair share is positive too.
        if (t.fair_share > 0.0) {
            t.deviation = std::abs(t.share - t.fair_share) / t.fair_share;
            ratios.push_back(t.share / t.fair_share);
        }
        r.worst_deviation = std::max(r.worst_deviation, t.deviation);
        r.teams.push_back(t);
    }
    r.jain_index = jain_index(ratios);
    return r;
}

} // namespace gpupool::sim
