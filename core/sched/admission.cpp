#include "core/sched/admission.hpp"

#include "core/credits/rates.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpupool::sched {

using credits::Micro;

namespace {

// The hourly price of `job` on a GPU of `kind` (nullopt: CPU-only) at `gpu_milli` per GPU.
Micro price_on(const JobRequest& job, std::optional<GpuKind> kind, std::int64_t gpu_milli, const Prices& prices) {
    const credits::PricedUse use{job.gpus, gpu_milli, job.gpu_memory_mib, job.cpu_milli};
    std::optional<credits::PricedGpu> on;
    if (kind) {
        on.emplace(credits::PricedGpu{prices.default_gpu_micro_per_hour, kind->memory_mib});
        if (kind->model < prices.gpu_micro_per_hour.size()) {
            on->micro_per_gpu_hour = prices.gpu_micro_per_hour[kind->model];
        }
    }
    return credits::attempt_price_per_hour(use, on, prices.cpu_micro_per_core_hour);
}

} // namespace

Micro hourly_price(const JobRequest& job, const Worker& w, std::optional<std::uint32_t> gpu, std::int64_t gpu_milli,
                   const Prices& prices) {
    std::optional<GpuKind> kind;
    if (gpu) {
        // A GPU index the worker does not have is priced at the default rate with no memory.
        kind = *gpu < w.gpus.size() ? GpuKind{w.gpus[*gpu].model, w.gpus[*gpu].memory_mib}
                                    : GpuKind{static_cast<std::uint32_t>(prices.gpu_micro_per_hour.size()), 0};
    }
    return price_on(job, kind, gpu_milli, prices);
}

Micro hold_of(const JobRequest& job, Micro price_per_hour) {
    return credits::cost_of(price_per_hour, job.max_runtime_s * 1000);
}

FleetKinds FleetKinds::of(const std::vector<Worker>& workers) {
    FleetKinds f;
    f.any_worker = !workers.empty();
    for (const auto& w : workers) {
        for (const auto& g : w.gpus) {
            f.gpus.insert(GpuKind{g.model, g.memory_mib});
        }
    }
    return f;
}

namespace {

// The highest hourly price the job could pay on any of the fleet's kinds it fits.
Micro largest_price(const JobRequest& job, const FleetKinds& fleet, const Prices& prices) {
    Micro worst = 0;
    if (job.gpus == 0) {
        // A CPU-only job costs the same on every worker.
        worst = fleet.any_worker ? price_on(job, std::nullopt, 0, prices) : 0;
    } else {
        for (const GpuKind& kind : fleet.gpus) {
            if (model_allowed(job.gpu_models, kind.model) && kind.memory_mib >= job.gpu_memory_mib) {
                worst = std::max(worst, price_on(job, kind, job.gpu_milli, prices));
            }
        }
    }
    return worst;
}

// What largest_price reads of a job: queued jobs alike in these share one walk over the kinds.
using PriceKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, ModelMask, std::int64_t>;

} // namespace

Micro largest_hold(const JobRequest& job, const FleetKinds& fleet, const Prices& prices) {
    return hold_of(job, largest_price(job, fleet, prices));
}

Micro largest_hold(const JobRequest& job, const std::vector<Worker>& workers, const Prices& prices) {
    return largest_hold(job, FleetKinds::of(workers), prices);
}

namespace {

// The credit gate: true if the job may enter; else a waiting entry is appended.
// `priced`: the largest prices met so far in this pass, by PriceKey.
bool credits_admit(const JobRequest& job, const FleetKinds& fleet, const Admission& admission,
                   std::map<PriceKey, Micro>& priced, std::map<TokenId, Micro>& member_reserved,
                   std::vector<WaitingJob>& waiting) {
    if (!admission.credits || !fleet.any_worker || job.pool_pays) {
        return true;
    }
    const CreditRooms& rooms = *admission.credits;
    auto [price, fresh] = priced.try_emplace(PriceKey{job.gpus, job.gpu_milli, job.gpu_memory_mib, job.gpu_models,
                                                      job.cpu_milli});
    if (fresh) {
        price->second = largest_price(job, fleet, admission.prices);
    }
    const Micro need = hold_of(job, price->second);
    auto team = rooms.team.find(job.team);
    const Micro left = team == rooms.team.end() ? 0 : team->second;
    if (need > left) {
        waiting.push_back({job.id, PlaceOutcome::not_now, "waiting for credits", Gate::team_credits,
                           CreditWait{need, left, 0, std::nullopt, 0}});
        return false;
    }
    // A member's jobs beyond what its own budget can hold stay out of the pass, so that they do
    // not take a GPU from a teammate's job only to be dropped.
    if (auto mine = rooms.member.find(job.member); job.member != TokenId{} && mine != rooms.member.end()) {
        Micro& reserved = member_reserved[job.member];
        if (need > mine->second - reserved) {
            waiting.push_back({job.id, PlaceOutcome::not_now, "waiting for credits", Gate::member_credits,
                               CreditWait{need, mine->second - reserved, reserved, std::nullopt, 0}});
            return false;
        }
        reserved += need;
    }
    return true;
}

} // namespace

Admitted admit(const std::vector<JobRequest>& queued, const std::vector<Worker>& workers, const Admission& admission,
               std::vector<WaitingJob>& waiting) {
    Admitted out;
    std::map<TokenId, Micro> member_reserved;
    std::map<PriceKey, Micro> priced;
    std::map<SweepId, std::int64_t> sweep_used;
    // Prices depend on a GPU's model and memory only: a fleet of thousands has a handful of kinds.
    const FleetKinds fleet = admission.credits ? FleetKinds::of(workers) : FleetKinds{};
    for (const JobRequest& job : queued) {
        if (!credits_admit(job, fleet, admission, priced, member_reserved, waiting)) {
            continue;
        }
        if (job.no_known_model) {
            waiting.push_back({job.id, PlaceOutcome::not_now, "no worker has a GPU of the models it accepts",
                               Gate::unknown_models, {}});
            continue;
        }
        if (auto cap = admission.sweep_max_parallel.find(job.sweep);
            cap != admission.sweep_max_parallel.end() && cap->second > 0) {
            auto running = admission.sweep_running.find(job.sweep);
            auto& used = sweep_used
                             .try_emplace(job.sweep, running == admission.sweep_running.end() ? 0 : running->second)
                             .first->second;
            if (used >= cap->second) {
                waiting.push_back({job.id, PlaceOutcome::not_now,
                                   "its sweep is at max_parallel = " + std::to_string(cap->second), Gate::max_parallel,
                                   {}});
                continue;
            }
            ++used;
        }
        out.jobs.push_back(job);
    }
    return out;
}

} // namespace gpupool::sched
