#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/net/url.hpp"
#include "core/credits/money.hpp"
#include "core/resources/quantity.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <algorithm>
#include <cctype>
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

// What the token is goes to stderr, the secret alone to stdout: `admin enroll TEAM > enroll.token`
// writes a file that `--token-file` reads.
void print_token(const json& t) {
    std::cerr << printable(t["role"]) << " token " << t["id"]
              << (t["team"].get<std::string>().empty() ? "" : " for team " + printable(t["team"])) << " (shown once):"
              << std::endl;
    std::cout << printable(t["token"]) << '\n';
}

// "2026-12-31" (00:00 UTC) or "2026-12-31T18:00:00Z" -> Unix milliseconds.
Result<std::int64_t> parse_date_ms(const std::string& text, const std::string& flag) {
    std::tm tm{};
    int n = 0;
    char z = 0;
    const int got = std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n);
    bool ok = got == 3 && static_cast<std::size_t>(n) == text.size();
    if (!ok && got == 3) {
        int m = 0;
        ok = std::sscanf(text.c_str() + n, "T%2d:%2d:%2d%c%n", &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &z, &m) == 4 &&
             z == 'Z' && static_cast<std::size_t>(n + m) == text.size();
    }
    if (!ok || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31) {
        return make_error(ErrorCode::invalid_input,
                          "expected a UTC date like 2026-12-31 or 2026-12-31T18:00:00Z, got `" + text + "`", flag);
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

// A date, or a duration meaning that long ago ("7d").
Result<std::int64_t> parse_since_ms(const std::string& text, const std::string& flag = "--since") {
    if (auto d = resources::parse_duration_s(text)) {
        const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
        return static_cast<std::int64_t>(now) - *d * 1000;
    }
    return parse_date_ms(text, flag);
}

std::string credits_of(const json& v) { return credits::format_credits(v.get<std::int64_t>()); }

struct BudgetArgs {
    std::string team;
    std::string member;
    std::string day;
    std::string week;
};

std::string cap_text(const json& v) { return v.is_null() ? std::string("none") : credits_of(v); }

// "team fellows budget: 50 per day, none per week; spent ..." and one line per member with caps.
void print_budgets(const json& r) {
    std::cout << "team " << printable(r["team"]) << " budget: " << cap_text(r["budget_day_micro"]) << " per day, "
              << cap_text(r["budget_week_micro"]) << " per week; spent " << credits_of(r["spent_day_micro"])
              << " in the last 24h, " << credits_of(r["spent_week_micro"]) << " in the last 7 days\n";
    for (const auto& m : r.value("members", json::array())) {
        std::cout << "  member " << printable(m["label"]) << " (token " << m["token_id"]
                  << "): " << cap_text(m["day_micro"]) << " per day, " << cap_text(m["week_micro"])
                  << " per week; spent " << credits_of(m["spent_day_micro"]) << " in the last 24h, "
                  << credits_of(m["spent_week_micro"]) << " in the last 7 days, " << credits_of(m["held_micro"])
                  << " held\n";
    }
}

int run_admin_budget(const GlobalOptions& global, const BudgetArgs& b) {
    if (b.day.empty() && b.week.empty()) {
        if (!b.member.empty()) {
            report_error(global, make_error(ErrorCode::invalid_input,
                                            "--member sets a member's caps: give --day and/or --week (without "
                                            "--member, the command shows the team's and its members' caps)",
                                            "--member"));
            return k_exit_usage;
        }
        return admin_call(global, "GET", "/v1/credits?limit=0&team=" + net::percent_encode(b.team), {}, print_budgets);
    }
    json body = {{"team", b.team}};
    if (!b.member.empty()) {
        body["member"] = b.member;
    }
    for (auto [text, key] : {std::pair{&b.day, "day_micro"}, std::pair{&b.week, "week_micro"}}) {
        if (text->empty()) {
            continue; // kept as it is
        }
        if (*text == "none") {
            body[key] = nullptr;
            continue;
        }
        auto v = credits::parse_credits(*text);
        if (!v) {
            Error e = v.error();
            e.field = key == std::string("day_micro") ? "--day" : "--week";
            report_error(global, e);
            return k_exit_usage;
        }
        body[key] = *v;
    }
    return admin_call(global, "POST", "/v1/admin/budgets", body, [](const json& r) {
        const std::string who = r.contains("member") ? "member " + printable(r["member"]["label"]) + " of team " +
                                                           printable(r["team"])
                                                     : "team " + printable(r["team"]);
        std::cout << who << " budget: " << cap_text(r["day_micro"]) << " per day, " << cap_text(r["week_micro"])
                  << " per week\n";
    });
}

} // namespace

