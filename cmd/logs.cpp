#include "cmd/logs.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/client/jobs_client.hpp"
#include "cmd/sweeps.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace {

// The logs of every job of a sweep: one after another (each under a header), or followed together.
int sweep_logs(const GlobalOptions& global, client::ApiClient& api, const LogsOptions& o) {
    auto jobs = sweep_jobs(api, SweepId(o.sweep));
    if (!jobs) {
        report_error(global, jobs.error());
        return k_exit_failed;
    }
    if (o.follow) {
        return follow_logs(global, api, *jobs, o.raw);
    }
    for (const auto& j : *jobs) {
        std::cout << "==> " << printable(j.name) << " (job " << j.id.value() << ") <==" << std::endl;
        if (const int rc = stream_logs(global, api, j.id, false, o.raw); rc != k_exit_ok) {
            return rc;
        }
    }
    return k_exit_ok;
}

} // namespace

int run_logs(const LogsOptions& o) {
    const GlobalOptions& global = o.global;
    if ((o.job > 0) == (o.sweep > 0)) {
        report_error(global, make_error(ErrorCode::invalid_input, "name one job (its id) or a sweep (--sweep ID)", "job"));
        return k_exit_usage;
    }
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    if (o.sweep > 0) {
        return sweep_logs(global, *api, o);
    }
    const JobId job(o.job);
    const int rc = stream_logs(global, *api, job, o.follow, o.raw);
    if (rc != k_exit_ok || !o.follow) {
        return rc;
    }
    // Followed to the end: say how the job ended, and exit with its outcome.
    auto j = client::JobsClient(*api).job(job);
    if (!j) {
        report_error(global, j.error());
        return k_exit_failed;
    }
    std::cerr << "-- job " << o.job << " " << printable(j->state)
              << (j->exit_code ? " (exit " + std::to_string(*j->exit_code) + ")" : std::string())
              << (j->reason.empty() ? "" : ": " + printable(j->reason)) << " --" << std::endl;
    return j->state == "succeeded" ? k_exit_ok : k_exit_failed;
}

void register_logs(Cli& cli) {
    auto o = std::make_shared<LogsOptions>();
    CLI::App* sub = add_command(cli, "logs", "Print a job's logs (its latest attempt), or a sweep's; -f follows them");
    sub->add_option("job", o->job, "Job id")->check(CLI::PositiveNumber);
    sub->add_option("--sweep", o->sweep,
                    "Every job of this sweep: one after another, or with -f all together, each line prefixed with "
                    "the job's name")
        ->check(CLI::PositiveNumber);
    sub->add_flag("--follow,-f", o->follow,
                  "Keep printing until the job ends (a queued job: say why it waits, and wait); then print how it "
                  "ended and exit 0 only if it succeeded");
    sub->add_flag("--raw", o->raw,
                  "The job's bytes exactly as it wrote them, even on a terminal (where control characters "
                  "are otherwise shown escaped)");
    add_help_footer(sub, "gpupool logs -f 12\ngpupool logs --sweep 4 -f          # every job of sweep 4, each line "
                         "under its name",
                    "README.md (Client commands)", Reach::coordinator);
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_logs(*o);
    });
}

} // namespace gpupool::cmd
