// WorkerRoster: the pool's workers as the coordinator keeps them, and what their GPUs are worth.
//
// It owns each worker's LiveWorker (pool_view.hpp: its record, its inventory as the scheduler reads
// it, what its last heartbeat said), the counts of the GPU kinds, CPU amounts and memory sizes of the
// workers that are not banned (what estimates and feasibility read without walking the fleet), and
// the model-weight downloads of assigned attempts. Two kinds of state, each changed in one place:
// - durable (records, inventories, the counts): only absorb(), with each change set after the store
//   committed it;
// - what heartbeats say (health, draining, sharing, terms, GPU memory in use, downloads), not durable
//   because every heartbeat says it again: only note_heartbeat(), set_terms(), note_registration()
//   and the fetch notes.
//   A worker absorb() adds from the store (at a start, or on taking over) is not `heard` until its
//   first heartbeat or registration, and offers nothing until then (LiveWorker::heard).
//
// The contract: the durable part of a roster that absorbed a sequence of committed changes equals
// (first_difference) that of a roster that absorbed the store's snapshot after them. Not
// thread-safe: the coordinator's one thread owns it.
#pragma once

#include "core/api/heartbeat.hpp"
#include "core/api/inventory.hpp"
#include "core/coordinator/pool_view.hpp"
#include "core/coordinator/token_book.hpp"
#include "core/credits/catalog.hpp"
#include "core/recipe/recipe.hpp"
#include "core/store/store.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpupool::coordinator {

// How many GPUs of one kind (model, memory MiB) the workers that are not banned have, and the
// catalog's rate per GPU-hour for it.
struct GpuKindCount {
    credits::Micro rate = 0;
    std::int64_t gpus = 0;
    bool operator==(const GpuKindCount&) const = default;
};
using GpuKinds = std::map<std::pair<std::string, std::int64_t>, GpuKindCount>;

struct RosterOptions {
    std::int64_t worker_timeout_ms = 30'000; // silent this long: offline, no new work
    // Fractional jobs only on GPUs whose worker holds jobs to their share (CoordinatorOptions).
    bool whole_gpu_only_unenforced = false;
};

class WorkerRoster {
public:
    // `rates` prices the GPU kinds and names mismatched models; it must outlive the roster.
    WorkerRoster(RosterOptions options, const credits::RateCatalog& rates);

    // ---- reads ----
    const std::map<WorkerId, LiveWorker>& workers() const { return m_workers; }
    bool empty() const { return m_workers.empty(); }
    const LiveWorker* find(WorkerId id) const;
    const LiveWorker& at(WorkerId id) const { return m_workers.at(id); }
    // A worker there is, and banned.
    bool banned(WorkerId id) const;
    // Heard from within the timeout and not waiting to confirm a restore: a pass may place on it.
    bool reachable(const LiveWorker& w, std::int64_t now_ms) const;
    // How a worker is now: "banned", "drained" (by an admin), "quarantined" (its spot checks
    // disagreed: spot_checks.hpp), "offline" (no heartbeat within the
    // worker timeout, or none since the pool was restored from a backup), "draining" (the worker is
    // shutting down), "paused" (by its owner), "off-hours" (outside its owner's sharing hours),
    // "reclaimed" (its owner uses its GPUs) or "online".
    std::string presence(WorkerId id, std::int64_t now_ms) const;
    // The other workers registered with the enrollment token `id` registered with, ascending.
    std::vector<WorkerId> enrolled_with(WorkerId id) const;
    const GpuKinds& gpu_kinds() const { return m_gpu_kinds; }
    // The most CPU (milli) and memory (MiB) one worker that is not banned has; 0 with none.
    std::int64_t largest_cpu_milli() const;
    std::int64_t largest_memory_mib() const;
    // Why a job asking for `r` can never run here (no worker that is not banned is large enough, or
    // has a GPU of its models); nullopt when one could, or while the pool has no worker at all.
    std::optional<std::string> infeasible_reason(const recipe::Resources& r) const;
    // Why nothing is placed while no worker takes work: none connected, or how many are paused,
    // off-hours or in use by their owners (and when the first shares again).
    std::string no_worker_reason(std::int64_t now_ms) const;
    // The hourly price of `r` on the worker's GPU `gpu_index` (-1: CPU only), `gpu_milli` of it.
    credits::Micro attempt_price(const recipe::Resources& r, WorkerId worker, std::int64_t gpu_index,
                                 std::int64_t gpu_milli) const;
    // What a registration or a new inventory is told: models the catalog lacks, memory that is not
    // the model's.
    std::vector<std::string> inventory_warnings(const api::Inventory& inventory) const;
    // "GPU 0 `H100-80GB` with 24GiB (the catalog's H100-80GB has 80GiB)"; "" when none.
    std::string model_mismatch_of(const api::Inventory& inventory) const;
    // How far an assigned attempt's model weights have come, as its worker last said; nullptr if not.
    const api::FetchProgress* fetching(WorkerId worker, AttemptId attempt) const;

