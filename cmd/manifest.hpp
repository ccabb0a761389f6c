// `gpupool manifest JOB`, `gpupool diff JOB JOB` and `gpupool repro JOB` (docs/evidence.md): what
// exactly ran for a result, what differs between two results, and the same job again pinned to
// what ran. The run_* functions do the work for parsed options (tests call them without argv);
// the register_* ones (cli.hpp) wire them to the command line.
#pragma once

#include "cmd/cli.hpp"
#include "core/recipe/recipe.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::cmd {

struct ManifestOptions {
    GlobalOptions global{};
    std::int64_t job = 0;
    std::int64_t attempt = 0; // 0: the job's latest
};
int run_manifest(const ManifestOptions& options);

struct DiffOptions {
    GlobalOptions global{};
    std::vector<std::int64_t> jobs{}; // two
};
// Exit 0 when nothing differs, 1 when something does (as diff(1)), 2 on a usage error.
int run_diff(const DiffOptions& options);

struct ReproOptions {
    GlobalOptions global{};
    std::int64_t job = 0;
    bool allow_unpinned = false; // submit even when the image's digest or a model's revision is not known
    bool dry_run = false;
};
int run_repro(const ReproOptions& options);

// The job's spec (as `GET /v1/jobs/{id}` gives it) pinned to its manifest: the image to the digest
// its worker resolved, each cached model to the revision it mounted. Fails (invalid_input) when one
// is not known, unless `allow_unpinned`; `notes` says what was pinned and what was not.
Result<recipe::JobSpec> pinned_spec(recipe::JobSpec spec, const nlohmann::json& manifest, bool allow_unpinned,
                                    std::vector<std::string>& notes);

} // namespace gpupool::cmd
