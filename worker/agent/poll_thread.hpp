// The agent's waits on the coordinator — registration and the poll thread — and what they share with
// the agent thread (agent.hpp). Registration retries until the coordinator answers; the poll thread
// long-polls the coordinator for assignments and puts them in the inbox; the agent thread takes
// them from there. drain() and stop() (any thread) end both loops through the same flags.
//
// Rules:
// - The poll thread asks for work only while a slot is free (`slots` 0: no cap), and never once
//   draining or stopping: work that arrives then is not put in the inbox (the coordinator hands it
//   back when the worker leaves, POST /v1/workers/leave, or when its lease runs out).
// - A failed poll backs off with jitter (unavailable) or waits backoff_max (anything else); every
//   wait ends at once on drain or stop. A poll in flight ends when the coordinator answers it,
//   which it does at once when the worker leaves.
// Thread-safe: the flags are atomics, the inbox is guarded by `mu`.
#pragma once

#include "core/api/assignment.hpp"
#include "core/util/clock.hpp"
#include "core/util/thread_safety.hpp"
#include "worker/agent/coordinator_link.hpp"
#include "worker/agent/identity.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <vector>

namespace gpupool::worker {

struct AgentOptions;

struct AgentSignals {
    util::Mutex mu;
    std::condition_variable_any cv;
    std::vector<api::Assignment> inbox GUARDED_BY(mu);
    bool exited GUARDED_BY(mu) = false; // the runtime saw a job end (ContainerRuntime::on_exit)
    std::atomic<int> slots{0};          // the owner's max_jobs, for the poll thread
    std::atomic<bool> draining{false};
    std::atomic<bool> hurry{false}; // drain_now(): stop the running jobs without waiting
    std::atomic<bool> stopping{false};
    std::atomic<int> active{0}; // attempts running or waiting to start

    // Wakes every waiter (`job_exited`: the runtime saw a job end).
    void wake(bool job_exited = false);
    // Waits `d`, or less when stopping or draining (a SIGTERM must not wait out a retry delay).
    void sleep_for(std::chrono::milliseconds d);
    // The agent thread's wait: at most `d`, less when assignments arrive, a job exits, `also()` holds
    // (the owner's requests) or stopping. Returns the inbox's assignments (taken out) and forgets the exit.
    std::vector<api::Assignment> take_inbox(std::chrono::milliseconds d, const std::function<bool()>& also);
};

// Registers (POST /v1/workers/register) as `registration`, retrying with backoff and jitter while
// the coordinator is unavailable; any other refusal, or a drain or stop meanwhile, is an Error
// saying it cannot register. The identity's `pool` is `pool`; its instance is left to fill.
Result<StoredIdentity> register_until_answered(CoordinatorLink& link, const api::Registration& registration,
                                               const AgentOptions& opt, const std::string& pool, AgentSignals& s);

// A clean exit (POST /v1/workers/leave, waiting at most `wait`): the coordinator marks the worker
// offline at once and queues again what it assigned here and was not started. A failure is logged.
void leave_pool(CoordinatorLink& link, std::chrono::milliseconds wait);

// The poll thread's loop: returns once stopping or draining.
void poll_for_assignments(CoordinatorLink& link, AgentSignals& s, const AgentOptions& opt,
                          const util::Clock& clock);

} // namespace gpupool::worker
