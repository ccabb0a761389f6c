// The worker's heartbeat (POST /v1/workers/heartbeat, docs/api.md) and the coordinator's reply: one
// pair of structs on both sides of the wire. The worker says what it holds and how it is; the
// coordinator renews the leases of what it holds and answers which attempts to stop.
//
// heartbeat_from_json validates the request once where it arrives: every error names its field
// (`running[3]`, `inventory.gpus[0].model`), absent or null members take the defaults below. Every
// list is bounded: at most k_max_running attempts, GPU indexes below api::k_max_gpus and at most
// that many of them per list (the inventory's own rules: inventory.hpp).
// heartbeat_reply_from_json reads the reply the same way on the worker.
#pragma once

#include "core/api/inventory.hpp"
#include "core/api/owner_terms.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::api {

// An assignment whose model weights the worker is still downloading (the job has not started, and
// is not billed). The coordinator shows it in the job's status: "fetching weights (3.2 of 14 GB)".
struct FetchProgress {
    AttemptId attempt{};
    std::int64_t done_bytes = 0;
    std::int64_t total_bytes = 0; // 0 while not known yet
    bool operator==(const FetchProgress&) const = default;
};

// The most attempts one heartbeat may name as running: far more jobs than one machine runs (each is a
// container or a process tree), so that one worker's heartbeat stays a bounded piece of work.
inline constexpr std::size_t k_max_running = 16384;

struct Heartbeat {
    std::vector<AttemptId> running{};           // the attempts the worker holds (their leases are renewed)
    std::vector<std::int64_t> unhealthy_gpus{}; // indexes of GPUs that are failing (no new work on them)
    std::vector<std::int64_t> reclaimed_gpus{}; // indexes of GPUs the machine's owner is using (no new work)
    bool draining = false;                      // shutting down: no new work (said in every heartbeat)
    // Whether it takes new work, and why not (running jobs go on). Written also as the `paused` bool
    // that coordinators from before this field read; read from that bool when a worker sends no state.
    SharingState sharing = SharingState::sharing;
    std::optional<std::int64_t> sharing_changes_at_ms{}; // Unix ms when `sharing` changes by itself (a window, a timed pause)
    std::optional<OwnerTerms> terms{};                    // what its owner allows (worker.toml)
    std::optional<Inventory> inventory{};       // what the machine offers now (after a start)
    // GPU memory in use now (MiB, whoever holds it), one per GPU of the worker's inventory in its
    // order; empty when the worker cannot tell (no driver). For the pool's metrics only.
    std::vector<std::int64_t> gpu_memory_used_mib{};
    std::vector<FetchProgress> fetching{}; // attempts among `running` waiting for their weights
};

// Why the coordinator stopped one of the worker's attempts ("cancelled by its submitter").
struct StopReason {
    AttemptId attempt{};
    std::string reason;
    bool operator==(const StopReason&) const = default;
};

struct HeartbeatReply {
    std::vector<AttemptId> stop{}; // attempts the worker must stop now (cancelled, lost, over time)
    std::int64_t lease_ms = 0;
    std::vector<std::string> warnings{}; // about a changed inventory (e.g. a GPU model not in the catalog)
    // Why, for each attempt of `stop` the coordinator knows as this worker's (none for one it does not
    // know at all): the words the worker tells its owner. At most one per attempt of `stop`; written
    // only when there is one.
    std::vector<StopReason> stop_reasons{};
};

// The GPUs that take no new work: unhealthy or reclaimed, each once, ascending.
std::vector<std::int64_t> gpus_without_new_work(const Heartbeat& h);

Result<Heartbeat> heartbeat_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Heartbeat& h);
Result<HeartbeatReply> heartbeat_reply_from_json(const nlohmann::json& j);
nlohmann::json to_json(const HeartbeatReply& r);

} // namespace gpupool::api
