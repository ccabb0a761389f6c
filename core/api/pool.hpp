// The pool at a glance on the wire (`GET /v1/pool`, docs/api.md): what `gpupool pool` prints and
// the dashboard draws (core/coordinator/dashboard/app.js reads the same members). What each caller
// sees of it, and why, is pool_overview()'s (core/coordinator/overview.hpp).
//
// The service fills a PoolOverviewReply from the coordinator's PoolOverview and sends to_json();
// the client reads it back with pool_overview_from_json, which treats the bytes as hostile: every
// member's JSON type and range is checked and an error names the member
// (`workers[1].gpus[0].allocated_milli`), never an exception. Times are Unix milliseconds. Value
// types.
#pragma once

#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::api {

struct PoolGpu {
    std::int64_t index = 0;
    std::string model{};
    std::int64_t memory_mib = 0;
    std::int64_t allocated_milli = 0; // given to running attempts (1000: the whole GPU)
    std::int64_t jobs = 0;            // attempts sharing it
    bool healthy = true;
    std::string memory_enforcement{}; // mps, watchdog, none; "" from an older coordinator
    bool operator==(const PoolGpu&) const = default;
};

struct PoolWorker {
    WorkerId id{};
    std::string name{};
    std::string team{}; // its owner's team; may be "" (Coordinator::overview)
    std::string presence{};
    std::int64_t last_seen_at = 0;
    std::vector<PoolGpu> gpus{};
    std::optional<double> reliability{}; // its spot checks' score; absent: never checked
    bool operator==(const PoolWorker&) const = default;
};

// A job running, queued or ended lately. Only a running job has a worker; the members about where
// it runs (`worker`, `worker_name`, `gpu_index`, `gpu_milli`) are left out of the others.
struct PoolJob {
    JobId id{};
    std::string name{};
    std::string team{};
    std::string submitter{};
    std::string state{};
    std::int64_t since = 0; // queued: submitted; running: assigned; ended: when
    std::string why{};      // queued: why it waits; ended: its reason
    std::optional<std::int64_t> exit_code{};
    std::optional<WorkerId> worker{};
    std::string worker_name{};
    std::int64_t gpu_index = 0;
    std::int64_t gpu_milli = 0;
    bool operator==(const PoolJob&) const = default;
};

struct PoolCredits {
    std::string team{};
    std::int64_t balance_micro = 0;
    std::int64_t held_micro = 0;
    bool operator==(const PoolCredits&) const = default;
};

struct PoolTotals {
    std::int64_t workers = 0;
    std::int64_t workers_online = 0;
    std::int64_t gpus_online = 0;
    std::int64_t gpu_milli_online = 0;
    std::int64_t gpu_milli_allocated = 0;
    std::int64_t gpus_shared = 0;
    std::int64_t jobs_queued = 0;
    std::int64_t jobs_running = 0;
    bool operator==(const PoolTotals&) const = default;
};

struct PoolOverviewReply {
    std::int64_t at = 0;
    std::string detail{}; // "full" or "summary" (MembersSee); "" from an older coordinator
    std::vector<PoolWorker> workers{};
    std::vector<PoolJob> running{};
    std::vector<PoolJob> queued{}; // oldest first
    std::vector<PoolJob> recent{}; // newest first
    std::vector<PoolCredits> credits{};
    PoolTotals totals{};
    bool operator==(const PoolOverviewReply&) const = default;
};

nlohmann::json to_json(const PoolGpu& g);
nlohmann::json to_json(const PoolWorker& w);
nlohmann::json to_json(const PoolJob& j);
nlohmann::json to_json(const PoolCredits& c);
nlohmann::json to_json(const PoolTotals& t);
nlohmann::json to_json(const PoolOverviewReply& o);

// `field` prefixes the member names in errors.
Result<PoolGpu> pool_gpu_from_json(const nlohmann::json& j, const std::string& field = "");
Result<PoolWorker> pool_worker_from_json(const nlohmann::json& j, const std::string& field = "");
Result<PoolJob> pool_job_from_json(const nlohmann::json& j, const std::string& field = "");
Result<PoolCredits> pool_credits_from_json(const nlohmann::json& j, const std::string& field = "");
Result<PoolTotals> pool_totals_from_json(const nlohmann::json& j, const std::string& field = "totals");
Result<PoolOverviewReply> pool_overview_from_json(const nlohmann::json& j);

} // namespace gpupool::api
