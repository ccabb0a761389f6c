#include "cmd/cancel.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/client/jobs_client.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

int run_cancel(const CancelOptions& o) {
    const GlobalOptions& global = o.global;
    if (o.jobs.empty() == (o.sweep == 0)) {
        report_error(global,
                     make_error(ErrorCode::invalid_input,
                                o.jobs.empty() ? "cancel what? name job ids (`gpupool cancel 12 13`) or a sweep "
                                                 "(`gpupool cancel --sweep 4`); `gpupool jobs` lists them"
                                               : "name job ids or --sweep ID, not both",
                                o.jobs.empty() ? "jobs" : "--sweep"));
        return k_exit_usage;
    }
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    client::JobsClient pool(*api);
    if (o.sweep != 0) {
        auto r = pool.cancel_sweep(SweepId(o.sweep));
        if (!r) {
            report_error(global, r.error());
            return k_exit_failed;
        }
        std::cout << (global.json ? wire::to_json(*r).dump()
                                  : "cancelled " + std::to_string(r->cancelled) + " jobs of sweep " + std::to_string(o.sweep))
                  << '\n';
        return k_exit_ok;
    }
    int rc = k_exit_ok;
    for (auto id : o.jobs) {
        auto r = pool.cancel_job(JobId(id));
        if (!r) {
            report_error(global, r.error());
            rc = k_exit_failed;
            continue;
        }
        std::cout << (global.json ? wire::to_json(*r).dump() : "cancelled job " + std::to_string(id)) << '\n';
    }
    return rc;
}

void register_cancel(Cli& cli) {
    auto o = std::make_shared<CancelOptions>();
    CLI::App* sub = add_command(cli, "cancel", "Cancel jobs, or a whole sweep");
    add_help_footer(sub, "gpupool cancel 12 13\ngpupool cancel --sweep 4", "README.md (Client commands)",
                    Reach::coordinator);
    sub->add_option("jobs", o->jobs, "Job ids");
    sub->add_option("--sweep", o->sweep, "Cancel every unfinished job of this sweep");
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_cancel(*o);
    });
}

} // namespace gpupool::cmd
