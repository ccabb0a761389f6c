// The command-line shell around the libraries: CLI11 wiring, output and exit codes.
//
// Each subcommand lives in its own file with a `register_<name>(Cli&)` that declares its options
// and a `run_<name>(...)` that does the work and returns the exit code, so `run_*` is callable
// without argv. Only this layer turns Errors into messages and exit codes:
//   0 success, 1 the operation failed (bad recipe, failed job, server error),
//   2 usage error.
#pragma once

#include "core/util/result.hpp"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>

namespace gpupool::cmd {

inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_failed = 1;
inline constexpr int k_exit_usage = 2;

struct GlobalOptions {
    bool json = false;
    std::string log_level = "warn";
    std::optional<std::string> config_file;
    std::optional<std::string> url;
    std::optional<std::string> token;
    std::optional<std::string> token_file;
    std::optional<std::string> ca_cert;
};

// The parsed command line; defined in cmd/cli_app.hpp (which pulls in CLI11) so that files that
// only register a pending subcommand stay cheap to compile.
struct Cli;


// Where the worker and the local mode keep their state: $XDG_DATA_HOME/gpupool, else
// ~/.local/share/gpupool.
std::string default_data_dir();

// Prints an Error (all of its problems) to stderr, or as JSON on stdout with --json.
void report_error(const GlobalOptions& global, const Error& error);
// One problem as report_error's JSON has it ({"code", "message", "field"?, "file"?, ...}): for a
// command whose --json document says what failed inside itself (stdout holds one document).
nlohmann::ordered_json error_json(const Error& e);

void register_coordinator(Cli& cli);
void register_worker(Cli& cli);
void register_submit(Cli& cli);
void register_run(Cli& cli);
void register_status(Cli& cli);
void register_pool(Cli& cli);
void register_jobs(Cli& cli);
void register_logs(Cli& cli);
void register_cancel(Cli& cli);
void register_retry(Cli& cli);
void register_fetch(Cli& cli);
void register_manifest(Cli& cli); // manifest, diff and repro
void register_wait(Cli& cli);
void register_credits(Cli& cli);
void register_price(Cli& cli);
void register_model_memory(Cli& cli);
void register_recipe(Cli& cli);
void register_admin(Cli& cli);
void register_sim(Cli& cli);
void register_login(Cli& cli);
void register_template(Cli& cli);
void register_version(Cli& cli);

// Entry point: parses argv, runs the chosen subcommand, returns the exit code.
int main(int argc, char** argv);

} // namespace gpupool::cmd