    // ---- what heartbeats say (not durable) ----
    // Takes in a heartbeat's health, draining, sharing, terms (team names resolved by `teams`) and GPU
    // memory in use (`inventory`: the one it sends now, if any). Returns whether any of it changes
    // what a scheduling pass may decide (or the worker is back from silence).
    bool note_heartbeat(WorkerId id, const api::Heartbeat& beat, const api::Inventory* inventory, std::int64_t now_ms,
                        const TokenBook& teams);
    // The owner's terms, team names resolved to ids (a name no team has is dropped).
    void set_terms(WorkerId id, std::optional<api::OwnerTerms> terms, const TokenBook& teams);
    // A worker that just registered here: its terms as it stated them, and `heard` (its sharing state
    // follows in its first heartbeat, which a worker sends at once).
    void note_registration(WorkerId id, std::optional<api::OwnerTerms> terms, const TokenBook& teams);
    // The downloads a worker reports, kept for its attempts in `assigned` (its assigned ones) only.
    void note_fetching(WorkerId id, const std::vector<api::FetchProgress>& fetching,
                       const std::set<AttemptId>& assigned);
    void forget_fetching(WorkerId id, AttemptId attempt);

    // ---- learning of commits ----
    // Workers last seen before this time are unconfirmed (a restore from a backup); set before start.
    void set_restored_at(std::int64_t ms) { m_restored_at_ms = ms; }
    std::int64_t restored_at() const { return m_restored_at_ms; }
    const RosterOptions& options() const { return m_options; }
    const credits::RateCatalog& rates() const { return *m_rates; }
    // Absorbs the workers of committed changes; with new teams, re-resolves owners' terms. Returns
    // every worker whose LiveWorker changed (for the scheduler's view), ascending.
    std::vector<WorkerId> absorb(const store::Changes& changes, const TokenBook& teams);
    // The first durable difference from `rebuilt`, in words; nullopt when there is none.
    std::optional<std::string> first_difference(const WorkerRoster& rebuilt) const;

private:
    // Adds (+1) or takes back (-1) a worker's GPUs, CPUs and memory in the counts; a banned one has none.
    void count(const LiveWorker& w, int sign);

    RosterOptions m_options;
    const credits::RateCatalog* m_rates;
    std::map<WorkerId, LiveWorker> m_workers;
    GpuKinds m_gpu_kinds;
    std::map<std::int64_t, std::int64_t> m_cpu_counts;    // CPU milli -> workers
    std::map<std::int64_t, std::int64_t> m_memory_counts; // memory MiB -> workers
    std::map<WorkerId, std::map<AttemptId, api::FetchProgress>> m_fetching;
    std::int64_t m_restored_at_ms = 0;
};

} // namespace gpupool::coordinator
