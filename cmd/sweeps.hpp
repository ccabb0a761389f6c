// Commands that act on many jobs at once (`--sweep ID` on wait, fetch and logs; `run`'s outputs):
// the jobs of a sweep, a folder name per job, and following several jobs' logs together.
#pragma once

#include "cmd/cli.hpp"
#include "core/client/api_client.hpp"
#include "core/util/ids.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::cmd {

struct NamedJob {
    JobId id{};
    std::string name{};
    std::int64_t sweep_index = 0;
};

// A folder name for each job's outputs: its name with every character outside [A-Za-z0-9._-]
// made `_` ("job" if nothing is left), and `-INDEX` (its sweep index) when the name repeats.
std::vector<std::string> folder_names(const std::vector<NamedJob>& jobs);

// The jobs of sweep `sweep`, oldest first, with their names and sweep indexes; an Error when the
// sweep has none the token can see.
Result<std::vector<NamedJob>> sweep_jobs(client::ApiClient& api, SweepId sweep);

// The jobs named by ids (their details fetched) or by --sweep (> 0), as the command line gave
// them; exactly one of the two is given.
Result<std::vector<NamedJob>> chosen_jobs(client::ApiClient& api, const std::vector<std::int64_t>& ids,
                                          std::int64_t sweep);

// Follows the logs of several jobs at once until all of them end, each line prefixed with the
// job's folder name ("eval-n0 | ..."), and a closing line per job. Exit 0 only if all succeeded.
int follow_logs(const GlobalOptions& global, client::ApiClient& api, const std::vector<NamedJob>& jobs, bool raw);

} // namespace gpupool::cmd
