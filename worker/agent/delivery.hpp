// Delivery: the agent thread's side of the exchange with the coordinator — heartbeats (and the stop
// orders they carry), start reports, log chunks by offset, outputs, completions and hand-backs —
// with backoff while the coordinator is away. The spool stays the truth: an attempt is delivered
// (and only then dropped by the agent) once the coordinator has taken its completion, and what was
// delivered is marked on the attempt (Attempt::unsaved) for the agent to write at the end of its step.
//
// Rules:
// - Outputs up to 1 MiB are packed in memory and sent at once; larger ones are packed once into
//   outputs.tar in the attempt's spool (kept until uploaded, across restarts).
// - Per attempt, in order: start report (the starts of every attempt started since the last round
//   go in one request, each answered on its own), log bytes (by offset; a resend is harmless), and once it
//   ended: outputs (packed once into outputs.tar, kept until uploaded), a last look at the log (the
//   worker's own notes), then complete: the completions of every attempt that got there in one
//   pass go in one request (api::AttemptEnd), each answered on its own, each with the attempt's run
//   report (Attempt::report, when it has one). Log bytes go at once when 64 KiB are pending, else at least
//   every log_flush; at most 1 MiB per request.
// - unavailable (unreachable, 5xx): nothing more goes out until a backoff delay (exponential, with
//   jitter) has passed on the Clock; any success resets it.
// - conflict (409): the attempt is fenced — stopped if it runs (Hooks::stop) and dropped without
//   delivering. Another refusal of an ended attempt fences it too (the coordinator will never take it).
//   A running one is stopped in the same deliver(), after a heartbeat that names it asks why: the
//   stop is worded as the coordinator's reply says (`stop_reasons`: "cancelled by its submitter"),
//   and "the coordinator no longer knows this attempt" only when it gives none (or cannot be asked).
// - A TLS verification failure, or a heartbeat refused as unauthorized or forbidden (a banned
//   worker, a pool that forgot it), is fatal(): the agent stops rather than retry forever.
// - Heartbeats go every `heartbeat` at most (lease/3 when that is shorter) or at once after
//   heartbeat_now(); the first one since the start carries the inventory, and so does any after it
//   changed; each says whether the worker takes work (Facts::sharing: the owner's pause, window or
//   use) and what its owner allows (Facts::terms).
// Not thread-safe: the agent thread owns it (the poll thread has its own link).
#pragma once

#include "core/util/clock.hpp"
#include "worker/agent/attempt_table.hpp"
#include "worker/agent/backoff.hpp"
#include "worker/agent/coordinator_link.hpp"
#include "worker/agent/spool.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpupool::worker {

// What Delivery takes of the agent's options (AgentOptions, agent.hpp).
struct DeliveryOptions {
    std::filesystem::path work_dir{};           // where worker.json is (named when the pool refuses us)
    std::chrono::milliseconds heartbeat{5'000}; // at most; lease_ms / 3 when that is shorter
    std::chrono::milliseconds log_flush{500};   // ship pending log bytes at least this often
};

class Delivery {
public:
    struct Hooks {
        // Stop a running attempt the coordinator no longer wants (SIGTERM, then SIGKILL after stop_grace).
        std::function<void(Attempt&, const std::string& why)> stop;
        // A stop order for an assignment still waiting for its GPU: true when it was one (now cancelled).
        std::function<bool(AttemptId attempt)> cancel_waiting;
        // A line for the machine's owner.
        std::function<void(const std::string&)> event;
    };
    // What a heartbeat says besides the attempts held.
    struct Facts {
        std::vector<AttemptId> waiting{};           // assignments waiting for their GPU (they keep their lease)
        std::vector<std::int64_t> unhealthy_gpus{};
        std::vector<std::int64_t> reclaimed_gpus{}; // in use by the machine's owner (reclaim.hpp)
        bool draining = false;
        int active = 0;
        api::Inventory inventory{};                 // sent with the first heartbeat since the start, and when changed
        api::SharingState sharing = api::SharingState::sharing;
        std::optional<std::int64_t> sharing_changes_at_ms{};
        std::optional<api::OwnerTerms> terms{};
        std::vector<std::int64_t> gpu_memory_used_mib{}; // per GPU of `inventory`, in its order (empty: unknown)
        std::vector<api::FetchProgress> fetching{};      // waiting assignments whose weights are downloading
    };

