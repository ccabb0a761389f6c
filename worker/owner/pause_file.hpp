// The owner's pause, kept in <work_dir>/paused so that it outlives the worker: a worker started
// while the file holds a pause starts paused. `gpupool worker pause [--for 2h]` and `resume` write
// and remove it (through the running worker when there is one, else directly); the running worker
// reads it again at least every second.
//
// The file (0600, JSON: since_ms, why, until_ms) says when, why and, for a timed pause, until when.
// A timed pause that has ended counts as no pause; the running worker removes the file then. A
// file from before this format (one line of text) is read as an open-ended pause with that line as
// its note. The work dir is the owner's (0700): nobody else can write it.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace gpupool::worker {

struct PauseRecord {
    std::int64_t since_ms = 0;              // Unix ms; 0 when unknown (an older file)
    std::string why{};                      // the owner's note, at most 200 bytes
    std::optional<std::int64_t> until_ms{}; // a timed pause ends by itself then
};

// The pause as the file holds it, ended or not; nullopt when there is no file.
std::optional<PauseRecord> read_pause(const std::filesystem::path& work_dir);
// The pause in force at `now_ms` (a timed one that has ended is none).
std::optional<PauseRecord> pause_in_force(const std::filesystem::path& work_dir, std::int64_t now_ms);

// Writes the pause (since = the system clock's now), replacing any earlier one.
Status pause_sharing(const std::filesystem::path& work_dir, const std::string& why,
                     std::optional<std::int64_t> until_ms = std::nullopt);
Status resume_sharing(const std::filesystem::path& work_dir);
// "2026-12-01 10:00:00 UTC: my training" while a pause is in force now (system clock); else nullopt.
std::optional<std::string> paused_since(const std::filesystem::path& work_dir);

} // namespace gpupool::worker
