// JobControl: the agent's hands on its jobs — it starts an attempt's container, watches the running
// ones (their exits, max_runtime, an engine that stops answering), stops and kills them, and drops
// the attempts the agent is done with. It changes attempts only through the AttemptTable
// (attempt_table.hpp), talks to the ContainerRuntime and the Spool, and tells the machine's owner
// each job's start and end (Hooks::event).
//
// Rules:
// - A start that fails with invalid_input (the job's own inputs) ends the attempt like a job that
//   failed (exit 1); any other failure to start is a worker fault. Either way its log says why.
// - stop(): SIGTERM now, SIGKILL after the grace (watch() sends it); a second stop keeps the first.
// - watch() asks the runtime about each running attempt: an exit ends it (a GPU job that failed asks
//   Hooks::gpu_failed whether its GPU failed under it: then it is a worker fault); a container gone
//   behind the worker's back is a worker fault at once; an engine that cannot say how the job is for
//   engine_unanswered_max kills it as a worker fault. max_runtime (the job's) is enforced with
//   runtime_grace, even while the engine does not answer.
// - The run report (Attempt::report) is made when a job starts: the report the agent gives, the
//   worker's wall clock just before the start, and the image as the runtime resolves it right after
//   (one ContainerRuntime::image_identity per attempt; a digest or id that is not one is dropped, and
//   image_digest_unknown says why neither is known). Its end time is set when the attempt ends here
//   (an exit, a worker fault). An attempt that never started (a failed start, an image that cannot be
//   had) has no report: nothing ran.
// - drop() removes the container first; the attempt's folder is recycled only when that worked
//   (nothing of the job runs any more).
// Not thread-safe: the agent thread owns it.
#pragma once

#include "core/util/clock.hpp"
#include "worker/agent/attempt_table.hpp"
#include "worker/agent/spool.hpp"
#include "worker/runtime/container_runtime.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace gpupool::worker {

struct JobControlOptions {
    std::chrono::milliseconds runtime_grace{10'000};         // SIGTERM -> SIGKILL past max_runtime
    std::chrono::milliseconds engine_unanswered_max{60'000}; // then the job is killed as a worker fault
};

class JobControl {
public:
    struct Hooks {
        std::function<void(const std::string&)> event; // a line for the machine's owner
        // Whether GPU `index` failed (asked now): its reason, or nullopt while it is sound.
        std::function<std::optional<std::string>(std::int64_t index)> gpu_failed;
        // The worker's wall clock, Unix ms (the run report's times); unset: not known (0).
        std::function<std::int64_t()> wall_ms{};
        // A job that ended by itself with exit 0, before its outputs are packed; unset: none. TEST ONLY
        // use: the agent's GPUPOOL_TEST_FORGE (forge.hpp) forges outputs here.
        std::function<void(Attempt&)> exited_zero{};
    };

    JobControl(JobControlOptions options, ContainerRuntime& runtime, Spool& spool, AttemptTable& attempts,
               const util::Clock& clock, Hooks hooks);

    // Starts `t` (made by Spool::create) as `spec` once `ready` (its folders prepared) holds, and
    // holds it from now on, started or failed. `report` (run_report_for), once started, becomes its
    // run report (nullopt: none).
    void start(Attempt t, const ContainerSpec& spec, const Status& ready,
               std::optional<api::RunReport> report = std::nullopt);
    // Holds `t` (made by Spool::create), ended unstarted: its image cannot be had (`why`, the engine's words).
    void end_unstarted(Attempt t, const std::string& why);
    // Ends a held attempt as a worker fault, and tells the owner.
    void end_as_fault(AttemptId id, const std::string& why);
    void stop(AttemptId id, const std::string& why, Outcome outcome, std::chrono::milliseconds grace);
    // Stops every running attempt with `why`, `outcome` and `grace`.
    void stop_all(const std::string& why, Outcome outcome, std::chrono::milliseconds grace);
    void watch();
    // Lets go of an attempt: its container removed, its folder recycled, its id done with.
    void drop(AttemptId id, const std::string& why);

private:
    // Asks the runtime how a running attempt is; false when it has ended.
    bool poll_one(Attempt& t, std::int64_t now);
    void finish(Attempt& t, const ExitStatus& st);
    void event_ended(const Attempt& t) const;
    std::int64_t wall_ms() const { return m_hooks.wall_ms ? m_hooks.wall_ms() : 0; }
    // The image of `report` as the runtime resolves `image` now (see the rules).
    void resolve_image(api::RunReport& report, const std::string& image);
    // Sets the run report's end time, once.
    void report_end(Attempt& t) const;

    JobControlOptions m_opt;
    ContainerRuntime& m_runtime;
    Spool& m_spool;
    AttemptTable& m_attempts;
    const util::Clock& m_clock;
    Hooks m_hooks;
};

} // namespace gpupool::worker