void register_admin(Cli& cli) {
    CLI::App* admin = add_command(cli, "admin", "Administer the pool: teams, tokens, workers, credits (admin token)");
    admin->require_subcommand(1);
    add_help_footer(admin,
                    "gpupool admin team create fellows\ngpupool admin token create --team fellows --label alice\n"
                    "gpupool admin enroll owners               # an enrollment token for a GPU owner\n"
                    "gpupool admin grant fellows 100 --expires 2027-03-01\ngpupool admin workers",
                    "README.md (What works today), docs/security.md, docs/credits.md", Reach::coordinator);

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
                                   [](const json& t) { std::cout << "created team " << printable(t["name"]) << " (id " << t["id"] << ")\n"; });
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
        std::string which; // revoke: an id or a label
        bool all = false;  // list: revoked ones too
        std::int64_t uses = 1;
    };
    auto tok = std::make_shared<TokenArgs>();
    CLI::App* token_cmd = admin->add_subcommand("token", "API tokens")->require_subcommand(1);
    CLI::App* token_create = token_cmd->add_subcommand("create", "Create a token (its secret is shown once)");
    token_create->add_option("--role", tok->role, "member, admin or enroll")
        ->check(CLI::IsMember({"member", "admin", "enroll"}))
        ->capture_default_str();
    token_create->add_option("--team", tok->team, "Team (member and enroll tokens)");
    token_create->add_option("--label", tok->label, "A note to recognise it by");
    token_create->add_option("--uses", tok->uses, "Enrollment tokens: how many workers it may register")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000}))
        ->capture_default_str();
    token_create->callback([&cli, tok] {
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/tokens",
                                   {{"role", tok->role}, {"team", tok->team}, {"label", tok->label}, {"uses", tok->uses}},
                                   print_token);
    });
    CLI::App* token_list = token_cmd->add_subcommand("list", "List tokens: role, team, label, created, last used");
    token_list->add_option("--team", tok->team, "Only this team's tokens");
    token_list->add_flag("--all", tok->all, "Revoked tokens too");
    token_list->callback([&cli, tok] {
        const std::string path =
            "/v1/admin/tokens" + (tok->team.empty() ? std::string() : "?team=" + net::percent_encode(tok->team));
        cli.exit_code = admin_call(cli.global, "GET", path, {}, [all = tok->all](const json& r) {
            std::vector<std::vector<std::string>> rows{
                {"ID", "ROLE", "TEAM", "LABEL", "CREATED (UTC)", "LAST USED (UTC)", "STATE"}};
            for (const auto& t : r["tokens"]) {
                const bool revoked = !t["revoked_at"].is_null();
                if (revoked && !all) {
                    continue;
                }
                std::string state = revoked ? "revoked " + format_time(t["revoked_at"]) : "active";
                if (!revoked && t["uses_left"].is_number_integer()) {
                    state += ", " + std::to_string(t["uses_left"].get<std::int64_t>()) + " use(s) left";
                }
                if (t["worker"].is_number_integer()) {
                    state += ", worker " + std::to_string(t["worker"].get<std::int64_t>());
                }
                rows.push_back({std::to_string(t["id"].get<std::int64_t>()), t["role"].get<std::string>(),
                                t["team"].is_string() ? t["team"].get<std::string>() : "-", t["label"].get<std::string>(),
                                format_time(t["created_at"]),
                                t["last_used_at"].is_null() ? "-" : format_time(t["last_used_at"]), state});
            }
            print_table(rows);
            std::cout << "(last use is counted since the coordinator started)\n";
        });
    });
    CLI::App* token_revoke = token_cmd->add_subcommand("revoke", "Revoke a token by id, or by its label when one "
                                                                 "active token has it");
    token_revoke->add_option("token", tok->which, "Token id or label")->required();
    token_revoke->callback([&cli, tok] {
        std::string id = tok->which;
        if (id.empty() || !std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
            // A label: it must name exactly one active token.
            auto api = connect(cli.global);
            if (!api) {
                cli.exit_code = k_exit_failed;
                return;
            }
            auto r = api->get("/v1/admin/tokens");
            if (!r) {
                report_error(cli.global, r.error());
                cli.exit_code = k_exit_failed;
                return;
            }
            std::vector<std::string> ids;
            for (const auto& t : (*r)["tokens"]) {
                if (t["revoked_at"].is_null() && t["label"] == tok->which) {
                    ids.push_back(std::to_string(t["id"].get<std::int64_t>()));
                }
            }
            if (ids.size() != 1) {
                std::string list;
                for (const auto& i : ids) {
                    list += (list.empty() ? "" : ", ") + i;
                }
                report_error(cli.global,
                             make_error(ErrorCode::invalid_input,
                                        ids.empty() ? "no active token has the label `" + tok->which +
                                                          "` (`gpupool admin token list`)"
                                                    : "the label `" + tok->which + "` names " +
                                                          std::to_string(ids.size()) + " active tokens (" + list +
                                                          "): revoke by id",
                                        "token"));
                cli.exit_code = k_exit_failed;
                return;
            }
            id = ids.front();
        }
        cli.exit_code = admin_call(cli.global, "DELETE", "/v1/admin/tokens/" + id, {},
                                   [](const json& r) { std::cout << "revoked token " << r["revoked"] << '\n'; });
    });

    auto enroll_args = std::make_shared<TokenArgs>();
    CLI::App* enroll = admin->add_subcommand(
        "enroll", "Create an enrollment token: a GPU owner's worker registers with it (once, or --uses N times; "
                  "banning a worker revokes the token it enrolled with)");
    enroll->add_option("team", enroll_args->team, "The owner's team (credited for the GPU time)")->required();
    enroll->add_option("--uses", enroll_args->uses, "How many workers it may register")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000}))
        ->capture_default_str();
    enroll->callback([&cli, enroll_args] {
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/tokens",
                                   {{"role", "enroll"}, {"team", enroll_args->team}, {"label", "enrollment"},
                                    {"uses", enroll_args->uses}},
                                   print_token);
    });

    CLI::App* workers = admin->add_subcommand("workers", "List workers");
    workers->callback([&cli] {
        cli.exit_code = admin_call(cli.global, "GET", "/v1/workers", {}, [](const json& r) {
            std::vector<std::vector<std::string>> rows{{"ID", "NAME", "TEAM", "STATE", "GPUS", "LAST SEEN (UTC)"}};
            for (const auto& w : r["workers"]) {
                std::string gpus;
                if (w["inventory"].is_object() && w["inventory"].contains("gpus")) {
                    for (const auto& g : w["inventory"]["gpus"]) {
                        gpus += (gpus.empty() ? "" : ",") + g.value("model", std::string("?"));
                    }
                }
                const std::string presence = w.value("presence", w["state"].get<std::string>());
                rows.push_back({std::to_string(w["id"].get<std::int64_t>()), w["name"].get<std::string>(),
                                w.value("team_name", std::to_string(w["team"].get<std::int64_t>())),
                                presence == "offline" ? "offline since " + format_time(w["last_seen_at"]) : presence,
                                gpus.empty() ? "-" : gpus, format_time(w["last_seen_at"])});
            }
            print_table(rows);
        });
    });
    auto worker_id = std::make_shared<std::int64_t>(0);
    auto void_since = std::make_shared<std::string>();
    CLI::App* ban = admin->add_subcommand(
        "ban", "Ban a worker: it gets no work, its running jobs go back to the queue, the enrollment token it came "
               "with is revoked; --void-since also voids its results");
    ban->add_option("worker", *worker_id, "Worker id")->required();
    ban->add_option("--void-since", *void_since,
                    "Void the results it reported since this UTC time (2026-11-30T12:00:00Z) or this long ago (3d): "
                    "their credits go back to the teams that paid and those jobs run again");
    ban->callback([&cli, worker_id, void_since] {
        json body = json::object();
        if (!void_since->empty()) {
            auto since = parse_since_ms(*void_since, "--void-since");
            if (!since) {
                report_error(cli.global, since.error());
                cli.exit_code = k_exit_usage;
                return;
            }
            body["void_since"] = *since;
        }
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/workers/" + std::to_string(*worker_id) + "/ban", body,
                                   [](const json& r) {
                                       std::cout << "worker " << r["worker"] << " is now banned\n";
                                       const auto& voided = r["voided_attempts"];
                                       if (!voided.empty()) {
                                           std::cout << "voided " << voided.size() << " attempt(s): "
                                                     << credits_of(r["refunded_micro"])
                                                     << " credits went back to the teams that paid; "
                                                     << r["requeued_jobs"].size() << " job(s) run again\n";
                                       }
                                   });
    });
    for (const char* verb : {"drain", "activate"}) {
        CLI::App* c = admin->add_subcommand(verb, std::string(verb) + " a worker");
        c->add_option("worker", *worker_id, "Worker id")->required();
        std::string v = verb;
        c->callback([&cli, worker_id, v] {
            cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/workers/" + std::to_string(*worker_id) + "/" + v,
                                       json::object(), [](const json& r) {
                                           std::cout << "worker " << r["worker"] << " is now "
                                                     << printable(r["state"]) << '\n';
                                       });
        });
    }
    // ---- credits ----
    struct GrantArgs {
        std::string team;
        std::string amount;
        std::string expires;
        std::string note;
        std::string day;
        std::string week;
        std::string since;
    };
    auto g = std::make_shared<GrantArgs>();
    CLI::App* grant = admin->add_subcommand("grant", "Grant credits to a team (minted from the issuer account)");
    grant->add_option("team", g->team, "Team")->required();
    grant->add_option("amount", g->amount, "Credits, exact decimal (e.g. 100 or 12.5)")->required();
    grant->add_option("--expires", g->expires, "UTC date when what is left of it goes back (2026-12-31)");
    grant->add_option("--note", g->note, "Why (shown in the team's movements)");
    grant->callback([&cli, g] {
        auto amount = credits::parse_credits(g->amount);
        if (!amount) {
            Error e = amount.error();
            e.field = "amount";
            report_error(cli.global, e);
            cli.exit_code = k_exit_usage;
            return;
        }
        json body = {{"team", g->team}, {"amount_micro", *amount}, {"note", g->note}};
        if (!g->expires.empty()) {
            auto at = parse_date_ms(g->expires, "--expires");
            if (!at) {
                report_error(cli.global, at.error());
                cli.exit_code = k_exit_usage;
                return;
            }
            body["expires_at"] = *at;
        }
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/grants", body, [](const json& r) {
            std::cout << "granted " << credits_of(r["amount_micro"]) << " credits to team " << printable(r["team"])
                      << " (grant " << r["grant"] << ")"
                      << (r["expires_at"].is_null() ? "" : ", expires " + format_time(r["expires_at"]) + " UTC")
                      << "; its balance is now " << credits_of(r["balance_micro"]) << '\n';
        });
    });
    CLI::App* adjust = admin->add_subcommand("adjust", "Correct a team's balance by a signed amount (with a note)");
    adjust->add_option("team", g->team, "Team")->required();
    adjust->add_option("amount", g->amount, "Credits, signed exact decimal (e.g. -2.5)")->required();
    adjust->add_option("--note", g->note, "Why (required)")->required();
    adjust->callback([&cli, g] {
        auto amount = credits::parse_credits(g->amount, true);
        if (!amount || *amount == 0) {
            Error e = amount ? make_error(ErrorCode::invalid_input, "an adjustment is a non-zero amount") : amount.error();
            e.field = "amount";
            report_error(cli.global, e);
            cli.exit_code = k_exit_usage;
            return;
        }
        cli.exit_code = admin_call(cli.global, "POST", "/v1/admin/adjustments",
                                   {{"team", g->team}, {"amount_micro", *amount}, {"note", g->note}}, [](const json& r) {
                                       std::cout << "adjusted team " << printable(r["team"]) << ": "
                                                 << credits_of(r["amount_micro"]) << " credits from "
                                                 << printable(r["debit"]) << " to "
                                                 << printable(r["credit"]) << " (entry " << r["id"] << ")\n";
                                   });
    });
    CLI::App* budget = admin->add_subcommand(
        "budget", "Show a team's spend caps (and its members'), or set the team's or one member's (per day / per "
                  "week; a cap left out keeps its value, `none` removes it)");
    auto b = std::make_shared<BudgetArgs>();
    budget->add_option("team", b->team, "Team")->required();
    budget->add_option("--member", b->member,
                       "Set a member's own caps (within the team's): its member token's label, or its id");
    budget->add_option("--day", b->day, "Credits per rolling 24 hours, or none");
    budget->add_option("--week", b->week, "Credits per rolling 7 days, or none");
    add_help_footer(budget,
                    "gpupool admin budget fellows --day 50 --week 200\ngpupool admin budget fellows --member alice "
                    "--day 10\ngpupool admin budget fellows          # show the caps and what was spent",
                    "docs/credits.md (Grants, adjustments, budgets)", Reach::coordinator);
    budget->callback([&cli, b] { cli.exit_code = run_admin_budget(cli.global, *b); });
    CLI::App* report = admin->add_subcommand("report", "Credits per team and GPU-hours per worker");
    report->add_option("--since", g->since, "From this UTC date (2026-11-01) or this long ago (7d)");
    report->callback([&cli, g] {
        std::string path = "/v1/admin/report";
        if (!g->since.empty()) {
            auto since = parse_since_ms(g->since);
            if (!since) {
                report_error(cli.global, since.error());
                cli.exit_code = k_exit_usage;
                return;
            }
            path += "?since=" + std::to_string(*since);
        }
        cli.exit_code = admin_call(cli.global, "GET", path, {}, [](const json& r) {
            std::cout << "since " << (r["since"].get<std::int64_t>() == 0 ? "the start" : format_time(r["since"]) + " UTC")
                      << "\n\n";
            std::vector<std::vector<std::string>> rows{
                {"TEAM", "GRANTED", "EARNED", "SPENT", "BALANCE", "IN ESCROW", "SETTLING", "REFUNDED"}};
            for (const auto& t : r["teams"]) {
                rows.push_back({t["team"].get<std::string>(), credits_of(t["granted_micro"]), credits_of(t["earned_micro"]),
                                credits_of(t["spent_micro"]), credits_of(t["balance_micro"]), credits_of(t["held_micro"]),
                                credits_of(t["settling_micro"]), credits_of(t["refunded_micro"])});
            }
            print_table(rows);
            std::cout << '\n';
            std::vector<std::vector<std::string>> wrows{{"WORKER", "NAME", "TEAM", "GPU-HOURS", "ATTEMPTS", "FAILURES", "VOIDED", "EARNED"}};
            for (const auto& w : r["workers"]) {
                char hours[32];
                std::snprintf(hours, sizeof hours, "%.3f", w["gpu_hours"].get<double>());
                wrows.push_back({std::to_string(w["worker"].get<std::int64_t>()), w["name"].get<std::string>(),
                                 std::to_string(w["team_id"].get<std::int64_t>()), hours,
                                 std::to_string(w["attempts"].get<std::int64_t>()),
                                 std::to_string(w["failures"].get<std::int64_t>()),
                                 std::to_string(w["voided"].get<std::int64_t>()), credits_of(w["earned_micro"])});
            }
            print_table(wrows);
            std::cout << "\npool fee " << credits_of(r["pool_fee_micro"]) << ", escrow " << credits_of(r["escrow_micro"])
                      << ", settling " << credits_of(r["settling_micro"])
                      << ", issued " << credits::format_credits(-r["issuer_micro"].get<std::int64_t>()) << '\n';
        });
    });

    for (CLI::App* c : admin->get_subcommands({})) {
        c->fallthrough();
        for (CLI::App* cc : c->get_subcommands({})) {
            cc->fallthrough();
        }
    }
}

} // namespace gpupool::cmd
