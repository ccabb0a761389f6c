// Recipes: what a researcher asks the pool to run, as parsed from TOML, and the jobs it expands to.
//
// A Recipe is the validated form of one recipe file (after `extends` is applied); expand() turns
// it into JobSpecs, one per point of the sweep's cartesian product, with `{param}` placeholders
// substituted. The format is specified in docs/recipes.md. All quantities are fixed-point integers
// (see core/resources/quantity.hpp). These are plain value types, safe to copy between threads.
#pragma once

#include "core/resources/model_memory.hpp"
#include "core/util/result.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::recipe {

enum class Priority : std::uint8_t { low, normal, high };
const char* to_string(Priority p);

struct Resources {
    // GPU: `gpus` is 0 (CPU-only) or 1. A job with gpus = 1 asks for a share of one GPU given
    // either as `gpu_milli` (1..1000; 1000 = the whole GPU) or as `gpu_memory_mib` (the share is
    // then that memory over the placed GPU's memory). Exactly one of the two is non-zero when
    // gpus = 1; both are zero when gpus = 0.
    std::int64_t gpus = 0;
    std::int64_t gpu_milli = 0;
    std::int64_t gpu_memory_mib = 0;
    std::vector<std::string> gpu_models; // acceptable GPU models; empty = any
    std::int64_t cpu_milli = 1000;
    std::int64_t memory_mib = 4096;
    std::int64_t disk_mib = 10240;
    std::int64_t max_runtime_s = 3600;
    // Stop the job when it holds its GPU share without using the GPU for this long (`idle_timeout`):
    // -1 = the pool's default (`coordinator --idle-timeout`), 0 = never. Only GPU jobs are watched.
    std::int64_t idle_timeout_s = -1;

    bool operator==(const Resources&) const = default;
};

struct Inputs {
    std::vector<std::string> paths;   // as written in the recipe
    std::vector<std::string> resolved; // absolute local paths (same order), when files were checked
    std::int64_t max_size_mib = 100;
    std::int64_t total_bytes = 0;      // measured when files were checked
    // The packed inputs as uploaded to the coordinator (PUT /v1/inputs/{sha256}): lowercase hex
    // SHA-256 of the tar archive; empty when the job has no inputs (or they were not shipped).
    std::string archive;
    bool operator==(const Inputs&) const = default;
};

struct Outputs {
    std::vector<std::string> paths{"."}; // relative to the job's output directory; globs allowed
    std::int64_t max_size_mib = 900;
    bool operator==(const Outputs&) const = default;
};

// Log bytes kept per attempt. 0: the pool's default (`coordinator --max-log-mib`); a recipe may
// set it up to the pool's limit (`--max-log-limit-mib`), checked at submit.
struct Logs {
    std::int64_t max_size_mib = 0;
    bool operator==(const Logs&) const = default;
};

struct Retry {
    std::int64_t max_attempts = 3;           // attempts in all, including ones lost to worker faults
    std::vector<std::int64_t> on_exit_codes; // job exit codes that earn another attempt
    bool operator==(const Retry&) const = default;
};

// `[checkpoint]`: the job saves its progress at least every `every_s` seconds, somewhere its next
// attempt resumes from (its own storage; /team-cache only on the same worker). The scheduler then
// counts only the work since the last save as lost when it chooses whom to preempt, and a stop
// (preemption, cancel) gives it SIGTERM and `grace_s` to save before SIGKILL. every_s 0: none.
inline constexpr std::int64_t k_default_checkpoint_grace_s = 30;
inline constexpr std::int64_t k_max_checkpoint_grace_s = 600;
struct Checkpoint {
    std::int64_t every_s = 0;
    std::int64_t grace_s = 0; // 0 without checkpoints; k_default_checkpoint_grace_s when not written
    bool operator==(const Checkpoint&) const = default;
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Where a recipe from a shared recipe repository came from (docs/recipes.md, "Sharing recipes"),
// kept in every job it made so that a result can be traced to the exact text behind it.
struct Origin {
    std::string recipe;   // its name in the repository (its folder's name)
    std::string repo;     // the repository as configured: a URL or a path, without the revision
    std::string revision; // the commit that was checked out; empty for a folder that is not a clone
    bool operator==(const Origin&) const = default;
};
inline constexpr std::size_t k_max_origins = 9; // the recipe itself and an `extends` chain of 8

// `[verify]`: how a spot check (docs/evidence.md) compares this job's result with the same job run
// again on another owner's worker. `exact`: the exit status and the outputs' SHA-256 (of `files`, or
// of the whole tree); `json`: the exit status and the JSON files among the outputs (`files`, or every
// `*.json`), numbers equal within `tolerance` (|a - b| <= tolerance x max(1, |a|, |b|)), the rest of
// the outputs ignored; `none`: the job is never checked.
enum class CompareMode : std::uint8_t { exact, json, none };
const char* to_string(CompareMode m);
std::optional<CompareMode> compare_mode_from_string(std::string_view s);
inline constexpr double k_max_verify_tolerance = 1.0;
inline constexpr std::size_t k_max_verify_files = 32;

struct Verify {
    CompareMode compare = CompareMode::exact;
    double tolerance = 0.0;         // json only
    std::vector<std::string> files; // output paths compared (fnmatch patterns); empty: see above
    bool operator==(const Verify&) const = default;
};

// One job: everything a worker needs to run it (minus ids the coordinator assigns).
struct JobSpec {
    std::string name;
    std::string image;
    std::vector<std::string> command; // argv; when `shell` is true, one string run by /bin/sh -c
    bool shell = false;
    EnvList env;
    Resources resources;
    Inputs inputs;
    Outputs outputs;
    Logs logs;
    std::vector<std::string> cache_models;
    resources::ModelUse model_use; // `[cache]` dtype, max_tokens, batch: how the job sizes its GPU memory
    Retry retry;
    Checkpoint checkpoint;
    Verify verify;
    Priority priority = Priority::normal;
    EnvList params;                    // the sweep point (empty without a sweep)
    std::int64_t sweep_index = 0;      // position in the sweep, 0-based
    // The shared-repository recipes it came from: the recipe itself first when it was named rather
    // than read from a file, then each repository recipe it extends, nearest first. Empty for a
    // recipe from a local file that extends only built-ins or files.
    std::vector<Origin> origins;
    // The SHA-256 (lowercase hex) of the recipe file's text as the client read it, for the job's
    // manifest (docs/evidence.md); empty when the client did not say.
    std::string recipe_sha256;

    // argv as the runtime executes it.
    std::vector<std::string> argv() const;
    bool operator==(const JobSpec&) const = default;
};

struct SweepParam {
    std::string name;
    std::vector<std::string> values; // as text (a number as the recipe spells it: `1.0`, `1e-3`), in the order written
};

struct Sweep {
    std::vector<SweepParam> params; // in the order written in the file
    std::int64_t max_parallel = 0;  // 0 = no limit
    std::uint64_t job_count() const; // product of the value counts (1 without a sweep)
};

struct Recipe {
    std::string source;               // file the recipe came from ("builtin:NAME" for built-ins)
    std::vector<std::string> extends; // the chain of recipes it extends, nearest first
    std::vector<std::string> tags;    // `tags`: for finding it in a recipe repository; no effect on jobs
    JobSpec base;                     // placeholders not yet substituted
    Sweep sweep;
};

} // namespace gpupool::recipe
