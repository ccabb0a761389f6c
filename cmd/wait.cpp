#include "cmd/wait.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "cmd/sweeps.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

int run_wait(const WaitOptions& o) {
    const GlobalOptions& global = o.global;
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    auto chosen = chosen_jobs(*api, o.ids, o.sweep);
    if (!chosen) {
        report_error(global, chosen.error());
        return chosen.error().code == ErrorCode::invalid_input ? k_exit_usage : k_exit_failed;
    }
    std::vector<JobId> ids;
    for (const auto& j : *chosen) {
        ids.push_back(j.id);
    }
    // The lines need only each job's state (and its name, known already); --json prints the whole jobs.
    auto done = wait_for_jobs(global, *api, ids, !global.json);
    if (!done) {
        return k_exit_failed;
    }
    const int failed = count_unsuccessful(*done);
    if (global.json) {
        std::cout << jobs_json(*done).dump(2) << '\n';
    } else {
        std::vector<std::string> names;
        for (std::size_t i = 0; i < done->size(); ++i) {
            const auto& j = (*done)[i];
            names.push_back(j.name.empty() && i < chosen->size() ? (*chosen)[i].name : j.name);
            std::cout << "job " << j.id.value() << " " << printable(names.back()) << ": " << printable(j.state) << '\n';
        }
        // Then the jobs that did not succeed by name, with how they ended: not lost among the rest.
        print_outcome(*api, *done, names);
    }
    return failed == 0 ? k_exit_ok : k_exit_failed;
}

void register_wait(Cli& cli) {
    auto o = std::make_shared<WaitOptions>();
    CLI::App* sub = add_command(cli, "wait", "Wait until jobs finish; exit 1 if any did not succeed");
    sub->add_option("jobs", o->ids, "Job ids");
    sub->add_option("--sweep", o->sweep, "Every job of this sweep (the id `submit` printed)")->check(CLI::PositiveNumber);
    add_help_footer(sub, "gpupool wait 12 13\ngpupool wait --sweep 4 && gpupool fetch --sweep 4 results/",
                    "README.md (Client commands)", Reach::coordinator);
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_wait(*o);
    });
}

} // namespace gpupool::cmd
