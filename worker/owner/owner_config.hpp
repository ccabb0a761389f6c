// worker.toml: the GPU owner's terms for sharing this machine (docs/worker.md has the schema and an
// example, templates/worker.toml a commented file).
//
// [pool] says how the worker joins (read once, at start); [share], [[share.window]] and [[gpu]] say
// what it offers and when (re-read by `gpupool worker reload` and SIGHUP). Every setting is
// optional: an absent one is left to the command line or the worker's default. Flags given on
// `gpupool worker --share` override the file (merge()).
//
// parse_owner_config reads the whole file and reports every problem at once (Error::more), each
// with the file, line, column and the field (`share.window[1].from`, `gpu[0].keep_mib`): unknown
// keys (with the nearest valid one), wrong types, values out of range, duplicate GPU indices. The
// text is the owner's but still checked like anyone's. toml++ exceptions stay inside the .cpp.
// Pure functions, thread-safe.
#pragma once

#include "core/util/result.hpp"
#include "worker/gpu/mps_daemon.hpp" // MpsCompute

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::worker {

// One [[share.window]]: sharing is open on the days in `days` from `from_min` to `to_min` (minutes
// after local midnight; to_min may be 1440, "24:00"). A window whose `to` is not after its `from`
// crosses midnight and belongs to the day it starts on ("fri 19:00 to 08:00" ends Saturday 08:00).
struct ShareWindow {
    std::uint8_t days = 0; // bit N = weekday N, 0 = Sunday (C's tm_wday)
    int from_min = 0;
    int to_min = 0;
    bool all_day = false;
    std::uint32_t line = 0; // where it was written, for messages
    bool operator==(const ShareWindow&) const = default;
};

// One [[gpu]]: whether the GPU with this driver index is offered, and how much of its memory the
// owner keeps back (the pool sees the rest).
struct GpuTerms {
    std::int64_t index = 0;
    bool share = true;
    std::int64_t keep_mib = 0;
    bool operator==(const GpuTerms&) const = default;
};

// [pool]: how the worker joins.
struct PoolSettings {
    std::optional<std::string> coordinator{};
    std::optional<std::string> token_file{};
    std::optional<std::string> ca_cert{};
    std::optional<std::string> name{};
    std::optional<std::string> work_dir{};
    std::optional<std::string> cache_dir{};
    std::optional<std::string> runtime{}; // podman, docker or process
    std::optional<bool> unsafe_process_runtime{};
    std::optional<bool> mps{};                      // run an MPS daemon for fractional jobs (--mps)
    std::optional<MpsCompute> mps_compute{};        // MPS clients' compute: throughput or isolate (--mps-compute)
    std::optional<std::int64_t> model_cache_max_mib{}; // the model cache's size cap ("200GiB")
    std::optional<std::string> hf_token_file{};     // a Hugging Face token, for gated models
    std::optional<std::string> hf_endpoint{};       // a hub mirror (default $HF_ENDPOINT, else huggingface.co)
};

// [share] with its windows, and the [[gpu]] tables: what a reload may change.
struct ShareSettings {
    std::optional<int> max_jobs{};               // slots; 0 = no cap
    std::optional<std::int64_t> max_runtime_s{}; // the longest job the owner accepts
    std::optional<std::int64_t> cpu_milli{};
    std::optional<std::int64_t> memory_mib{};
    std::optional<std::vector<std::string>> teams{};      // absent: every team
    std::optional<std::vector<std::string>> registries{}; // absent: any image
    std::optional<std::int64_t> drain_grace_s{};
    std::optional<std::vector<ShareWindow>> windows{}; // absent (no [[share.window]]): always open
    std::vector<GpuTerms> gpus{};                      // GPUs not named are shared whole
};

struct OwnerConfig {
    std::string file; // where it was read from ("" when there is no file)
    PoolSettings pool{};
    ShareSettings share{};
};

Result<OwnerConfig> parse_owner_config(std::string_view text, const std::string& file);
// Reads and parses a file; a missing or unreadable file is an Error naming it.
Result<OwnerConfig> load_owner_config(const std::filesystem::path& path);
// ~/.config/gpupool/worker.toml ($XDG_CONFIG_HOME/gpupool/worker.toml when set): the file
// `gpupool worker` reads when no --config is given and it exists.
std::filesystem::path default_owner_config_path();

// `top` where it sets a value, else `base` (the flags over the file). GPU terms: top's when it
// names any GPU, else base's.
ShareSettings merge(const ShareSettings& top, const ShareSettings& base);

// "mon-fri", "sat,sun", "all", "weekdays", "weekends", "fri-mon", "monday" -> the ShareWindow::days
// bits; an Error (invalid_input) saying what was expected otherwise.
Result<std::uint8_t> parse_days(std::string_view text);
// A window as the owner reads it: "mon,tue,wed,thu,fri 19:00-08:00", "sat,sun all day", "every
// day 09:00-17:00" (local time; the caller adds the zone).
std::string window_text(const ShareWindow& window);

// "19:00" -> 1140; "24:00" only when allow_24 (a window's end).
Result<int> parse_clock_time(std::string_view text, bool allow_24);

} // namespace gpupool::worker
