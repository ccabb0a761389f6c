#include "cmd/admin.hpp"

#include "cmd/admin_enroll.hpp"
#include "cmd/cli_app.hpp"
#include "cmd/credits.hpp"
#include "cmd/migrate.hpp"
#include "cmd/remote.hpp"
#include "core/api/admin.hpp"
#include "core/api/credits.hpp"
#include "core/api/owner_terms.hpp"
#include "core/client/read_answer.hpp"
#include "core/credits/money.hpp"
#include "core/net/url.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/sha256.hpp"
#include "core/util/strings.hpp"
#include "core/util/time_text.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sys/utsname.h>
#include <tuple>

namespace gpupool::cmd {

namespace {

using json = nlohmann::json;

// How the command line names an action, for "`gpupool admin workers` needs an admin token".
std::string command_of(AdminAction action) {
    switch (action) {
    case AdminAction::team_create:
        return "admin team create";
    case AdminAction::team_list:
        return "admin team list";
    case AdminAction::token_create:
        return "admin token create";
    case AdminAction::token_list:
        return "admin token list";
    case AdminAction::token_revoke:
        return "admin token revoke";
    case AdminAction::enroll:
        return "admin enroll";
    case AdminAction::workers:
        return "admin workers";
    case AdminAction::ban:
        return "admin ban";
    case AdminAction::drain:
        return "admin drain";
    case AdminAction::activate:
        return "admin activate";
    case AdminAction::grant:
        return "admin grant";
    case AdminAction::adjust:
        return "admin adjust";
    case AdminAction::budget:
        return "admin budget";
    case AdminAction::report:
        return "admin report";
    case AdminAction::audit:
        return "admin audit";
    case AdminAction::backup:
        return "admin backup";
    }
    return "admin";
}

// Runs one admin request, reads the answer with `read` (a core/api *_from_json) and prints it with
// `human` (or its JSON with --json).
template <class Read, class Human>
int admin_call(const AdminOptions& o, const std::string& method, const std::string& path, const json& body, Read read,
               Human human) {
    const GlobalOptions& global = o.global;
    auto api = connect(global);
    if (!api || !require_admin(global, *api, command_of(o.action))) {
        return k_exit_failed;
    }
    Result<json> r = method == "GET" ? api->get(path) : method == "DELETE" ? api->del(path) : api->post(path, body);
    auto answer = client::read_answer(r, method + " " + path, read);
    if (!answer) {
        report_error(global, answer.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << wire::to_json(*answer).dump(2) << '\n';
    } else {
        human(*answer);
    }
    return k_exit_ok;
}

// What the token is goes to stderr, the secret alone to stdout: `admin enroll TEAM > enroll.token`
// writes a file that `--token-file` reads.
void print_token(const wire::CreatedToken& t) {
    std::cerr << printable(t.role) << " token " << t.id.value()
              << (t.team.empty() ? "" : " for team " + printable(t.team)) << " (shown once):" << std::endl;
    std::cout << printable(t.token) << '\n';
}

} // namespace

bool require_admin(const GlobalOptions& global, client::ApiClient& api, const std::string& command) {
    auto me = client::read_answer(api.get("/v1/whoami"), "GET /v1/whoami", wire::whoami_from_json);
    if (me && me->role == "admin") {
        return true;
    }
    if (!me && me.error().code != ErrorCode::forbidden) {
        report_error(global, me.error()); // no coordinator, a token it does not know, or a garbled answer
        return false;
    }
    std::string what = "a token that is not an admin's";
    if (me) {
        what = "a " + printable(me->role) + " token";
        if (me->team) {
            what += " of team `" + printable(*me->team) + "`";
        }
        if (!me->label.empty()) {
            what += " (labelled `" + printable(me->label) + "`)";
        }
    }
    report_error(global, make_error(ErrorCode::forbidden,
                                    "`gpupool " + command + "` needs an admin token; this one is " + what +
                                        " (give one with --token, --token-file or GPUPOOL_TOKEN)",
                                    "token"));
    return false;
}

Result<std::int64_t> parse_since_ms(const std::string& text, const std::string& flag) {
    if (auto d = resources::parse_duration_s(text)) {
        const auto now =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        return static_cast<std::int64_t>(now) - *d * 1000;
    }
    return util::parse_utc_date_ms(text, flag);
}

namespace {

std::string credits_of(std::int64_t micro) {
    return credits::format_credits(micro);
}

// "team fellows budget: 50 per day, none per week; spent ..." and one line per member with caps.
void print_budgets(const wire::CreditsReply& r) {
    std::cout << "team " << printable(r.team) << " budget: " << cap_text(r.budget_day_micro) << " per day, "
              << cap_text(r.budget_week_micro) << " per week; spent " << credits_of(r.spent_day_micro)
              << " in the last 24h, " << credits_of(r.spent_week_micro) << " in the last 7 days\n";
    for (const auto& m : r.members) {
        std::cout << "  member " << printable(m.label) << " (token " << m.token_id.value()
                  << "): " << cap_text(m.day_micro) << " per day, " << cap_text(m.week_micro) << " per week; spent "
                  << credits_of(m.spent_day_micro) << " in the last 24h, " << credits_of(m.spent_week_micro)
                  << " in the last 7 days, " << credits_of(m.held_micro) << " held\n";
    }
}

int run_admin_budget(const AdminOptions& b) {
    const GlobalOptions& global = b.global;
    if (b.day.empty() && b.week.empty()) {
        if (!b.member.empty()) {
            report_error(global, make_error(ErrorCode::invalid_input,
                                            "--member sets a member's caps: give --day and/or --week (without "
                                            "--member, the command shows the team's and its members' caps)",
                                            "--member"));
            return k_exit_usage;
        }
        return admin_call(b, "GET", "/v1/credits?limit=0&team=" + net::percent_encode(b.team), {},
                          wire::credits_reply_from_json, print_budgets);
    }
    wire::BudgetRequest request{b.team, b.member};
    for (auto [text, cap, flag] :
         {std::tuple{&b.day, &request.day, "--day"}, std::tuple{&b.week, &request.week, "--week"}}) {
        if (text->empty()) {
            continue; // kept as it is
        }
        cap->change = true;
        if (*text == "none") {
            continue; // removed
        }
        auto v = credits::parse_credits(*text);
        if (!v) {
            Error e = v.error();
            e.field = flag;
            report_error(global, e);
            return k_exit_usage;
        }
        cap->micro = *v;
    }
    return admin_call(b, "POST", "/v1/admin/budgets", wire::to_json(request), wire::budget_reply_from_json,
                      [](const wire::BudgetReply& r) {
                          const std::string who =
                              r.member ? "member " + printable(r.member->label) + " of team " + printable(r.team)
                                       : "team " + printable(r.team);
                          std::cout << who << " budget: " << cap_text(r.day_micro) << " per day, "
                                    << cap_text(r.week_micro) << " per week\n";
                      });
}

int run_team_create(const AdminOptions& o) {
    return admin_call(
        o, "POST", "/v1/admin/teams", wire::to_json(wire::TeamCreateRequest{o.team, o.weight}),
        [](const json& j) { return wire::team_from_json(j); },
        [](const wire::TeamView& t) {
            std::cout << "created team " << printable(t.name) << " (id " << t.id.value() << ")\n";
        });
}

int run_team_list(const AdminOptions& o) {
    return admin_call(o, "GET", "/v1/admin/teams", {}, wire::team_list_from_json, [](const wire::TeamList& r) {
        std::vector<std::vector<std::string>> rows{{"ID", "NAME", "WEIGHT"}};
        for (const auto& t : r.teams) {
            rows.push_back({std::to_string(t.id.value()), t.name, std::to_string(t.weight)});
        }
        print_table(rows);
    });
}

wire::TokenCreateRequest token_request(const AdminOptions& o, const std::string& role, const std::string& label) {
    return {role, o.team, label, o.uses};
}

int run_token_create(const AdminOptions& o) {
    return admin_call(o, "POST", "/v1/admin/tokens", wire::to_json(token_request(o, o.role, o.label)),
                      wire::created_token_from_json, print_token);
}

void print_tokens(const wire::TokenList& r, bool all) {
    std::vector<std::vector<std::string>> rows{
        {"ID", "ROLE", "TEAM", "LABEL", "CREATED (UTC)", "LAST USED (UTC)", "STATE"}};
    for (const auto& t : r.tokens) {
        const bool revoked = t.revoked_at.has_value();
        if (revoked && !all) {
            continue;
        }
        std::string state = revoked ? "revoked " + format_time(t.revoked_at) : "active";
        if (!revoked && t.uses_left) {
            state += ", " + std::to_string(*t.uses_left) + " use(s) left";
        }
        if (t.worker) {
            state += ", worker " + std::to_string(t.worker->value());
        }
        rows.push_back({std::to_string(t.id.value()), t.role, t.team.value_or("-"), t.label, format_time(t.created_at),
                        format_time(t.last_used_at), state});
    }
    print_table(rows);
    const auto hidden = static_cast<std::int64_t>(std::count_if(
        r.tokens.begin(), r.tokens.end(), [](const wire::TokenView& t) { return t.revoked_at.has_value(); }));
    if (hidden > 0 && !all) {
        std::cout << "(" << hidden << " revoked token(s) not shown; --all lists them)\n";
    }
    std::cout << "(last use is counted since the coordinator started)\n";
}

int run_token_list(const AdminOptions& o) {
    const std::string path =
        "/v1/admin/tokens" + (o.team.empty() ? std::string() : "?team=" + net::percent_encode(o.team));
    return admin_call(o, "GET", path, {}, wire::token_list_from_json,
                      [all = o.all](const wire::TokenList& r) { print_tokens(r, all); });
}

// The coordinator resolves what was typed (resolve_name): an id, or the label of one active token.
int run_token_revoke(const AdminOptions& o) {
    return admin_call(o, "DELETE", "/v1/admin/tokens/" + net::percent_encode(o.token), {},
                      wire::token_revoked_from_json,
                      [](const wire::TokenRevoked& r) { std::cout << "revoked token " << r.revoked.value() << '\n'; });
}

// The token, then the one command its owner runs (admin_enroll.hpp), or the line that says how to
// have one: on stderr, so that stdout stays the token alone (--json: both in the one document).
int run_enroll(const AdminOptions& o) {
    auto api = connect(o.global);
    if (!api || !require_admin(o.global, *api, command_of(o.action))) {
        return k_exit_failed;
    }
    auto t = client::read_answer(
        api->post("/v1/admin/tokens",
                  wire::to_json(token_request(o, "enroll", o.label.empty() ? "enrollment" : o.label))),
        "POST /v1/admin/tokens", wire::created_token_from_json);
    if (!t) {
        report_error(o.global, t.error());
        return k_exit_failed;
    }
    auto dist = api->get("/v1/dist"); // an older coordinator has none: no command
    auto cfg = config::load_client_config(overrides(o.global));
    std::string ca_sha;
    if (cfg && !cfg->ca_cert.empty()) {
        if (auto h = util::sha256_file_hex(cfg->ca_cert)) {
            ca_sha = *h;
        }
    }
    struct utsname machine {};
    ::uname(&machine);
    const JoinCommand join =
        join_command(dist ? *dist : json(), cfg ? cfg->url : std::string(), ca_sha, machine.machine);
    if (o.global.json) {
        json out = wire::to_json(*t);
        out["install_command"] = join.command.empty() ? json() : json(join.command);
        out["install_note"] = join.note;
        std::cout << out.dump(2) << '\n';
        return k_exit_ok;
    }
    print_token(*t);
    if (!join.command.empty()) {
        std::cerr << "On the GPU machine, the owner runs this one command (it asks for the token above; add "
                     "--token-file FILE to read it from a file, --runtime docker to choose the engine):\n"
                  << join.command << std::endl;
    }
    if (!join.note.empty()) {
        std::cerr << join.note << std::endl;
    }
    return k_exit_ok;
}

// The models of a worker's GPUs ("A100,A100"), and its slots, from the inventory as it reported
// it (passed on by the coordinator as it came: read without trusting its shape).
std::string inventory_gpus(const json& inventory) {
    std::string gpus;
    const auto it = inventory.is_object() ? inventory.find("gpus") : inventory.end();
    if (it == inventory.end() || !it->is_array()) {
        return gpus;
    }
    for (const auto& g : *it) {
        const bool named = g.is_object() && g.contains("model") && g["model"].is_string();
        gpus += (gpus.empty() ? "" : ",") + (named ? g["model"].get<std::string>() : std::string("?"));
    }
    return gpus;
}

std::int64_t inventory_slots(const json& inventory) {
    const auto it = inventory.is_object() ? inventory.find("slots") : inventory.end();
    return it != inventory.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

// Each worker's owner terms as its last heartbeat said them (api::describe_terms), one line each;
// max jobs from its inventory when the terms do not say.
void print_owner_terms(const std::vector<wire::WorkerView>& workers) {
    for (const auto& w : workers) {
        api::OwnerTerms terms = w.terms.value_or(api::OwnerTerms{});
        if (terms.max_jobs == 0) {
            terms.max_jobs = inventory_slots(w.inventory);
        }
        std::cout << "worker " << w.id.value() << " `" << printable(w.name)
                  << "` terms: " << printable(util::join(api::describe_terms(terms), "; ")) << '\n';
    }
}

int run_workers(const AdminOptions& o) {
    return admin_call(o, "GET", "/v1/workers", {}, wire::worker_list_from_json, [](const wire::WorkerList& r) {
        std::vector<std::vector<std::string>> rows{
            {"ID", "NAME", "TEAM", "STATE", "GPUS", "CHECKS (OK/BAD)", "RELIABILITY", "LAST SEEN (UTC)"}};
        for (const auto& w : r.workers) {
            const std::string gpus = inventory_gpus(w.inventory);
            // Quarantine is the admin's to lift (or turn into a ban), whatever its presence.
            const std::string presence = w.state == "quarantined" ? w.state : w.presence.empty() ? w.state : w.presence;
            const bool checked = w.checks_agreed + w.checks_disagreed > 0;
            char score[16];
            std::snprintf(score, sizeof score, "%.3f", w.reliability);
            rows.push_back({std::to_string(w.id.value()), w.name,
                            w.team_name.empty() ? std::to_string(w.team.value()) : w.team_name,
                            presence == "offline" ? "offline since " + format_time(w.last_seen_at) : presence,
                            gpus.empty() ? "-" : gpus,
                            checked ? std::to_string(w.checks_agreed) + "/" + std::to_string(w.checks_disagreed) : "-",
                            checked ? score : "-", format_time(w.last_seen_at)});
        }
        print_table(rows);
        // GPUs whose memory is not their catalog model's (priced at that model's rate all the same).
        for (const auto& w : r.workers) {
            if (w.model_mismatch) {
                std::cout << "worker " << w.id.value() << " `" << printable(w.name)
                          << "`: GPU model and memory disagree: " << printable(*w.model_mismatch) << '\n';
            }
        }
        print_owner_terms(r.workers);
        for (const auto& w : r.workers) {
            if (w.state == "quarantined") {
                std::cout << "worker " << w.id.value() << " `" << printable(w.name)
                          << "` is quarantined: its spot checks disagreed (docs/evidence.md); `gpupool admin "
                             "activate "
                          << w.id.value() << "` lifts it, `gpupool admin ban " << w.id.value()
                          << " --void-since TIME` refunds its results\n";
            }
        }
    });
}

// "worker 4 `box-b` (active, online)", the workers of a ban's answer.
std::string sibling_list(const std::vector<wire::BanSibling>& workers, bool banned) {
    std::string out;
    for (const auto& w : workers) {
        if ((w.state == "banned") != banned) {
            continue;
        }
        out += (out.empty() ? "" : ", ") + std::string("worker ") + std::to_string(w.id.value()) + " `" +
               printable(w.name) + "`" + (banned ? "" : " (" + printable(w.presence) + ")");
    }
    return out;
}

void print_ban(const wire::BanReply& r) {
    std::cout << "worker " << r.worker.value() << " is now banned\n";
    if (const std::string banned = sibling_list(r.siblings, true); !banned.empty()) {
        std::cout << "banned with it, enrolled with the same token: " << banned << '\n';
    }
    if (const std::string going = sibling_list(r.siblings, false); !going.empty()) {
        std::cout << "enrolled with the same token (now revoked) and still taking work: " << going
                  << "\n(ban them too with `gpupool admin ban " << r.worker.value() << " --with-siblings`)\n";
    }
    if (!r.voided_attempts.empty()) {
        std::cout << "voided " << r.voided_attempts.size() << " attempt(s): " << credits_of(r.refunded_micro)
                  << " credits went back to the teams that paid; " << r.requeued_jobs.size() << " job(s) run again\n";
    }
}

int run_ban(const AdminOptions& o) {
    wire::BanRequest body;
    if (!o.void_since.empty()) {
        auto since = parse_since_ms(o.void_since, "--void-since");
        if (!since) {
            report_error(o.global, since.error());
            return k_exit_usage;
        }
        body.void_since = *since;
    }
    body.with_siblings = o.with_siblings;
    return admin_call(o, "POST", "/v1/admin/workers/" + net::percent_encode(o.worker) + "/ban", wire::to_json(body),
                      wire::ban_reply_from_json, print_ban);
}

// drain or activate.
int run_worker_state(const AdminOptions& o, const std::string& verb) {
    return admin_call(o, "POST", "/v1/admin/workers/" + net::percent_encode(o.worker) + "/" + verb, json::object(),
                      wire::worker_state_changed_from_json, [](const wire::WorkerStateChanged& r) {
                          std::cout << "worker " << r.worker.value() << " is now " << printable(r.state) << '\n';
                      });
}

int run_grant(const AdminOptions& o) {
    auto amount = credits::parse_credits(o.amount);
    if (!amount) {
        Error e = amount.error();
        e.field = "amount";
        report_error(o.global, e);
        return k_exit_usage;
    }
    wire::GrantRequest body{o.team, *amount, o.note, std::nullopt};
    if (!o.expires.empty()) {
        auto at = util::parse_utc_date_ms(o.expires, "--expires");
        if (!at) {
            report_error(o.global, at.error());
            return k_exit_usage;
        }
        body.expires_at = *at;
    }
    return admin_call(o, "POST", "/v1/admin/grants", wire::to_json(body), wire::grant_reply_from_json,
                      [](const wire::GrantReply& r) {
                          std::cout << "granted " << credits_of(r.amount_micro) << " credits to team "
                                    << printable(r.team) << " (grant " << r.grant << ")"
                                    << (r.expires_at ? ", expires " + format_time(r.expires_at) + " UTC" : "")
                                    << "; its balance is now " << credits_of(r.balance_micro) << '\n';
                      });
}

int run_adjust(const AdminOptions& o) {
    auto amount = credits::parse_credits(o.amount, true);
    if (!amount || *amount == 0) {
        Error e = amount ? make_error(ErrorCode::invalid_input, "an adjustment is a non-zero amount") : amount.error();
        e.field = "amount";
        report_error(o.global, e);
        return k_exit_usage;
    }
    return admin_call(o, "POST", "/v1/admin/adjustments", wire::to_json(wire::AdjustRequest{o.team, *amount, o.note}),
                      wire::adjust_reply_from_json, [](const wire::AdjustReply& r) {
                          std::cout << "adjusted team " << printable(r.team) << ": " << credits_of(r.entry.amount_micro)
                                    << " credits from " << printable(r.entry.debit) << " to "
                                    << printable(r.entry.credit) << " (entry " << r.entry.id << ")\n";
                      });
}

void print_report(const wire::CreditReport& r) {
    std::cout << "since " << (r.since == 0 ? "the start" : format_time(r.since) + " UTC") << "\n\n";
    std::vector<std::vector<std::string>> rows{
        {"TEAM", "GRANTED", "EARNED", "SPENT", "BALANCE", "IN ESCROW", "SETTLING", "REFUNDED"}};
    for (const auto& t : r.teams) {
        rows.push_back({t.team, credits_of(t.granted_micro), credits_of(t.earned_micro), credits_of(t.spent_micro),
                        credits_of(t.balance_micro), credits_of(t.held_micro), credits_of(t.settling_micro),
                        credits_of(t.refunded_micro)});
    }
    print_table(rows);
    std::cout << '\n';
    std::vector<std::vector<std::string>> wrows{
        {"WORKER", "NAME", "TEAM", "GPU-HOURS", "ATTEMPTS", "FAILURES", "OWNER PREEMPTED", "VOIDED", "EARNED"}};
    for (const auto& w : r.workers) {
        char hours[32];
        std::snprintf(hours, sizeof hours, "%.3f", w.gpu_hours);
        wrows.push_back({std::to_string(w.worker.value()), w.name, std::to_string(w.team_id.value()), hours,
                         std::to_string(w.attempts), std::to_string(w.failures), std::to_string(w.owner_preempted),
                         std::to_string(w.voided), credits_of(w.earned_micro)});
    }
    print_table(wrows);
    std::cout << "\npool fee " << credits_of(r.pool_fee_micro) << ", escrow " << credits_of(r.escrow_micro)
              << ", settling " << credits_of(r.settling_micro) << ", issued "
              << credits::format_credits(-r.issuer_micro) << '\n';
}

int run_report(const AdminOptions& o) {
    std::string path = "/v1/admin/report";
    if (!o.since.empty()) {
        auto since = parse_since_ms(o.since);
        if (!since) {
            report_error(o.global, since.error());
            return k_exit_usage;
        }
        path += "?since=" + std::to_string(*since);
    }
    return admin_call(o, "GET", path, {}, wire::credit_report_from_json, print_report);
}

} // namespace

int run_admin(const AdminOptions& o) {
    switch (o.action) {
    case AdminAction::team_create:
        return run_team_create(o);
    case AdminAction::team_list:
        return run_team_list(o);
    case AdminAction::token_create:
        return run_token_create(o);
    case AdminAction::token_list:
        return run_token_list(o);
    case AdminAction::token_revoke:
        return run_token_revoke(o);
    case AdminAction::enroll:
        return run_enroll(o);
    case AdminAction::workers:
        return run_workers(o);
    case AdminAction::ban:
        return run_ban(o);
    case AdminAction::drain:
        return run_worker_state(o, "drain");
    case AdminAction::activate:
        return run_worker_state(o, "activate");
    case AdminAction::grant:
        return run_grant(o);
    case AdminAction::adjust:
        return run_adjust(o);
    case AdminAction::budget:
        return run_admin_budget(o);
    case AdminAction::report:
        return run_report(o);
    case AdminAction::audit:
        return run_audit(o);
    case AdminAction::backup:
        return run_backup(o);
    }
    return k_exit_usage;
}

namespace {

// The subcommands bind their options into one AdminOptions: only one subcommand runs per invocation.
using RunAs = std::function<std::function<void()>(AdminAction)>;

void add_token_commands(CLI::App* admin, AdminOptions& o, const RunAs& run_as) {
    CLI::App* token_cmd = admin->add_subcommand("token", "API tokens")->require_subcommand(1);
    CLI::App* token_create = token_cmd->add_subcommand("create", "Create a token (its secret is shown once)");
    token_create->add_option("--role", o.role, "member, admin or enroll")
        ->check(CLI::IsMember({"member", "admin", "enroll"}))
        ->capture_default_str();
    token_create->add_option("--team", o.team, "Team (member and enroll tokens)");
    token_create->add_option("--label", o.label, "A note to recognise it by");
    token_create->add_option("--uses", o.uses, "Enrollment tokens: how many workers it may register")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000}))
        ->capture_default_str();
    token_create->callback(run_as(AdminAction::token_create));
    CLI::App* token_list = token_cmd->add_subcommand("list", "List tokens: role, team, label, created, last used");
    token_list->add_option("--team", o.team, "Only this team's tokens");
    token_list->add_flag("--all", o.all, "Revoked tokens too");
    token_list->callback(run_as(AdminAction::token_list));
    CLI::App* token_revoke = token_cmd->add_subcommand("revoke", "Revoke a token by id, or by its label when one "
                                                                 "active token has it");
    token_revoke->add_option("token", o.token, "Token id or label")->required();
    token_revoke->callback(run_as(AdminAction::token_revoke));