    Delivery(DeliveryOptions options, CoordinatorLink& link, const util::Clock& clock, Backoff backoff,
             Hooks hooks);

    bool online() const { return m_clock.now_ms() >= m_offline_until_ms; }
    void heartbeat_now() { m_next_heartbeat_ms = m_clock.now_ms(); }
    // Sends what is due, attempt by attempt; returns the attempts that are done with (delivered, or
    // fenced and ended) for the agent to drop.
    std::vector<AttemptId> deliver(AttemptTable& attempts, const std::function<Facts()>& facts);
    // Completes the assignments never started here (AttemptTable::hand_backs, taken from the back) as
    // owner_preempted so they queue again at once (nobody is charged); those still listed afterwards
    // wait for the coordinator.
    void hand_back(AttemptTable& attempts);
    // When the coordinator last answered (the Clock's ms), if it has since the start.
    std::optional<std::int64_t> last_contact_ms() const { return m_last_contact_ms; }

    // Why the agent must stop (see the rules); nullopt while it may go on.
    const std::optional<Error>& fatal() const { return m_fatal; }
    std::int64_t lease_ms() const { return m_lease_ms; }

private:
    void heartbeat_if_due(AttemptTable& attempts, const std::function<Facts()>& facts);
    void obey(const api::HeartbeatReply& answer, AttemptTable& attempts);
    // Classifies a failed call. Returns false when the link is down (stop using the network).
    // `id` is AttemptId() for calls about no attempt (the heartbeat).
    bool handle(AttemptTable& attempts, AttemptId id, const Error& e, const char* what);
    // One attempt's due deliveries up to its completion; false when the link went down. Sets `done`
    // when it is finished with (fenced), `ended` when only its completion is left to send.
    bool deliver_one(AttemptTable& attempts, Attempt& t, bool& done, bool& ended);
    // The start reports of every attempt started since the last round, in one request.
    void report_starts(AttemptTable& attempts);
    // The completions of every attempt that got that far this round, in one request.
    void complete_all(AttemptTable& attempts, const std::vector<api::AttemptEnd>& ends, std::vector<AttemptId>& done);
    bool ship_logs(AttemptTable& attempts, Attempt& t, bool flush);
    bool upload_outputs(AttemptTable& attempts, Attempt& t);
    // The outputs cannot be shipped: the attempt fails with why, and its log says so.
    static void outputs_failed(Attempt& t, const std::string& why);
    static void note_skipped(const Attempt& t, const std::vector<std::string>& skipped);
    // Packs outputs.tar once; false when the outputs cannot be shipped (the attempt then fails with why).
    bool pack_outputs_once(Attempt& t);
    void delivered() {
        m_backoff.reset();
        m_last_contact_ms = m_clock.now_ms();
    }

    DeliveryOptions m_opt;
    CoordinatorLink& m_link;
    const util::Clock& m_clock;
    Backoff m_backoff;
    Hooks m_hooks;
    std::int64_t m_offline_until_ms = 0;
    std::int64_t m_next_heartbeat_ms = 0;
    std::set<AttemptId> m_ask_why; // refused (409) while running: asked why in the next heartbeat
    std::int64_t m_lease_ms = 30'000;
    bool m_inventory_sent = false; // the inventory went with a heartbeat since this start
    api::Inventory m_sent_inventory{}; // as last taken by the coordinator
    std::optional<std::int64_t> m_last_contact_ms{};
    std::optional<Error> m_fatal;
};

} // namespace gpupool::worker
