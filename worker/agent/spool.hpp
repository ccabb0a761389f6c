// Spool: the worker's on-disk truth about the attempts it holds, so that nothing is lost while the
// coordinator is away or the worker restarts.
//
// Layout: <work_dir>/attempts/<attempt id>/ holds assignment.json (the assignment in core/api's wire
// form; older workers kept the poll answer's object as received, which is the same form and loads
// the same way), log (appended by the runtime), work/, outputs/, outputs.tar once packed, and
// state.json (what has been delivered: Attempt's persistent fields, with its run report once
// started). An attempt's folder is taken from, and given back to, AttemptFolders
// (attempt_folders.hpp: recycled, so a job creates and frees no inode in the spool), and its JSON
// files are written in place (write_in_place: a crash leaves the old or the new content). The
// attempts' files are not fsynced (they need to outlive the worker's process, not a power cut, after
// which their jobs are gone too); worker.json is, written 0600 under an unpredictable temporary name
// and renamed into place.
//
// Rules:
// - load() reads back every attempt directory; one whose assignment.json is missing or unreadable is
//   removed, with a warning (it cannot be delivered: not even its attempt id is known). One whose
//   state.json is missing or unreadable (created, perhaps started, never recorded) loads as a
//   running attempt with no container on record: recover() finds its container by its labels or
//   reports it lost, so the coordinator hears at once rather than at the lease's end.
// - recover() is load() after a restart, matched against the runtime's containers labelled
//   gpupool.worker=<worker label>: a running attempt whose container is there (with the right
//   gpupool.attempt label; found by that label when state.json named none) is re-attached; one the runtime cannot
//   re-attach (it does not reattach at all, the container is gone, reattach() failed) comes back with the reason it is
//   lost; containers with this worker's label and no spool are removed.
// - save() and save_unsaved() failures are logged, not returned: the agent goes on (the job still runs), and the worst
//   case is a resend the coordinator skips.
// Not thread-safe: the agent thread owns it.
#pragma once

#include "core/util/result.hpp"
#include "worker/agent/attempt_folders.hpp"
#include "worker/agent/attempt_table.hpp"
#include "worker/runtime/container_runtime.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

class Spool {
public:
    explicit Spool(const std::filesystem::path& work_dir)
        : m_dir(work_dir / "attempts"), m_folders(m_dir, work_dir / "spare-attempts") {}

    const std::filesystem::path& dir() const { return m_dir; }

    // A new attempt's directory with its assignment.json; `now_ms` starts its clocks. `spooled` (when
    // given) says whether it was written: an attempt the spool cannot hold (its disk full) must not
    // start, since the spool is what a restart finds it by (state.json follows once it started;
    // created and never saved, load() brings it back as running with no container on record).
    Attempt create(api::Assignment assignment, std::int64_t now_ms, Status* spooled = nullptr);
    void save(const Attempt& t) const;
    // Writes state.json for every attempt marked `unsaved` (and clears the mark). The agent marks
    // attempts as it changes them and calls this once per step: a crash in between repeats at most
    // what that step sent (a start, log bytes, outputs), which the coordinator takes once only.
    void save_unsaved(AttemptTable& attempts) const;
    std::vector<Attempt> load(std::int64_t now_ms) const;
    struct Recovered {
        Attempt attempt;
        std::optional<std::string> lost; // why it cannot go on (it is reported as a worker fault)
    };
    std::vector<Recovered> recover(ContainerRuntime& runtime, const std::string& worker_label, std::int64_t now_ms) const;
    // Drops the attempt's folder; `reusable` when nothing of the job runs any more (its container or
    // processes are removed), so the folder may be emptied and recycled.
    void remove(const Attempt& t, bool reusable);

    // A line of the worker's own in the job's log (start failures, outputs over the cap).
    static void append_note(const Attempt& t, const std::string& text);

    // state.json's content, and back (missing fields take their defaults). Pure.
    static nlohmann::json state_json(const Attempt& t);
    static void apply_state(Attempt& t, const nlohmann::json& state);

private:
    std::filesystem::path m_dir;
    AttemptFolders m_folders;
};

// A JSON file: read (not_found when missing, invalid_input when not JSON), and written 0600 under an
// unpredictable temporary name, then renamed into place.
Result<nlohmann::json> read_json_file(const std::filesystem::path& path);
Status write_json_file(const std::filesystem::path& path, const nlohmann::json& j);

} // namespace gpupool::worker
