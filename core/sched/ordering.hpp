// Ordering: which pending job is considered next. Placement (where it goes) is in placement.hpp.
//
// Rules (OrderingPolicy::mode; the default is `high_first`):
//  1. `high_first`: jobs SUBMITTED as `high` go first, the team with the smallest share first among
//     them. Every other job is ordered by fair share between teams first, so that a team below its
//     share gets the next free GPUs whatever the class of the others' jobs; within a team, by class
//     after aging, then age. `share_first` does the same without the `high` tier. `class_first`
//     (the rule before issue #12) puts the class after aging first across the whole pool: under
//     sustained overload old jobs of every team reach `high` and the order becomes first come,
//     first served, which splits the pool evenly whatever the weights.
//  2. Fair share between teams: the team with the smallest decayed usage / weight goes first. Usage
//     is GPU-seconds decayed exponentially with `half_life_s`; a placement made during the same call
//     charges the team `placement_charge_s` seconds of its GPU share, so one call does not hand
//     every free GPU to one team.
//  3. Class after aging: a job that has waited `aging_s` moves up one class, 2 x aging_s two classes
//     (capped at high). Aging only affects order; only jobs submitted as `high` may preempt.
//  4. Age: oldest submission first; then job id.
// Starvation-freedom: within a team a waiting job's class rises with its wait until it is in the
// top class, and jobs of one class leave in age order; a team that keeps receiving GPUs sees its
// usage grow past the others', so every team reaches the head of the order. (A job at the head
// still has to fit: a large job can be overtaken by smaller ones that fit, which is the not-now
// reason `status` shows; preemption helps high jobs.)
// FairShareSorter is a value type (no shared state); not thread-safe for concurrent mutation.
#pragma once

#include "core/sched/cluster.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

namespace gpupool::sched {

// How priority classes and fair share combine (rule 1 above).
enum class OrderMode : std::uint8_t { high_first, share_first, class_first };

struct OrderingPolicy {
    OrderMode mode = OrderMode::high_first;
    double half_life_s = 7.0 * 24 * 3600;
    std::int64_t aging_s = 4 * 3600;
    double placement_charge_s = 600.0;
};

// usage x 2^(-elapsed / half_life)
double decay(double usage, double elapsed_s, double half_life_s);

// Decayed GPU-second usage per team, for callers that keep it between calls (coordinator, sim).
class UsageLedger {
public:
    explicit UsageLedger(double half_life_s) : m_half_life_s(half_life_s) {}
    // Adds `gpu_seconds` at time `at` (times must not go backwards per team).
    void record(TeamId team, double gpu_seconds, std::int64_t at);
    double usage(TeamId team, std::int64_t now) const;

private:
    struct Entry {
        double value = 0.0;
        std::int64_t as_of = 0;
    };
    double m_half_life_s;
    std::unordered_map<TeamId, Entry> m_entries;
};

Priority effective_priority(const JobRequest& job, std::int64_t now, std::int64_t aging_s);

class FairShareSorter {
public:
    FairShareSorter(const std::vector<TeamShare>& teams, OrderingPolicy policy);

    double weight(TeamId team) const;
    double usage(TeamId team) const;
    // usage / weight: lower goes first.
    double share(TeamId team) const { return usage(team) / weight(team); }
    // Charges a team (GPU-seconds).
    void charge(TeamId team, double gpu_seconds);
    // The team's usage fraction exceeds its weight fraction (among the known teams).
    bool above_fair_share(TeamId team) const;
    // The team's usage fraction is under its weight fraction; false while no team has usage.
    bool below_fair_share(TeamId team) const;

    // Indices of `pending` in the order they should be considered, evaluated once at `now`.
    std::vector<std::size_t> order(const std::vector<JobRequest>& pending, std::int64_t now) const;

private:
    // Usage fraction against weight fraction: 1 above, -1 below, 0 equal or no usage yet.
    int compare_to_fair_share(TeamId team) const;

    OrderingPolicy m_policy;
    std::unordered_map<TeamId, double> m_weight;
    std::unordered_map<TeamId, double> m_usage;
};

// Walks pending jobs in order while shares change (call charge() on the sorter after placing).
class OrderingCursor {
public:
    OrderingCursor(const std::vector<JobRequest>& pending, std::int64_t now, const OrderingPolicy& policy);
    // Index of the next job in `pending`, or nothing when all were handed out.
    std::optional<std::size_t> next(const FairShareSorter& sorter);

private:
    // tier (first first) -> team -> job indices, next last (popped from the back). The tier is the
    // class after aging (class_first), 1 for submitted `high` and 0 for the rest (high_first), or
    // 0 (share_first).
    std::map<int, std::map<TeamId, std::vector<std::size_t>>, std::greater<>> m_queues;
};

} // namespace gpupool::sched
