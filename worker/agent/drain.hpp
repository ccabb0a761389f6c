// Drain: the clock of a worker that is leaving (Agent::drain, drain_now) — when its running jobs must
// be stopped and handed back, and when run() may return. The agent asks step() once per turn of its
// loop and does what the answer says (stops, heartbeats, log lines); Drain does nothing itself.
//
// Rules:
// - The first step starts the drain: running jobs have `grace` to finish (Step::started: the agent
//   tells the coordinator at once that it takes no new work).
// - A hurried drain (drain_now) stops them at once, even one started before with a longer grace,
//   and waits at most k_hurried_give_up (or give_up_after, when shorter) for the coordinator.
// - From the deadline on, every step says stop_running (stopping an attempt twice is harmless).
// - Done once nothing is held nor owed (every result delivered, every hand-back taken); or, once no
//   job runs any more, after give_up_after without that (the coordinator stays away: the results
//   stay spooled for the next start; Step::gave_up).
// Pure: times are the agent's Clock in ms. Not thread-safe: the agent thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace gpupool::worker {

class Drain {
public:
    static constexpr std::chrono::milliseconds k_hurried_give_up{5'000};

    Drain(std::chrono::milliseconds grace, std::chrono::milliseconds give_up_after)
        : m_grace(grace), m_give_up_after(give_up_after) {}

    struct Step {
        bool started = false;      // the drain began at this step
        bool hurried = false;      // drain_now() cut the grace short at this step
        bool stop_running = false; // stop the running jobs and hand them back
        bool done = false;         // run() may return
        bool gave_up = false;      // done without the coordinator taking everything
    };
    // `active`: jobs running or waiting to start; `settled`: nothing held nor owed to the coordinator.
    Step step(std::int64_t now_ms, bool hurry, int active, bool settled);

private:
    std::chrono::milliseconds m_grace;
    std::chrono::milliseconds m_give_up_after;
    std::optional<std::int64_t> m_deadline_ms;
    std::optional<std::int64_t> m_give_up_at_ms;
};

} // namespace gpupool::worker
