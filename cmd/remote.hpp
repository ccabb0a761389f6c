// Shared by the subcommands that talk to a coordinator: building the client from the config and
// small printing helpers.
#pragma once

#include "cmd/cli.hpp"
#include "core/api/jobs.hpp"
#include "core/client/api_client.hpp"
#include "core/config/client_config.hpp"
#include "core/recipe/recipe.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::cmd {

// The wire types (core/api/) by another name: the commands call their ApiClient `api`.
namespace wire = gpupool::api;

// The config overrides the global flags (--config, --url, --token, --ca-cert) make.
config::ClientOverrides overrides(const GlobalOptions& global);

// The API client for the configured coordinator, or nothing (the problem is already printed).
std::optional<client::ApiClient> connect(const GlobalOptions& global);

// Text that came from the coordinator or a worker (names, reasons, notes, messages), made safe to
// print on a terminal: control characters become visible escapes (util::escape_control). A JSON
// value that is not a string is printed as JSON. --json output needs none of this (the encoder
// escapes).
std::string printable(std::string_view text);
std::string printable(const std::string& text);
std::string printable(const nlohmann::json& value);

// Prints rows as aligned columns; the first row is the header. Every cell goes through printable().
void print_table(const std::vector<std::vector<std::string>>& rows);

// "2026-11-30 03:41:34" in UTC from Unix milliseconds; "-" for null (or nullopt).
std::string format_time(const nlohmann::json& ms);
std::string format_time(std::int64_t ms);
std::string format_time(const std::optional<std::int64_t>& ms);

// Polls until every job is finished; prints progress unless --json. Returns the final jobs: whole
// (one GET per job), or with `states_only` just their id, state and exit code as the coordinator's
// last wait answer gave them (no request per job: a 1,000-job sweep ends without 1,000 more).
std::optional<std::vector<wire::JobView>> wait_for_jobs(const GlobalOptions& global, client::ApiClient& api,
                                                       const std::vector<JobId>& ids, bool states_only = false);
// The jobs as a JSON array (their wire form), for --json.
nlohmann::json jobs_json(const std::vector<wire::JobView>& jobs);

// Streams a job's logs to stdout from `offset` until the attempt finishes (follow) or once. The job's
// bytes are printed as they are with `raw` or when stdout is not a terminal; on a terminal they go
// through log_text_for_terminal.
int stream_logs(const GlobalOptions& global, client::ApiClient& api, JobId job, bool follow, bool raw = false);

// What a job's log bytes look like on a terminal: its lines and tabs kept, every other control
// character (a terminal escape, a carriage return that would overwrite a line) made visible.
std::string log_text_for_terminal(std::string_view data);

bool is_terminal_state(const std::string& state);

// Packs each distinct set of the jobs' local inputs into one archive, uploads it (PUT
// /v1/inputs/{sha256}; already-stored archives cost one small request) and records its digest in
// the jobs (inputs.archive). Jobs without inputs are left alone.
// `team`: the team the inputs are for, when an admin submits for one (members upload for their own).
// `progress` (when set) gets a line as each archive is packed, uploaded and stored.
Status ship_inputs(client::ApiClient& api, std::vector<recipe::JobSpec>& jobs, const std::string& team = {},
                   const std::function<void(const std::string&)>& progress = {});

// How many of the finished jobs did not succeed.
int count_unsuccessful(const std::vector<wire::JobView>& jobs);

} // namespace gpupool::cmd
