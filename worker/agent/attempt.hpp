// Attempt: what the worker knows of one attempt it holds — the assignment, where its spool is, how
// far its log has been shipped, and how it ended. A plain value; the agent holds its attempts in an
// AttemptTable (attempt_table.hpp), which alone changes their lifecycle; the spool (spool.hpp)
// persists the part that must survive a restart (state.json), delivery.hpp ships it.
// Times are milliseconds on the agent's Clock (core/util/clock.hpp), except the run report's (Unix ms).
#pragma once

#include "worker/agent/worker_api.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace gpupool::worker {

enum class AttemptPhase : std::uint8_t { running, ended };

struct Attempt {
    api::Assignment a{};
    std::filesystem::path dir{};
    std::string container{};
    AttemptPhase phase = AttemptPhase::running;
    bool start_reported = false;
    std::int64_t shipped = 0;                 // log bytes the coordinator has confirmed
    std::int64_t started_ms = 0;              // local start (for max_runtime)
    std::int64_t last_ship_ms = 0;
    std::optional<std::int64_t> kill_at_ms{}; // SIGKILL after a SIGTERM
    bool killed = false;
    std::string stop_reason{};                // why we stopped it (empty: it ended by itself)
    Outcome stop_outcome = Outcome::exited;
    // Once ended:
    std::optional<int> exit_code{};
    std::string reason{};
    Outcome outcome = Outcome::exited;
    bool outputs_done = false;                // packed and uploaded (or nothing to upload)
    std::string outputs_error{};
    bool fenced = false;                      // 409: drop without delivering
    std::int64_t gpu_limit_mib = 0;           // a fractional GPU job's memory share (0: not watched)
    std::optional<std::int64_t> poll_failing_since_ms{}; // the engine cannot tell how the job is
    // What the worker ran (core/api/run_report.hpp), sent with the completion: made when the job
    // started (JobControl::start), its end time set when it ended; nullopt for an attempt that never
    // started, or one an older worker started and recorded without it.
    std::optional<api::RunReport> report{};
    // state.json is behind this value: Spool::save_unsaved writes it once at the end of the agent's
    // step, so a job that starts, is reported and ends costs one write, not one per change (#12).
    bool unsaved = false;

    AttemptId id() const { return a.attempt; }
    bool running() const { return phase == AttemptPhase::running; }
    std::filesystem::path log_path() const { return dir / "log"; }
};

// SIGTERM -> SIGKILL when the coordinator orders a stop: the worker's own grace, or the job's
// `[checkpoint] grace` when that is longer (time to save its progress).
inline std::chrono::milliseconds stop_grace_of(const Attempt& t, std::chrono::milliseconds worker_grace) {
    return std::max<std::chrono::milliseconds>(worker_grace, std::chrono::seconds(t.a.spec.checkpoint.grace_s));
}

} // namespace gpupool::worker
