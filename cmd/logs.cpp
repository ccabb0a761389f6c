#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"

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
    return stream_logs(global, *api, o.job, o.follow, o.raw);
}

void register_logs(Cli& cli) {
    auto o = std::make_shared<LogsOptions>();
    CLI::App* sub = add_command(cli, "logs", "Print a job's logs (its latest attempt); -f follows them");
    sub->add_option("job", o->job, "Job id")->required();
    sub->add_flag("--follow,-f", o->follow, "Keep printing until the job ends");
    sub->add_flag("--raw", o->raw,
                  "The job's bytes exactly as it wrote them, even on a terminal (where control characters "
                  "are otherwise shown escaped)");
    sub->callback([&cli, o] { cli.exit_code = run_logs(cli.global, *o); });
}

} // namespace gpupool::cmd
