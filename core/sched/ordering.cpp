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
    return compare_to_fair_share(team) > 0;
}

bool FairShareSorter::below_fair_share(TeamId team) const {
    return compare_to_fair_share(team) < 0;
}

int FairShareSorter::compare_to_fair_share(TeamId team) const {
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
        return 0;
    }
    const double used = usage(team) / total_usage;
    const double due = weight(team) / total_weight;
    return used > due ? 1 : used < due ? -1 : 0;
}

namespace {

// The tier a job is ordered in before fair share (ordering.hpp, rule 1); higher goes first.
int tier(const JobRequest& j, std::int64_t now, const OrderingPolicy& policy) {
    switch (policy.mode) {
    case OrderMode::class_first:
        return static_cast<int>(effective_priority(j, now, policy.aging_s));
    case OrderMode::high_first:
        return j.priority == Priority::high ? 1 : 0;
    case OrderMode::share_first:
        return 0;
    }
    return 0;
}

// Within a tier and a team: class after aging (high first), then the oldest, then the job id.
std::tuple<int, std::int64_t, std::int64_t> team_key(const JobRequest& j, std::int64_t now,
                                                     const OrderingPolicy& policy) {
    return {-static_cast<int>(effective_priority(j, now, policy.aging_s)), j.submitted_at, j.id.value()};
}

} // namespace

std::vector<std::size_t> FairShareSorter::order(const std::vector<JobRequest>& pending, std::int64_t now) const {
    std::vector<std::size_t> idx(pending.size());
    for (std::size_t i = 0; i < idx.size(); ++i) {
        idx[i] = i;
    }
    auto key = [&](std::size_t i) {
        const JobRequest& j = pending[i];
        return std::tuple(-tier(j, now, m_policy), share(j.team), team_key(j, now, m_policy));
    };
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return idx;
}

OrderingCursor::OrderingCursor(const std::vector<JobRequest>& pending, std::int64_t now, const OrderingPolicy& policy) {
    for (std::size_t i = 0; i < pending.size(); ++i) {
        const JobRequest& j = pending[i];
        m_queues[tier(j, now, policy)][j.team].push_back(i);
    }
    for (auto& [t, teams] : m_queues) {
        for (auto& [team, jobs] : teams) {
            std::sort(jobs.begin(), jobs.end(), [&](std::size_t a, std::size_t b) {
                return team_key(pending[a], now, policy) > team_key(pending[b], now, policy);
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
