// Helpers shared by the files that implement the Coordinator and the operations over its
// components (coordinator.cpp, jobs.cpp, worker_ops.cpp, scheduling.cpp, admin_ops.cpp, credit_ops.cpp,
// job_ops.cpp, ...): error constructors, time windows, credit amounts in words. Not part of the coordinator's
// interface; include it only from core/coordinator/*.cpp.
#pragma once

#include "core/coordinator/views.hpp"
#include "core/credits/money.hpp"
#include "core/recipe/recipe.hpp"
#include "core/store/records.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace gpupool::coordinator {
class PoolView;
class WorkerRoster;
class JobBook;
} // namespace gpupool::coordinator

namespace gpupool::coordinator::detail {

inline Error denied(const std::string& what) { return make_error(ErrorCode::forbidden, what); }
inline Error not_found(const std::string& what) { return make_error(ErrorCode::not_found, what); }
inline Error invalid(const std::string& what, const std::string& field = {}) {
    return make_error(ErrorCode::invalid_input, what, field);
}

using credits::format_credits;
using credits::Micro;

inline constexpr std::int64_t k_day_ms = 24LL * 3600 * 1000; // budget windows: rolling day and week
inline constexpr std::int64_t k_week_ms = 7 * k_day_ms;
inline constexpr Micro k_unlimited = std::numeric_limits<Micro>::max();
// Why a job cannot run while no worker offers the pool anything (at submit, and while it waits).
inline constexpr const char* k_no_worker_connected = "no worker is connected to the pool";
// Why a queued job waits that no scheduling pass has weighed yet.
inline constexpr const char* k_waiting_for_pass = "waiting for the next scheduling pass";

inline Error fenced(AttemptId id, const std::string& why) {
    return make_error(ErrorCode::conflict,
                      "attempt " + std::to_string(id.value()) + " is no longer current (" + why + "); refused");
}

inline bool is_active(store::AttemptState s) {
    return s == store::AttemptState::assigned || s == store::AttemptState::running;
}

// A successful attempt with both clocks: one run of its recipe for the history of runtimes (estimates).
inline bool counts_as_run(const store::AttemptRecord& a) {
    return a.state == store::AttemptState::succeeded && a.started_at && a.ended_at;
}
// Its runtime in whole seconds, rounded up.
inline std::int64_t run_seconds(const store::AttemptRecord& a) { return (*a.ended_at - *a.started_at + 999) / 1000; }

// How an attempt handed back by its GPU's owner (api::Outcome::owner_preempted) is worded; the
// coordinator tells those from its own preemptions by it (metrics, the avoid rule, the report).
inline constexpr std::string_view k_owner_preempted_reason = "preempted by the GPU's owner";
// How an attempt whose image could not be had (api::Outcome::image_unavailable) is worded.
inline constexpr std::string_view k_image_unavailable_reason = "image unavailable";

inline bool preempted_by_owner(const store::AttemptRecord& a) {
    return a.state == store::AttemptState::preempted && a.reason.starts_with(k_owner_preempted_reason);
}

// A client's idempotency key (submissions, retries): 1 to 128 of [A-Za-z0-9_-].
inline Status check_idempotency_key(const std::string& key) {
    if (key.empty() || key.size() > 128 ||
        key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
            std::string::npos) {
        return invalid("1 to 128 letters, digits, `_` or `-`", "idempotency_key");
    }
    return {};
}

// What a job's price and feasibility read of its resources (gpus, gpu_milli, gpu_memory_mib,
// cpu_milli, memory_mib, gpu_models).
using ResourceKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                               std::vector<std::string>>;

// One answer per distinct ResourceKey: an estimate or a submission of a 10,000-job sweep (whose jobs
// mostly ask for the same resources) walks the pool's GPU kinds once per distinct request, not once
// per job.
template <class Value>
class ByResources {
public:
    template <class Compute>
    const Value& get(const recipe::Resources& r, Compute compute) {
        auto [it, fresh] = m_answers.try_emplace(
            ResourceKey{r.gpus, r.gpu_milli, r.gpu_memory_mib, r.cpu_milli, r.memory_mib, r.gpu_models});
        if (fresh) {
            it->second = compute();
        }
        return it->second;
    }
    std::size_t size() const { return m_answers.size(); }

private:
    std::map<ResourceKey, Value> m_answers;
};

// The median (for an even count, the mean of the two middle values, rounded up); `v` is not empty.
inline std::int64_t median_of(std::vector<std::int64_t> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2] + 1) / 2;
}

// Tells `view` about every live record of the roster and the book (a view built from scratch), or
// about one job, as Coordinator::absorb does change by change (scheduling.cpp).
void feed_view(PoolView& view, const WorkerRoster& roster, const JobBook& book, const CoordinatorOptions& options);
// A spot check (JobRecord::check_of) keeps off the owners of the workers whose results it checks.
void feed_job(PoolView& view, const WorkerRoster& roster, const JobBook& book, const store::JobRecord& job,
              const CoordinatorOptions& options);

// How the audit log names a worker: "worker 3 `gpu-box`".
inline std::string worker_target(const store::WorkerRecord& w) {
    return "worker " + std::to_string(w.id.value()) + " `" + w.name + "`";
}

// Log bytes kept for a job's attempts (0: no cap): its own cap, else the pool's; and how many of
// them from the log's start.
inline std::int64_t log_cap(const recipe::JobSpec& spec, std::int64_t pool_cap_bytes) {
    return spec.logs.max_size_mib > 0 ? spec.logs.max_size_mib * 1024 * 1024 : pool_cap_bytes;
}
inline std::int64_t log_head_bytes(std::int64_t cap) { return std::min(k_log_head_bytes, cap / 2); }

// "0.5 credits", "1 credit".
inline std::string credits_text(Micro m) { return format_credits(m) + (m == 1'000'000 ? " credit" : " credits"); }

} // namespace gpupool::coordinator::detail
