// Commands that act on many jobs at once (`--sweep ID` on wait, fetch and logs; `run`'s outputs):
// the jobs of a sweep, a folder name per job, and following several jobs' logs together.
#pragma once

#include "cmd/cli.hpp"
#include "core/api/jobs.hpp"
#include "core/client/api_client.hpp"
#include "core/util/ids.hpp"

#include <cstdint>
#include <optional>
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
// The same for a command that goes on afterwards (`submit --follow`): whether every job succeeded,
// or nullopt when the coordinator could not be read (the problem is already printed).
std::optional<bool> follow_logs_to_end(const GlobalOptions& global, client::ApiClient& api,
                                       const std::vector<NamedJob>& jobs, bool raw);

// How many of the jobs that did not succeed print_outcome names, one line each.
inline constexpr std::size_t k_unsuccessful_named = 20;

// The end of `wait` and `submit --wait/--follow` on stdout: "N succeeded, M did not" and, when M > 0,
// a line per job that did not (`  job 13 bad: failed (exit 3): REASON`; the first
// k_unsuccessful_named, then how many more). A job given without its name and reason (a wait answer
// has only states) is read whole for them; `names[i]`, when given, names jobs[i] if it cannot be.
void print_outcome(client::ApiClient& api, const std::vector<gpupool::api::JobView>& jobs,
                   const std::vector<std::string>& names = {});

} // namespace gpupool::cmd
