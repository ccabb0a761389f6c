// AttemptTable: the attempts the agent holds — started here, or found in the spool after a restart,
// and not yet delivered — with the ids it is done with and the assignments it owes the coordinator
// back unstarted. It is the one place attempts enter and leave the agent, and the one place their
// lifecycle changes: running, then stopping (stop(): why, how it will end, when SIGKILL is due),
// then ended (finish(), end_unexited(), fail(), blame_worker()). The others write only their own
// fields of the attempts the table lends them: Delivery what it delivered (bytes shipped, the start
// report, outputs and fencing; an ended job whose outputs cannot be shipped fails with that reason),
// the Spool `unsaved`, JobControl since when the engine has not answered about a job.
// The assignments still waiting to start are the WaitingRoom's (waiting_room.hpp), and the ids the
// poll thread has handed over are HandedOut's (handed_out.hpp): neither is held here.
//
// Rules:
// - An id is taken once: after retire() it is done_with() for the life of the process, so an
//   assignment the coordinator re-sends (until the start report reaches it) never runs twice.
// - stop() keeps the first reason: an attempt already stopping (or ended) keeps its reason, outcome
//   and SIGKILL time, and stop() says false.
// - Every lifecycle change marks the attempt `unsaved` (the Spool writes state.json at the end of
//   the agent's step).
// - running() counts the attempts whose job still runs: each holds a slot and its GPU share.
// Pure: no I/O, no clock (times are arguments, milliseconds on the agent's Clock). Not thread-safe:
// the agent thread owns it.
#pragma once

#include "worker/agent/attempt.hpp"
#include "worker/owner/owner_requests.hpp" // RunningJob: what the owner's status shows of a job

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpupool::worker {

// An assignment never started here, to give back to the queue (Delivery::hand_back), and why.
struct HandBack {
    AttemptId attempt{};
    std::string why = "the worker is shutting down: handed back to the queue";
};

class AttemptTable {
public:
    using Map = std::map<AttemptId, Attempt>;

    // ---- membership ----
    // Holds `t` from now on (it must be neither held nor done with: knows() first).
    Attempt& add(Attempt t);
    bool holds(AttemptId id) const { return m_attempts.count(id) != 0; }
    // Delivered or dropped: never taken again.
    bool done_with(AttemptId id) const { return m_done.count(id) != 0; }
    bool knows(AttemptId id) const { return holds(id) || done_with(id); }
    Attempt* find(AttemptId id);
    const Attempt* find(AttemptId id) const;
    Attempt& at(AttemptId id); // one it holds
    // No longer held, and done with; false when it was not held.
    bool retire(AttemptId id);

    // ---- lists, by attempt id ----
    std::size_t size() const { return m_attempts.size(); }
    bool empty() const { return m_attempts.empty(); }
    int running() const;
    Map::iterator begin() { return m_attempts.begin(); }
    Map::iterator end() { return m_attempts.end(); }
    Map::const_iterator begin() const { return m_attempts.begin(); }
    Map::const_iterator end() const { return m_attempts.end(); }
    // The models its attempts name (pinned in the cache while they are held).
    void models(std::set<std::string>& into) const;
    // The running attempts as the owner's status shows them (runtime_s measured to `now_ms`).
    std::vector<RunningJob> running_jobs(std::int64_t now_ms) const;

    // ---- lifecycle ----
    // Asks a running attempt to stop; false when it is not running or already stopping.
    bool stop(AttemptId id, const std::string& why, Outcome outcome, std::int64_t kill_at_ms);
    // Its job exited with `exit_code`: it ends as its stop said (exited when nobody stopped it); a job
    // handed back or faulted has no outputs to send (a later attempt produces them).
    void finish(AttemptId id, std::optional<int> exit_code, std::string reason);
    // Ends it without an exit code of its own and without outputs: a worker fault (nothing to trust
    // in a half-run's outputs), or a job that never started.
    void end_unexited(AttemptId id, Outcome outcome, std::string reason);
    // Its own inputs kept it from starting: it fails like a job (exit 1), with the reason.
    void fail(AttemptId id, std::string reason);
    // An ended job failed with the worker (its GPU failed under it): a worker fault, with `reason`.
    void blame_worker(AttemptId id, std::string reason);
    // Its SIGKILL is due now (kills_due() returns it next), unless it was due earlier.
    void kill_now(AttemptId id, std::int64_t now_ms);
    // The stopping attempts whose SIGKILL is due at `now_ms`, now marked killed (each is returned once).
    std::vector<AttemptId> kills_due(std::int64_t now_ms);

    // ---- hand-backs ----
    void hand_back(AttemptId id, std::string why);
    void hand_back(AttemptId id) { m_hand_backs.push_back({id}); }
    // Delivery::hand_back takes from the back of this list as the coordinator answers.
    std::vector<HandBack>& hand_backs() { return m_hand_backs; }

private:
    Map m_attempts;
    std::set<AttemptId> m_done;
    std::vector<HandBack> m_hand_backs;
};

} // namespace gpupool::worker
