// PoolOverview: the pool at a glance, as `gpupool pool` prints it and the dashboard draws it: the
// workers and how much of each GPU is given out, what runs where, the queue with why each job waits,
// the jobs that ended last, credits per team, and the totals.
//
// Who sees what (Coordinator::overview): admins every team; a member its own team's jobs and credits,
// and the pool's workers and totals (capacity, not other teams' work); anyone else nothing. How much
// of each GPU is given out is the coordinator's choice (CoordinatorOptions::members_see,
// `coordinator --members-see`): under `summary`, the default, a member's per-GPU figures count its
// own team's attempts only and a worker's owner team is named only when it is the member's own
// (the totals stay the pool's); under `full` a member sees every GPU's use as admins do.
// SampleSeries: the pool's utilisation over the last day (Coordinator::samples), by the same rule:
// members get the capacity numbers, not the pool-wide job counts (other teams' work).
//
// pool_overview() and pool_totals() are functions over the coordinator's components (read, never
// changed); the Coordinator passes them its own (Coordinator::overview, its samples).
#pragma once

#include "core/credits/money.hpp"
#include "core/store/records.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::coordinator {

// What members see of the GPUs' use (`coordinator --members-see`); admins always see `full`.
enum class MembersSee : std::uint8_t { summary, full };
const char* to_string(MembersSee m);
std::optional<MembersSee> members_see_from_string(std::string_view s);

struct OverviewGpu {
    std::int64_t index = 0;
    std::string model;
    std::int64_t memory_mib = 0;
    std::int64_t allocated_milli = 0; // given to running attempts (1000 = the whole GPU); summary: the caller's team's
    std::int64_t jobs = 0;            // attempts sharing it; summary: the caller's team's
    bool healthy = true;              // as the worker's last heartbeat said
    std::string enforcement;          // how the worker holds jobs to their share: mps, watchdog, none
};

struct OverviewWorker {
    WorkerId id;
    std::string name;
    std::string team;     // the owner's team; summary: empty unless it is the caller's
    std::string presence; // WorkerRoster::presence: online, offline, paused, drained, ...
    std::int64_t last_seen_at = 0;
    std::vector<OverviewGpu> gpus;
    // Its spot checks' reliability score, (1 + agreed) / (2 + checks); nullopt: never checked.
    std::optional<double> reliability;
};

struct OverviewJob {
    JobId id;
    std::string name;
    std::string team;
    std::string submitter;
    std::string state;
    std::int64_t since_ms = 0; // queued: since it was submitted; running: since assigned; ended: when
    std::optional<WorkerId> worker{};
    std::string worker_name{};
    std::int64_t gpu_index = 0;
    std::int64_t gpu_milli = 0;
    std::string why{}; // queued: why it waits; ended: its reason
    std::optional<std::int64_t> exit_code{};
};

struct OverviewCredits {
    std::string team;
    credits::Micro balance = 0;
    credits::Micro held = 0; // in escrow for running attempts
};

struct OverviewTotals {
    std::int64_t workers = 0;
    std::int64_t workers_online = 0;
    std::int64_t gpus_online = 0;
    std::int64_t gpu_milli_online = 0;    // 1000 per online GPU
    std::int64_t gpu_milli_allocated = 0; // of those, given to running attempts
    std::int64_t gpus_shared = 0;         // online GPUs running more than one job
    std::int64_t jobs_queued = 0;         // visible to the caller
    std::int64_t jobs_running = 0;        // visible to the caller
};

struct PoolOverview {
    std::int64_t at_ms = 0;
    MembersSee detail = MembersSee::full; // how the workers' GPUs are shown to this caller
    std::vector<OverviewWorker> workers;
    std::vector<OverviewJob> running;
    std::vector<OverviewJob> queued; // oldest first, at most k_overview_queue
    std::vector<OverviewJob> recent; // newest first, at most k_overview_recent
    std::vector<OverviewCredits> credits;
    OverviewTotals totals;
};

// The coordinator's own samples of the pool (store::Sample), oldest first.
struct SampleSeries {
    std::int64_t every_ms = 0; // how often the coordinator samples (CoordinatorOptions::sample_every_ms)
    std::vector<store::Sample> samples;
    // False for members: each sample's jobs_queued and jobs_running are zeroed (they count every
    // team's jobs) and the API sends them as null.
    bool job_counts = true;
};

inline constexpr std::size_t k_overview_queue = 200;
inline constexpr std::size_t k_overview_recent = 20;

class TokenBook;
class WorkerRoster;
class JobBook;
class CreditDesk;
struct Principal;

// What an overview is drawn from, at `now_ms`: the components, and why each queued job waits as
// the last scheduling pass said (a job it has not weighed yet waits for the next one).
struct OverviewSources {
    const TokenBook& tokens;
    const WorkerRoster& roster;
    const JobBook& jobs;
    const CreditDesk& credits;
    const std::map<JobId, std::string>& waiting;
    std::int64_t now_ms = 0;
};

// The pool as `who` may see it (the rules above); `members_see`: the coordinator's choice for
// members. permission_denied for anyone but admins and members of a team.
Result<PoolOverview> pool_overview(const Principal& who, MembersSee members_see, const OverviewSources& from);
// The totals alone, as an admin sees them (every team's jobs), without walking the lists: what the
// coordinator's utilisation samples record.
OverviewTotals pool_totals(const WorkerRoster& roster, const JobBook& jobs, std::int64_t now_ms);

} // namespace gpupool::coordinator