    CLI::App* enroll = admin->add_subcommand(
        "enroll", "Create an enrollment token: a GPU owner's worker registers with it (once, or --uses N times; "
                  "banning a worker revokes the token it enrolled with)");
    enroll->add_option("team", o.team, "The owner's team (credited for the GPU time)")->required();
    enroll->add_option("--label", o.label, "A note to recognise it by in `admin token list`")
        ->default_str("enrollment");
    enroll->add_option("--uses", o.uses, "How many workers it may register")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000}))
        ->capture_default_str();
    enroll->callback(run_as(AdminAction::enroll));
}

void add_worker_commands(CLI::App* admin, AdminOptions& o, const RunAs& run_as) {
    CLI::App* workers = admin->add_subcommand("workers", "List workers");
    workers->callback(run_as(AdminAction::workers));
    CLI::App* ban = admin->add_subcommand(
        "ban", "Ban a worker: it gets no work, its running jobs go back to the queue, the enrollment token it came "
               "with is revoked (the other workers it enrolled are listed; --with-siblings bans them too); "
               "--void-since also voids its results");
    ban->add_option("worker", o.worker, "Worker id, or its name when one worker has it")->required();
    ban->add_option("--void-since", o.void_since,
                    "Void the results it reported since this UTC time (2026-11-30T12:00:00Z) or this long ago (3d): "
                    "their credits go back to the teams that paid and those jobs run again");
    ban->add_flag("--with-siblings", o.with_siblings,
                  "Also ban the other workers enrolled with the same enrollment token (listed otherwise), in the "
                  "same commit; --void-since applies to each");
    ban->callback(run_as(AdminAction::ban));
    for (auto [verb, action] : {std::pair{"drain", AdminAction::drain}, std::pair{"activate", AdminAction::activate}}) {
        CLI::App* c = admin->add_subcommand(verb, std::string(verb) + " a worker");
        c->add_option("worker", o.worker, "Worker id, or its name when one worker has it")->required();
        c->callback(run_as(action));
    }
}

