#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/net/url.hpp"
#include "core/credits/money.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

using json = nlohmann::json;
using credits::format_credits;

struct CreditsOptions {
    std::string team; // admins
    std::int64_t limit = 20;
};

namespace {

std::string micro(const json& v) {
    return v.is_number_integer() ? format_credits(v.get<std::int64_t>()) : "-";
}

// "hold for attempt 12", "grant 3: note", ...
std::string describe(const json& e) {
    std::string what = e["reason"].get<std::string>();
    if (e["attempt"].is_number_integer()) {
        what += " (attempt " + std::to_string(e["attempt"].get<std::int64_t>()) + ")";
    }
    if (e["grant"].is_number_integer() && what.rfind("grant", 0) != 0) {
        what += " (grant " + std::to_string(e["grant"].get<std::int64_t>()) + ")";
    }
    if (!e["note"].get<std::string>().empty()) {
        what += ": " + e["note"].get<std::string>();
    }
    return what;
}

} // namespace

int run_credits(const GlobalOptions& global, const CreditsOptions& opts) {
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    std::string path = "/v1/credits?limit=" + std::to_string(opts.limit);
    if (!opts.team.empty()) {
        path += "&team=" + net::percent_encode(opts.team);
    }
    auto r = api->get(path);
    if (!r) {
        report_error(global, r.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << r->dump(2) << '\n';
        return k_exit_ok;
    }
    const json& v = *r;
    const std::string account = "team:" + std::to_string(v["team_id"].get<std::int64_t>());
    std::cout << "team " << printable(v["team"]) << '\n';
    std::cout << "  available   " << micro(v["balance_micro"]) << " credits\n";
    std::cout << "  in escrow   " << micro(v["held_micro"]) << " credits (held for running jobs)\n";
    if (v.value("settling_micro", std::int64_t{0}) != 0) {
        std::cout << "  settling    " << micro(v["settling_micro"])
                  << " credits (earned by your workers, paid out when the pool's settling period ends)\n";
    }
    std::cout << "  spent       " << micro(v["spent_day_micro"]) << " in the last 24h, " << micro(v["spent_week_micro"])
              << " in the last 7 days\n";
    if (!v["budget_day_micro"].is_null() || !v["budget_week_micro"].is_null()) {
        std::cout << "  budget      " << micro(v["budget_day_micro"]) << " per day, " << micro(v["budget_week_micro"])
                  << " per week\n";
    }
    for (const auto& m : v.value("members", json::array())) {
        std::cout << "  member      " << printable(m["label"]) << ": " << micro(m["day_micro"]) << " per day, "
                  << micro(m["week_micro"]) << " per week; " << micro(m["spent_day_micro"]) << " spent in the last 24h, "
                  << micro(m["held_micro"]) << " held\n";
    }
    const json& moves = v["movements"];
    if (moves.empty()) {
        std::cout << "no movements yet\n";
        return k_exit_ok;
    }
    std::cout << "\nrecent movements (newest first):\n";
    std::vector<std::vector<std::string>> rows{{"ID", "WHEN (UTC)", "AMOUNT", "WHAT", "FROM", "TO"}};
    for (const auto& e : moves) {
        const auto amount = e["amount_micro"].get<std::int64_t>();
        // Signed from the team's point of view; escrow moves of its attempts that do not touch it
        // (a charge to the provider) are shown unsigned.
        std::string signed_amount = format_credits(amount);
        if (e["credit"] == account) {
            signed_amount = "+" + signed_amount;
        } else if (e["debit"] == account) {
            signed_amount = "-" + signed_amount;
        }
        rows.push_back({std::to_string(e["id"].get<std::int64_t>()), format_time(e["at"]), signed_amount, describe(e),
                        e["debit"].get<std::string>(), e["credit"].get<std::string>()});
    }
    print_table(rows);
    return k_exit_ok;
}

void register_credits(Cli& cli) {
    auto opts = std::make_shared<CreditsOptions>();
    CLI::App* sub = add_command(cli, "credits", "Show your team's credit balance, escrow and recent movements");
    sub->add_option("--team", opts->team, "Team (admins; members see their own)");
    sub->add_option("--limit", opts->limit, "How many recent movements to show")->capture_default_str();
    sub->callback([&cli, opts] { cli.exit_code = run_credits(cli.global, *opts); });
}

} // namespace gpupool::cmd
