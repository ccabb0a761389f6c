#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

struct JobsOptions {
    std::string state;
    bool all_teams = false;
};

int run_jobs(const GlobalOptions& global, const JobsOptions& o) {
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
    if (o.all_teams) {
        path += sep + "all_teams=1";
    }
    auto r = api->get(path);
    if (!r) {
        report_error(global, r.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << (*r)["jobs"].dump(2) << '\n';
        return k_exit_ok;
    }
    std::vector<std::vector<std::string>> rows{{"ID", "SWEEP", "NAME", "STATE", "ATTEMPTS", "EXIT", "REASON"}};
    for (const auto& j : (*r)["jobs"]) {
        rows.push_back({std::to_string(j["id"].get<std::int64_t>()), std::to_string(j["sweep_id"].get<std::int64_t>()),
                        j["name"].get<std::string>(), j["state"].get<std::string>(),
                        std::to_string(j["attempts"].get<std::int64_t>()),
                        j["exit_code"].is_null() ? "-" : std::to_string(j["exit_code"].get<std::int64_t>()),
                        j["reason"].get<std::string>()});
    }
    print_table(rows);
    return k_exit_ok;
}

void register_jobs(Cli& cli) {
    auto o = std::make_shared<JobsOptions>();
    CLI::App* sub = add_command(cli, "jobs", "List your team's jobs");
    sub->add_option("--state", o->state, "Only jobs in this state")
        ->check(CLI::IsMember({"queued", "assigned", "running", "succeeded", "failed", "cancelled"}));
    sub->add_flag("--all-teams", o->all_teams, "Jobs of every team (admins)");
    sub->callback([&cli, o] { cli.exit_code = run_jobs(cli.global, *o); });
}

} // namespace gpupool::cmd