void add_credit_commands(CLI::App* admin, AdminOptions& o, const RunAs& run_as) {
    CLI::App* grant = admin->add_subcommand("grant", "Grant credits to a team (minted from the issuer account)");
    grant->add_option("team", o.team, "Team")->required();
    grant->add_option("amount", o.amount, "Credits, exact decimal (e.g. 100 or 12.5)")->required();
    grant->add_option("--expires", o.expires, "UTC date when what is left of it goes back (2026-12-31)");
    grant->add_option("--note", o.note, "Why (shown in the team's movements)");
    grant->callback(run_as(AdminAction::grant));
    CLI::App* adjust = admin->add_subcommand("adjust", "Correct a team's balance by a signed amount (with a note)");
    adjust->add_option("team", o.team, "Team")->required();
    adjust->add_option("amount", o.amount, "Credits, signed exact decimal (e.g. -2.5)")->required();
    adjust->add_option("--note", o.note, "Why (required)")->required();
    adjust->callback(run_as(AdminAction::adjust));
    CLI::App* budget = admin->add_subcommand(
        "budget", "Show a team's spend caps (and its members'), or set the team's or one member's (per day / per "
                  "week; a cap left out keeps its value, `none` removes it)");
    budget->add_option("team", o.team, "Team")->required();
    budget->add_option("--member", o.member,
                       "Set a member's own caps (within the team's): its member token's label, or its id");
    budget->add_option("--day", o.day, "Credits per rolling 24 hours, or none");
    budget->add_option("--week", o.week, "Credits per rolling 7 days, or none");
    add_help_footer(budget,
                    "gpupool admin budget fellows --day 50 --week 200\ngpupool admin budget fellows --member alice "
                    "--day 10\ngpupool admin budget fellows          # show the caps and what was spent",
                    "docs/credits.md (Grants, adjustments, budgets)", Reach::coordinator);
    budget->callback(run_as(AdminAction::budget));
    CLI::App* report = admin->add_subcommand("report", "Credits per team and GPU-hours per worker");
    report->add_option("--since", o.since, "From this UTC date (2026-11-01) or this long ago (7d)");
    report->callback(run_as(AdminAction::report));
}

