#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

struct LogsOptions {
    std::int64_t job = 0;
    bool follow = false;
    bool raw = false;
};

int run_logs(const GlobalOptions& global, const LogsOptions& o) {
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    const int rc = stream_logs(global, *api, o.job, o.follow, o.raw);
    if (rc != k_exit_ok || !o.follow) {
        return rc;
    }
    // Followed to the end: say how the job ended, and exit with its outcome.
    auto j = api->get("/v1/jobs/" + std::to_string(o.job));
    if (!j) {
        report_error(global, j.error());
        return k_exit_failed;
    }
    const std::string state = j->value("state", std::string());
    std::cerr << "-- job " << o.job << " " << printable(state)
              << ((*j)["exit_code"].is_number_integer() ? " (exit " + std::to_string((*j)["exit_code"].get<std::int64_t>()) + ")"
                                                         : std::string())
              << (j->value("reason", std::string()).empty() ? "" : ": " + printable(j->value("reason", std::string())))
              << " --" << std::endl;
    return state == "succeeded" ? k_exit_ok : k_exit_failed;
}

void register_logs(Cli& cli) {
    auto o = std::make_shared<LogsOptions>();
    CLI::App* sub = add_command(cli, "logs", "Print a job's logs (its latest attempt); -f follows them");
    sub->add_option("job", o->job, "Job id")->required();
    sub->add_flag("--follow,-f", o->follow,
                  "Keep printing until the job ends (a queued job: say why it waits, and wait); then print how it "
                  "ended and exit 0 only if it succeeded");
    sub->add_flag("--raw", o->raw,
                  "The job's bytes exactly as it wrote them, even on a terminal (where control characters "
                  "are otherwise shown escaped)");
    sub->callback([&cli, o] { cli.exit_code = run_logs(cli.global, *o); });
}

} // namespace gpupool::cmd
