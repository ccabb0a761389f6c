#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace {

using json = nlohmann::json;

// Runs one admin request and prints the answer with `human` (or the JSON with --json).
int admin_call(const GlobalOptions& global, const std::string& method, const std::string& path, const json& body,
               const std::function<void(const json&)>& human) {
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    Result<json> r = method == "GET" ? api->get(path) : method == "DELETE" ? api->del(path) : api->post(path, body);
    if (!r) {
        report_error(global, r.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << r->dump(2) << '\n';
    } else {
        human(*r);
    }
    return k_exit_ok;
}

void print_token(const json& t) {
    std::cout << t["role"].get<std::string>() << " token " << t["id"] << (t["team"].get<std::string>().empty() ? "" : " for team " + t["team"].get<std::string>())
              << " (shown once):\n" << t["token"].get<std::string>() << '\n';
}

} // namespace

void register_admin(Cli& cli) {
    CLI::App* admin = add_command(cli, "admin", "Administer the pool: teams, tokens, workers (admin token)");
    admin->require_subcommand(1);

    struct TeamArgs {
        std::string name;
        std::int64_t weight = 1;
    };
    auto team = std::make_shared<TeamArgs>();
    CLI::App* team_cmd = admin->add_subcommand("team", "Teams")->require_subcommand(1);
    CLI::App* team_create = team_cmd->add_subcommand("create", "Create a team");
    team_create->add_option("name", team->name, "Team name")->required();
    team_create->add_option("--weight", team->weight, "Fair-share weight")->capture_default_str();
    team_create->callback([&cli, team] {
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/teams", {{"name", team->name}, {"weight", team->weight}},
                                   [](const json& t) { std::cout << "created team " << t["name"].get<std::string>() << " (id " << t["id"] << ")\n"; });
    });
    CLI::App* team_list = team_cmd->add_subcommand("list", "List teams");
    team_list->callback([&cli] {
        cli.exit_code = admin_call(cli.global, "GET", "/v1/admin/teams", {}, [](const json& r) {
            std::vector<std::vector<std::string>> rows{{"ID", "NAME", "WEIGHT"}};
            for (const auto& t : r["teams"]) {
                rows.push_back({std::to_string(t["id"].get<std::int64_t>()), t["name"].get<std::string>(),
                                std::to_string(t["weight"].get<std::int64_t>())});
            }
            print_table(rows);
        });
    });

    struct TokenArgs {
        std::string role = "member";
        std::string team;
        std::string label;
        std::int64_t id = 0;
    };
    auto tok = std::make_shared<TokenArgs>();
    CLI::App* token_cmd = admin->add_subcommand("token", "API tokens")->require_subcommand(1);
    CLI::App* token_create = token_cmd->add_subcommand("create", "Create a token (its secret is shown once)");
    token_create->add_option("--role", tok->role, "member, admin or enroll")
        ->check(CLI::IsMember({"member", "admin", "enroll"}))
        ->capture_default_str();
    token_create->add_option("--team", tok->team, "Team (member and enroll tokens)");
    token_create->add_option("--label", tok->label, "A note to recognise it by");
    token_create->callback([&cli, tok] {
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/tokens",
                                   {{"role", tok->role}, {"team", tok->team}, {"label", tok->label}}, print_token);
    });
    CLI::App* token_revoke = token_cmd->add_subcommand("revoke", "Revoke a token by id");
    token_revoke->add_option("id", tok->id, "Token id")->required();
    token_revoke->callback([&cli, tok] {
        cli.exit_code = admin_call(cli.global, "DELETE", "/v1/admin/tokens/" + std::to_string(tok->id), {},
                                   [](const json& r) { std::cout << "revoked token " << r["revoked"] << '\n'; });
    });

    auto enroll_team = std::make_shared<std::string>();
    CLI::App* enroll = admin->add_subcommand("enroll", "Create an enrollment token: a GPU owner's worker registers with it");
    enroll->add_option("team", *enroll_team, "The owner's team (credited for the GPU time)")->required();
    enroll->callback([&cli, enroll_team] {
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/tokens",
                                   {{"role", "enroll"}, {"team", *enroll_team}, {"label", "enrollment"}}, print_token);
    });

    CLI::App* workers = admin->add_subcommand("workers", "List workers");
    workers->callback([&cli] {
        cli.exit_code = admin_call(cli.global, "GET", "/v1/workers", {}, [](const json& r) {
            std::vector<std::vector<std::string>> rows{{"ID", "TEAM", "NAME", "STATE", "GPUS", "LAST SEEN (UTC)"}};
            for (const auto& w : r["workers"]) {
                std::string gpus;
                if (w["inventory"].is_object() && w["inventory"].contains("gpus")) {
                    for (const auto& g : w["inventory"]["gpus"]) {
                        gpus += (gpus.empty() ? "" : ",") + g.value("model", std::string("?"));
                    }
                }
                rows.push_back({std::to_string(w["id"].get<std::int64_t>()), std::to_string(w["team"].get<std::int64_t>()),
                                w["name"].get<std::string>(), w["state"].get<std::string>(), gpus.empty() ? "-" : gpus,
                                format_time(w["last_seen_at"])});
            }
            print_table(rows);
        });
    });
    auto worker_id = std::make_shared<std::int64_t>(0);
    for (const char* verb : {"drain", "ban", "activate"}) {
        CLI::App* c = admin->add_subcommand(verb, std::string(verb) + " a worker");
        c->add_option("worker", *worker_id, "Worker id")->required();
        std::string v = verb;
        c->callback([&cli, worker_id, v] {
            cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/workers/" + std::to_string(*worker_id) + "/" + v,
                                       json::object(), [](const json& r) {
                                           std::cout << "worker " << r["worker"] << " is now "
                                                     << r["state"].get<std::string>() << '\n';
                                       });
        });
    }
    for (CLI::App* c : admin->get_subcommands({})) {
        c->fallthrough();
        for (CLI::App* cc : c->get_subcommands({})) {
            cc->fallthrough();
        }
    }
}

} // namespace gpupool::cmd
