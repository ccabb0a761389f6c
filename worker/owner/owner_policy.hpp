// OwnerPolicy: the owner's terms as the running worker applies them — whether it takes work now
// (the pause file, the sharing windows, a GPU reclaimed by its owner), what it offers (shared GPUs
// with the memory kept back, max_jobs, CPUs, memory), which assignments it refuses, and what the
// coordinator is told (api::OwnerTerms, api::SharingState and when that next changes).
//
// Rules:
// - State, in this order: paused (the owner's pause is in force), reclaimed (set_reclaimed), then
//   outside_window (worker.toml's windows are closed), else sharing. Only `sharing` takes work.
// - When a window closes, running jobs get the drain grace ([share] drain_grace, else the worker's
//   --drain-grace) and then must be handed back (window_grace_over()); a window that opens again
//   within the grace lets them go on. A pause leaves running jobs alone (pause --now is the agent's).
// - An assignment is refused (refusal()) when its GPU is not shared or it is outside the terms
//   (api::outside_terms): the agent hands it back as owner_preempted, so nobody is charged.
// - reload() re-reads worker.toml's [share] and [[gpu]]; the command line's flags still win. A file
//   that does not parse changes nothing (the error is returned and told). [pool] changes need a
//   restart.
// - The owner is told (event) each change of state, once.
// Time: wall-clock Unix ms from the injected Clock (the windows are local times). Not thread-safe:
// the agent thread owns it.
#pragma once

#include "core/api/assignment.hpp"
#include "core/api/owner_terms.hpp"
#include "core/util/clock.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/owner/owner_config.hpp"
#include "worker/owner/pause_file.hpp"
#include "worker/owner/sharing_window.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

class OwnerPolicy {
public:
    struct Options {
        std::filesystem::path work_dir{};
        std::filesystem::path config_file{};            // worker.toml, re-read by reload(); empty: none
        ShareSettings flags{};                          // from the command line: win over the file
        ShareSettings start{};                          // flags over the file, as read at start
        std::chrono::milliseconds drain_grace{300'000}; // when neither says
        std::function<void(const std::string&)> event{};
    };

    OwnerPolicy(Options options, const util::Clock& wall);

    // Looks again (the pause file at most once a second, the windows when they change, or at once
    // when `now` is true); `running` is for the owner's lines.
    void refresh(int running, bool now = false);
    api::SharingState state() const { return m_state; }
    std::int64_t now_ms() const { return m_wall.now_ms(); } // the wall clock the policy reads
    bool taking_work() const { return m_state == api::SharingState::sharing; }
    // When the state next changes by itself (a window, a timed pause), Unix ms.
    std::optional<std::int64_t> changes_at_ms() const;
    // A window closed more than the drain grace ago and is still closed: hand running jobs back.
    bool window_grace_over() const;

    const ShareSettings& settings() const { return m_settings; }
    api::OwnerTerms terms() const;
    std::chrono::milliseconds drain_grace() const;
    // The GPUs offered: those shared, each with the owner's kept memory taken off (a GPU with
    // nothing left is not offered).
    std::vector<GpuInfo> offered_gpus(const std::vector<GpuInfo>& all) const;
    // Every GPU as jobs see it: the shared ones with the kept memory taken off, the others as they are.
    std::vector<GpuInfo> jobs_view(const std::vector<GpuInfo>& all) const;
    // Why this worker does not take the assignment (not sharing now, or outside the terms), or nullopt.
    std::optional<std::string> refusal(const api::Assignment& a, const std::vector<GpuInfo>& all) const;

    Status reload();
    // `until_ms`: a timed pause; the file keeps it, so a restart stays paused.
    Status pause(const std::string& why, std::optional<std::int64_t> until_ms);
    Status resume();
    void set_reclaimed(bool reclaimed, int running);
    const std::optional<PauseRecord>& pause_record() const { return m_pause; }
    const WindowVerdict& window() const { return m_window; }

    // The state in words for the owner: "sharing", "paused until Tue 10:00 CET (my training)",
    // "outside its sharing window; the next opens Mon 19:00 CET".
    std::string describe() const;

private:
    void apply(ShareSettings settings);
    void set_state(api::SharingState s, int running);

    Options m_opt;
    const util::Clock& m_wall;
    ShareSettings m_settings;
    api::SharingState m_state = api::SharingState::sharing;
    bool m_told = false; // the first state was told
    bool m_reclaimed = false;
    std::optional<PauseRecord> m_pause{};
    WindowVerdict m_window{};
    std::optional<std::int64_t> m_closed_at_ms{}; // the window closed then (wall ms), still closed
    std::int64_t m_pause_checked_ms = 0;
    bool m_window_known = false;
};

} // namespace gpupool::worker
