// Admission: which queued jobs enter a scheduling pass, and whether a placement the pass finds may
// stand. These are the rules that are policy but not packing, kept here beside placement so that
// the coordinator and `gpupool sim` apply the same ones (schedule() in scheduler.hpp runs them):
//
//   credits       a job the pool pays for (JobRequest::pool_pays: a spot check) always enters;
//                 any other enters only if its team (and its submitting member, when the member has
//                 caps of its own) can cover the largest hold it could take on any live worker
//                 it fits: price x max_runtime. A job placed on a GPU pricier than its payer can
//                 cover would otherwise be chosen and dropped every pass, blocking that GPU.
//                 Members' rooms are reserved job by job as jobs enter; a placement then takes
//                 its actual hold from the team's and the member's room, and a placement the room
//                 no longer covers is not made (the job waits; the worker stays free for others).
//   max_parallel  a sweep's running attempts plus its jobs entering this pass stay within its cap.
//   models        a job that names only GPU models no live worker has waits, with that reason.
//
// Everything here is plain data the caller fills (rooms, prices by GPU model, counts): no ledger,
// no catalog, no clock. Credits appear only as numbers, so the waiting reasons for credits carry
// the numbers (WaitingJob::credits) and the caller words them with what it knows of budgets.
#pragma once

#include "core/credits/money.hpp"
#include "core/sched/cluster.hpp"
#include "core/sched/placement.hpp"

#include <cstdint>
#include <compare>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpupool::sched {

// What an hour of a job costs: plain rates, the coordinator's catalog resolved to model ids.
struct Prices {
    credits::Micro cpu_micro_per_core_hour = 0;
    std::vector<credits::Micro> gpu_micro_per_hour{}; // by ModelId of the view's catalog
    credits::Micro default_gpu_micro_per_hour = 0;   // models beyond that vector
};

// What payers may still hold now. Absent from Admission: credits are not enforced.
struct CreditRooms {
    std::map<TeamId, credits::Micro> team{};    // teams not listed have no room
    std::map<TokenId, credits::Micro> member{}; // tokens with caps of their own
};

struct Admission {
    std::optional<CreditRooms> credits{};
    Prices prices{};
    std::map<SweepId, std::int64_t> sweep_max_parallel{}; // sweeps with a cap (> 0)
    std::map<SweepId, std::int64_t> sweep_running{};      // active attempts per sweep
};

// The hourly price of `job` on worker `w` with `gpu` (nullopt: CPU-only) at `gpu_milli` per GPU.
credits::Micro hourly_price(const JobRequest& job, const Worker& w, std::optional<std::uint32_t> gpu,
                            std::int64_t gpu_milli, const Prices& prices);

// The hold of a job at an hourly price: price x max_runtime.
credits::Micro hold_of(const JobRequest& job, credits::Micro price_per_hour);

// What a GPU's price depends on: its model and its memory.
struct GpuKind {
    std::uint32_t model = 0;
    std::int64_t memory_mib = 0;
    auto operator<=>(const GpuKind&) const = default;
};

// The distinct GPU kinds of a set of workers, and whether there is any worker (for CPU-only jobs).
struct FleetKinds {
    bool any_worker = false;
    std::set<GpuKind> gpus{};
    static FleetKinds of(const std::vector<Worker>& workers);
};

// The largest hold the job could take on any of `workers` it fits by model and GPU memory. The
// FleetKinds form costs O(kinds), not O(workers x GPUs): admit() builds it once per pass.
credits::Micro largest_hold(const JobRequest& job, const std::vector<Worker>& workers, const Prices& prices);
credits::Micro largest_hold(const JobRequest& job, const FleetKinds& fleet, const Prices& prices);

// Why a job waits on admission, with the numbers its reason is made of.
enum class Gate : std::uint8_t {
    none,           // not an admission wait (a placement reason)
    team_credits,   // the team cannot cover the hold
    member_credits, // the submitting member's own caps cannot
    max_parallel,
    unknown_models,
};

struct CreditWait {
    credits::Micro need = 0;     // the hold asked for
    credits::Micro left = 0;     // what the team or member can still hold
    credits::Micro reserved = 0; // member: held by its jobs that entered this pass before
    std::optional<WorkerId> worker{};  // set when a placement's actual hold was refused
    credits::Micro price_per_hour = 0; // with `worker`
};

// A pending job that was not placed, and why.
struct WaitingJob {
    JobId job;
    PlaceOutcome outcome = PlaceOutcome::not_now; // not_now or infeasible
    std::string reason;
    Gate gate = Gate::none;
    CreditWait credits{}; // for Gate::team_credits and Gate::member_credits
};

// The jobs of `queued` that enter the pass, in their order; the others are appended to `waiting`
// with their gate and a reason. `workers` are the live workers. The checks, in order: credits
// (team, then member), models, max_parallel.
struct Admitted {
    std::vector<JobRequest> jobs;
};
Admitted admit(const std::vector<JobRequest>& queued, const std::vector<Worker>& workers,
               const Admission& admission, std::vector<WaitingJob>& waiting);

} // namespace gpupool::sched
