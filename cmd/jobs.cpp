#include "cmd/jobs.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/client/jobs_client.hpp"
#include "core/credits/money.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

int run_jobs(const JobsOptions& o) {
    const GlobalOptions& global = o.global;
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    client::JobsQuery query;
    query.state = o.state;
    query.sweep = SweepId(o.sweep);
    query.limit = o.limit;
    query.all_teams = o.all_teams;
    query.submitted_by = o.by;
    query.mine = o.mine;
    auto r = client::JobsClient(*api).jobs(query);
    if (!r) {
        report_error(global, r.error());
        return k_exit_failed;
    }
    if (global.json) {
        // The whole answer: `jobs` and `more` (older jobs match too).
        std::cout << wire::to_json(*r).dump(2) << '\n';
        return k_exit_ok;
    }
    std::vector<std::string> header{"ID", "SWEEP", "NAME", "BY", "STATE", "ATTEMPTS", "EXIT", "CREDITS", "REASON"};
    if (o.all_teams) {
        header.insert(header.begin() + 2, "TEAM");
    }
    std::vector<std::vector<std::string>> rows{header};
    for (const auto& j : r->jobs) {
        std::vector<std::string> row{
            std::to_string(j.id.value()), std::to_string(j.sweep_id.value()), j.name, j.submitted_by.value_or("-"),
            j.state, std::to_string(j.attempts), j.exit_code ? std::to_string(*j.exit_code) : "-",
            credits::format_credits(j.cost_micro),
            // The pool's spot check of one of the team's results (docs/evidence.md).
            j.check_of ? "spot check of attempt " + std::to_string(*j.check_of) + ": " + j.reason : j.reason};
        if (o.all_teams) {
            row.insert(row.begin() + 2, j.team_name.value_or(std::to_string(j.team.value())));
        }
        rows.push_back(std::move(row));
    }
    print_table(rows);
    if (r->more) {
        std::cout << "(the " << r->jobs.size() << " newest shown; --limit N for more, --limit 0 for all)\n";
    }
    return k_exit_ok;
}

void register_jobs(Cli& cli) {
    auto o = std::make_shared<JobsOptions>();
    CLI::App* sub = add_command(cli, "jobs", "List your team's jobs");
    add_help_footer(sub, "gpupool jobs --state running\ngpupool jobs --sweep 4 --limit 0\ngpupool jobs --mine",
                    "README.md (Client commands)", Reach::coordinator);
    sub->add_option("--state", o->state, "Only jobs in this state")
        ->check(CLI::IsMember({"queued", "assigned", "running", "succeeded", "failed", "cancelled"}));
    sub->add_option("--sweep", o->sweep, "Only the jobs of this sweep")->check(CLI::PositiveNumber);
    sub->add_option("--limit", o->limit, "Show the N newest (0: all)")->capture_default_str()->check(CLI::NonNegativeNumber);
    sub->add_flag("--all-teams", o->all_teams, "Jobs of every team (admins)");
    sub->add_option("--by", o->by, "Only jobs submitted with tokens of this label (the BY column)");
    sub->add_flag("--mine", o->mine, "Only jobs submitted with the token in use");
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_jobs(*o);
    });
}

} // namespace gpupool::cmd
