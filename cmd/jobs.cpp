#include "cmd/jobs.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/credits/money.hpp"
#include "core/net/url.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

int run_jobs(const JobsOptions& o) {
    const GlobalOptions& global = o.global;
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    std::string path = "/v1/jobs";
    std::string sep = "?";
    if (!o.state.empty()) {
        path += sep + "state=" + o.state;
        sep = "&";
    }
    if (o.sweep > 0) {
        path += sep + "sweep=" + std::to_string(o.sweep);
        sep = "&";
    }
    if (o.limit > 0) {
        path += sep + "limit=" + std::to_string(o.limit);
        sep = "&";
    }
    if (o.all_teams) {
        path += sep + "all_teams=1";
        sep = "&";
    }
    if (!o.by.empty()) {
        path += sep + "submitter=" + net::percent_encode(o.by);
        sep = "&";
    }
    if (o.mine) {
        path += sep + "mine=1";
    }
    auto r = api->get(path);
    if (!r) {
        report_error(global, r.error());
        return k_exit_failed;
    }
    if (global.json) {
        // The whole answer: `jobs` and `more` (older jobs match too).
        std::cout << nlohmann::json{{"jobs", (*r)["jobs"]}, {"more", r->value("more", false)}}.dump(2) << '\n';
        return k_exit_ok;
    }
    const nlohmann::json& jobs = (*r)["jobs"];
    std::vector<std::string> header{"ID", "SWEEP", "NAME", "BY", "STATE", "ATTEMPTS", "EXIT", "CREDITS", "REASON"};
    if (o.all_teams) {
        header.insert(header.begin() + 2, "TEAM");
    }
    std::vector<std::vector<std::string>> rows{header};
    for (const auto& j : jobs) {
        std::vector<std::string> row{std::to_string(j["id"].get<std::int64_t>()),
                                     std::to_string(j["sweep_id"].get<std::int64_t>()),
                                     j["name"].get<std::string>(),
                                     j.value("submitted_by", std::string("-")),
                                     j["state"].get<std::string>(),
                                     std::to_string(j["attempts"].get<std::int64_t>()),
                                     j["exit_code"].is_null() ? "-" : std::to_string(j["exit_code"].get<std::int64_t>()),
                                     credits::format_credits(j.value("cost_micro", std::int64_t{0})),
                                     j["reason"].get<std::string>()};
        if (o.all_teams) {
            row.insert(row.begin() + 2, j.value("team_name", std::to_string(j["team"].get<std::int64_t>())));
        }
        rows.push_back(std::move(row));
    }
    print_table(rows);
    if (r->value("more", false)) {
        std::cout << "(the " << jobs.size() << " newest shown; --limit N for more, --limit 0 for all)\n";
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
