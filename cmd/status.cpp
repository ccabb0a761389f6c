#include "cmd/status.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/client/jobs_client.hpp"
#include "core/credits/money.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace {

void print_attempts(const std::vector<wire::AttemptView>& attempts) {
    std::vector<std::vector<std::string>> rows{{"ATTEMPT", "WORKER", "GPU", "STATE", "STARTED", "ENDED", "EXIT", "CREDITS", "REASON"}};
    for (const auto& a : attempts) {
        rows.push_back({std::to_string(a.id.value()), std::to_string(a.worker.value()),
                        a.gpu_index < 0 ? "-" : std::to_string(a.gpu_index),
                        a.state + (a.voided_at ? " (voided)" : "") + (a.unconfirmed ? " (unconfirmed)" : "") +
                            (a.retry > 0 ? " (retry " + std::to_string(a.retry) + ")" : ""),
                        format_time(a.started_at), format_time(a.ended_at),
                        a.exit_code ? std::to_string(*a.exit_code) : "-", credits::format_credits(a.cost_micro),
                        a.reason});
    }
    print_table(rows);
}

} // namespace

int run_status(const StatusOptions& o) {
    const GlobalOptions& global = o.global;
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    auto j = client::JobsClient(*api).job(JobId(o.job));
    if (!j) {
        report_error(global, j.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << wire::to_json(*j).dump(2) << '\n';
        return k_exit_ok;
    }
    const wire::JobView& v = *j;
    std::cout << "job " << v.id.value() << " `" << printable(v.name) << "` (sweep " << v.sweep_id.value()
              << "): " << printable(v.state) << '\n';
    if (v.state == "queued") {
        std::cout << "  waiting: " << printable(v.waiting_reason) << '\n';
    } else if (!v.reason.empty()) {
        std::cout << "  " << printable(v.reason) << '\n';
    }
    if (v.exit_code) {
        std::cout << "  exit code " << *v.exit_code << '\n';
    }
    for (const auto& a : v.attempt_history) {
        if (a.unconfirmed) {
            std::cout << "  attempt " << a.id.value()
                      << " is unconfirmed: the pool was restored from a backup and worker " << a.worker.value()
                      << " has not reported since (it may have ended, or not run)\n";
        }
    }
    if (v.retries > 0) {
        std::cout << "  retried " << v.retries << (v.retries == 1 ? " time" : " times")
                  << " (`gpupool retry`): the attempts marked (retry N) are those of its Nth retry\n";
    }
    std::cout << "  submitted " << format_time(v.created_at) << " UTC";
    if (v.finished_at) {
        std::cout << ", finished " << format_time(v.finished_at) << " UTC";
    }
    std::cout << '\n';
    if (v.cost_micro) {
        std::cout << "  credits: " << credits::format_credits(*v.cost_micro) << " charged";
        if (v.held_micro > 0) {
            std::cout << ", " << credits::format_credits(v.held_micro) << " held in escrow";
        }
        std::cout << '\n';
    }
    if (!v.attempt_history.empty()) {
        print_attempts(v.attempt_history);
        // What exactly ran, for a result to publish (docs/evidence.md).
        std::cout << "  manifest: `gpupool manifest " << v.id.value() << "` (image digest, GPU, driver, models, "
                  << "outputs' SHA-256)\n";
    }
    return k_exit_ok;
}

void register_status(Cli& cli) {
    auto o = std::make_shared<StatusOptions>();
    CLI::App* sub = add_command(cli, "status", "Show a job's state, attempts and why it is waiting");
    add_help_footer(sub, "gpupool status 12\ngpupool --json status 12", "README.md (Client commands)", Reach::coordinator);
    sub->add_option("job", o->job, "Job id")->required();
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_status(*o);
    });
}

} // namespace gpupool::cmd
