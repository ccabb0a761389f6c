#include "core/sched/ordering.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace gpupool::sched {

double decay(double usage, double elapsed_s, double half_life_s) {
    if (half_life_s <= 0.0 || elapsed_s <= 0.0) {
        return usage;
    }
    return usage * std::exp2(-elapsed_s / half_life_s);
}

void UsageLedger::record(TeamId team, double gpu_seconds, std::int64_t at) {
    Entry& e = m_entries[team];
    e.value = decay(e.value, static_cast<double>(at - e.as_of), m_half_life_s) + gpu_seconds;
    e.as_of = std::max(e.as_of, at);
}

double UsageLedger::usage(TeamId team, std::int64_t now) const {
    auto it = m_entries.find(team);
    if (it == m_entries.end()) {
        return 0.0;
    }
    return decay(it->second.value, static_cast<double>(now - it->second.as_of), m_half_life_s);
}

Priority effective_priority(const JobRequest& job, std::int64_t now, std::int64_t aging_s) {
    std::int64_t level = static_cast<std::int64_t>(job.priority);
    if (aging_s > 0 && now > job.submitted_at) {
        level += (now - job.submitted_at) / aging_s;
    }
    return static_cast<Priority>(std::min<std::int64_t>(level, static_cast<std::int64_t>(Priority::high)));
}

FairShareSorter::FairShareSorter(const std::vector<TeamShare>& teams, OrderingPolicy policy) : m_policy(policy) {
    for (const auto& t : teams) {
        m_weight[t.team] = t.weight > 0.0 ? t.weight : 1.0;
        m_usage[t.team] = t.decayed_usage;
    }
}

double FairShareSorter::weight(TeamId team) const {
    auto it = m_weight.find(team);
    return it == m_weight.end() ? 1.0 : it->second;
}

double FairShareSorter::usage(TeamId team) const {
    auto it = m_usage.find(team);
    return it == m_usage.end() ? 0.0 : it->second;
}

void FairShareSorter::charge(TeamId team, double gpu_seconds) {
    m_usage[team] += gpu_seconds;
}

bool FairShareSorter::above_fair_share(TeamId team) const {
    double total_usage = 0.0;
    double total_weight = 0.0;
    for (const auto& [t, w] : m_weight) {
        total_weight += w;
    }
    for (const auto& [t, u] : m_usage) {
        total_usage += u;
        if (!m_weight.contains(t)) {
            total_weight += 1.0;
        }
    }
    if (total_usage <= 0.0 || total_weight <= 0.0) {
        return false;
    }
    return usage(team) / total_usage > weight(team) / total_weight;
}

std::vector<std::size_t> FairShareSorter::order(const std::vector<JobRequest>& pending, std::int64_t now) const {
    std::vector<std::size_t> idx(pending.size());
    for (std::size_t i = 0; i < idx.size(); ++i) {
        idx[i] = i;
    }
    auto key = [&](std::size_t i) {
        const JobRequest& j = pending[i];
        return std::tuple(-static_cast<int>(effective_priority(j, now, m_policy.aging_s)), share(j.team),
                          j.submitted_at, j.id.value());
    };
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return idx;
}

OrderingCursor::OrderingCursor(const std::vector<JobRequest>& pending, std::int64_t now, const OrderingPolicy& policy) {
    for (std::size_t i = 0; i < pending.size(); ++i) {
        const JobRequest& j = pending[i];
        m_queues[static_cast<int>(effective_priority(j, now, policy.aging_s))][j.team].push_back(i);
    }
    for (auto& [cls, teams] : m_queues) {
        for (auto& [team, jobs] : teams) {
            std::sort(jobs.begin(), jobs.end(), [&](std::size_t a, std::size_t b) {
                return std::pair(pending[a].submitted_at, pending[a].id.value()) >
                       std::pair(pending[b].submitted_at, pending[b].id.value());
            });
        }
    }
}

std::optional<std::size_t> OrderingCursor::next(const FairShareSorter& sorter) {
    while (!m_queues.empty()) {
        auto& teams = m_queues.begin()->second;
        if (teams.empty()) {
            m_queues.erase(m_queues.begin());
            continue;
        }
        auto best = teams.begin();
        for (auto it = teams.begin(); it != teams.end(); ++it) {
            if (sorter.share(it->first) < sorter.share(best->first)) {
                best = it;
            }
        }
        std::size_t idx = best->second.back();
        best->second.pop_back();
        if (best->second.empty()) {
            teams.erase(best);
        }
        return idx;
    }
    return std::nullopt;
}

} // namespace gpupool::sched
