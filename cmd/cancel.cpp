#include "cmd/cancel.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"

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
    int rc = k_exit_ok;
    if (o.sweep != 0) {
        auto r = api->post("/v1/sweeps/" + std::to_string(o.sweep) + "/cancel", nlohmann::json::object());
        if (!r) {
            report_error(global, r.error());
            return k_exit_failed;
        }
        std::cout << (global.json ? r->dump() : "cancelled " + std::to_string((*r)["cancelled"].get<std::int64_t>()) +
                                                    " jobs of sweep " + std::to_string(o.sweep))
                  << '\n';
        return rc;
    }
    for (auto id : o.jobs) {
        auto r = api->post("/v1/jobs/" + std::to_string(id) + "/cancel", nlohmann::json::object());
        if (!r) {
            report_error(global, r.error());
            rc = k_exit_failed;
            continue;
        }
        std::cout << (global.json ? r->dump() : "cancelled job " + std::to_string(id)) << '\n';
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