void add_ops_commands(CLI::App* admin, AdminOptions& o, const RunAs& run_as) {
    CLI::App* audit = admin->add_subcommand("audit", "Who did which admin action when, newest first");
    audit->add_option("--since", o.since, "From this UTC date (2026-11-01) or this long ago (7d)");
    audit->add_option("--action", o.action_prefix, "Actions starting with this (team., token., credits., worker.)");
    audit->add_option("--limit", o.limit, "How many records")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000}))
        ->capture_default_str();
    audit->callback(run_as(AdminAction::audit));
    CLI::App* backup = admin->add_subcommand(
        "backup", "Copy the whole pool (jobs, logs, outputs, tokens, ledger) to FILE while the coordinator serves");
    backup->add_option("file", o.file, "Where the copy goes (restore it with `gpupool coordinator --restore FILE`)")
        ->required();
    backup->add_flag("--force", o.force, "Replace FILE if it exists");
    add_help_footer(backup,
                    "gpupool admin backup pool-$(date +%F).db\n"
                    "gpupool coordinator --db pool.db --restore pool-2026-12-01.db   # the coordinator stopped",
                    "docs/operating.md (Backups and restore)", Reach::coordinator);
    backup->callback(run_as(AdminAction::backup));
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
    auto o = std::make_shared<AdminOptions>();
    const RunAs run_as = [&cli, o](AdminAction action) {
        return std::function<void()>([&cli, o, action] {
            o->global = cli.global;
            o->action = action;
            cli.exit_code = run_admin(*o);
        });
    };

    CLI::App* team_cmd = admin->add_subcommand("team", "Teams")->require_subcommand(1);
    CLI::App* team_create = team_cmd->add_subcommand("create", "Create a team");
    team_create->add_option("name", o->team, "Team name")->required();
    team_create->add_option("--weight", o->weight, "Fair-share weight")->capture_default_str();
    team_create->callback(run_as(AdminAction::team_create));
    CLI::App* team_list = team_cmd->add_subcommand("list", "List teams");
    team_list->callback(run_as(AdminAction::team_list));
    add_token_commands(admin, *o, run_as);
    add_worker_commands(admin, *o, run_as);
    add_credit_commands(admin, *o, run_as);
    add_ops_commands(admin, *o, run_as);
    register_admin_migrate(cli, admin);

    for (CLI::App* c : admin->get_subcommands({})) {
        c->fallthrough();
        for (CLI::App* cc : c->get_subcommands({})) {
            cc->fallthrough();
        }
    }
}

} // namespace gpupool::cmd
