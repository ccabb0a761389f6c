#include "core/sched/admission.hpp"

#include "core/credits/rates.hpp"

#include <algorithm>

namespace gpupool::sched {

using credits::Micro;

Micro hourly_price(const JobRequest& job, const Worker& w, std::optional<std::uint32_t> gpu, std::int64_t gpu_milli,
                   const Prices& prices) {
    const credits::PricedUse use{job.gpus, gpu_milli, job.gpu_memory_mib, job.cpu_milli};
    std::optional<credits::PricedGpu> on;
    if (gpu) {
        on.emplace(credits::PricedGpu{prices.default_gpu_micro_per_hour, 0});
        if (*gpu < w.gpus.size()) {
            on->memory_mib = w.gpus[*gpu].memory_mib;
            if (w.gpus[*gpu].model < prices.gpu_micro_per_hour.size()) {
                on->micro_per_gpu_hour = prices.gpu_micro_per_hour[w.gpus[*gpu].model];
            }
        }
    }
    return credits::attempt_price_per_hour(use, on, prices.cpu_micro_per_core_hour);
}

Micro hold_of(const JobRequest& job, Micro price_per_hour) {
    return credits::cost_of(price_per_hour, job.max_runtime_s * 1000);
}

Micro largest_hold(const JobRequest& job, const std::vector<Worker>& workers, const Prices& prices) {
    Micro worst = 0;
    for (const auto& w : workers) {
        if (job.gpus == 0) {
            worst = std::max(worst, hourly_price(job, w, std::nullopt, 0, prices));
            continue;
        }
        for (std::uint32_t g = 0; g < w.gpus.size(); ++g) {
            const bool model_ok = model_allowed(job.gpu_models, w.gpus[g].model);
            if (model_ok && w.gpus[g].memory_mib >= job.gpu_memory_mib) {
                worst = std::max(worst, hourly_price(job, w, g, job.gpu_milli, prices));
            }
        }
    }
    return hold_of(job, worst);
}

namespace {

// The credit gate: true if the job may enter; else a waiting entry is appended.
bool credits_admit(const JobRequest& job, const std::vector<Worker>& workers, const Admission& admission,
                   std::map<TokenId, Micro>& member_reserved, std::vector<WaitingJob>& waiting) {
    if (!admission.credits || workers.empty()) {
        return true;
    }
    const CreditRooms& rooms = *admission.credits;
    const Micro need = largest_hold(job, workers, admission.prices);
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
    std::map<SweepId, std::int64_t> sweep_used;
    for (const JobRequest& job : queued) {
        if (!credits_admit(job, workers, admission, member_reserved, waiting)) {
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
