#include "cmd/credits.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "core/api/credits.hpp"
#include "core/client/read_answer.hpp"
#include "core/credits/money.hpp"
#include "core/net/url.hpp"

#include <iostream>
#include <map>
#include <memory>

namespace gpupool::cmd {

using credits::format_credits;

namespace {

// "hold for attempt 12", "grant 3: note", ...
std::string describe(const wire::LedgerEntry& e) {
    std::string what = e.reason;
    if (e.attempt) {
        what += " (attempt " + std::to_string(e.attempt->value()) + ")";
    }
    if (e.grant && what.rfind("grant", 0) != 0) {
        what += " (grant " + std::to_string(*e.grant) + ")";
    }
    if (!e.note.empty()) {
        what += ": " + e.note;
    }
    return what;
}

// The entry's change to `account`: what it receives less what it pays.
std::int64_t change_to(const wire::LedgerEntry& e, const std::string& account) {
    return (e.credit == account ? e.amount_micro : 0) - (e.debit == account ? e.amount_micro : 0);
}

std::string signed_credits(std::int64_t micro) { return (micro > 0 ? "+" : "") + format_credits(micro); }

// The ledger rows of one job as this team sees them.
struct JobActivity {
    std::int64_t job = 0;
    std::string name;
    std::string payer; // the paying team's name
    bool ours = false;  // our team paid
    std::int64_t at = 0;       // the newest row's time
    std::int64_t net = 0;      // change to the team's available balance
    std::int64_t settling = 0; // change to its settling account (earnings not paid out yet)
    std::int64_t charged = 0;  // charge + fee
    bool held = false, settled = false, refunded = false, own_worker = false;
};

std::string what_happened(const JobActivity& a) {
    const std::string job = "job " + std::to_string(a.job) + (a.name.empty() ? "" : " " + a.name);
    if (!a.ours) {
        return "earned from team " + a.payer + "'s " + job +
               (a.settling > 0 ? " (settling: paid out when the pool's settling period ends)" : "") +
               (a.refunded ? " (voided: given back to the team)" : "");
    }
    if (a.refunded) {
        return job + ": refunded (its worker's results were voided)";
    }
    if (a.own_worker) {
        return job + ": ran on your team's own worker";
    }
    if (a.settled) {
        return job + ": charged " + format_credits(a.charged);
    }
    return job + (a.held ? ": held while it runs (the unused part comes back when it ends)" : "");
}

// One row per job (its hold, charge, fee, release, payout and refund folded), newest first; other
// rows (grants, adjustments, expiries) as they are.
std::vector<std::vector<std::string>> activity_rows(const wire::CreditsReply& v, std::size_t limit) {
    const std::string account = "team:" + std::to_string(v.team_id.value());
    const std::string settling = "settling:" + std::to_string(v.team_id.value());
    std::vector<JobActivity> jobs;
    std::vector<std::pair<std::size_t, const wire::LedgerEntry*>> order; // (index into jobs, or npos with the entry)
    std::map<std::int64_t, std::size_t> by_job;
    for (const auto& m : v.movements) {
        const wire::LedgerEntry& e = m.entry;
        if (!m.job) {
            order.emplace_back(std::string::npos, &e);
            continue;
        }
        const auto id = m.job->value();
        auto [it, fresh] = by_job.emplace(id, jobs.size());
        if (fresh) {
            JobActivity a;
            a.job = id;
            a.name = m.job_name.value_or("");
            a.payer = m.payer_team_name.value_or("?");
            a.ours = e.payer_team == v.team_id;
            a.at = e.at;
            jobs.push_back(a);
            order.emplace_back(it->second, nullptr);
        }
        JobActivity& a = jobs[it->second];
        a.net += change_to(e, account);
        a.settling += change_to(e, settling);
        const std::string& reason = e.reason;
        a.held = a.held || reason == "hold";
        a.settled = a.settled || reason == "charge" || reason == "fee" || reason == "release";
        a.charged += (reason == "charge" || reason == "fee") ? e.amount_micro : 0;
        a.refunded = a.refunded || reason == "refund";
        a.own_worker = a.own_worker || (a.ours && reason == "charge" && (e.credit == account || e.credit == settling));
    }
    std::vector<std::vector<std::string>> rows{{"WHEN (UTC)", "AMOUNT", "WHAT"}};
    for (const auto& [index, entry] : order) {
        if (rows.size() > limit) {
            break;
        }
        if (entry != nullptr) {
            rows.push_back({format_time(entry->at), signed_credits(change_to(*entry, account)), describe(*entry)});
            continue;
        }
        const JobActivity& a = jobs[index];
        rows.push_back({format_time(a.at), signed_credits(a.ours ? a.net : a.net + a.settling), what_happened(a)});
    }
    return rows;
}

} // namespace

namespace {

void print_summary(const wire::CreditsReply& v) {
    std::cout << "team " << printable(v.team) << '\n';
    std::cout << "  available   " << format_credits(v.balance_micro) << " credits\n";
    std::cout << "  in escrow   " << format_credits(v.held_micro) << " credits (held for running jobs)\n";
    if (v.settling_micro != 0) {
        std::cout << "  settling    " << format_credits(v.settling_micro)
                  << " credits (earned by your workers, paid out when the pool's settling period ends)\n";
    }
    std::cout << "  spent       " << format_credits(v.spent_day_micro) << " in the last 24h, "
              << format_credits(v.spent_week_micro) << " in the last 7 days\n";
    if (v.budget_day_micro || v.budget_week_micro) {
        std::cout << "  budget      " << cap_text(v.budget_day_micro) << " per day, " << cap_text(v.budget_week_micro)
                  << " per week\n";
    }
    for (const auto& m : v.members) {
        std::cout << "  member      " << printable(m.label) << ": " << cap_text(m.day_micro) << " per day, "
                  << cap_text(m.week_micro) << " per week; " << format_credits(m.spent_day_micro)
                  << " spent in the last 24h, " << format_credits(m.held_micro) << " held\n";
    }
}

// The ledger's own rows: every entry, signed from the team's point of view (escrow moves of its
// attempts that do not touch its account, such as a charge to the provider, unsigned).
void print_ledger(const wire::CreditsReply& v) {
    const std::string account = "team:" + std::to_string(v.team_id.value());
    std::vector<std::vector<std::string>> rows{{"ID", "WHEN (UTC)", "AMOUNT", "WHAT", "FROM", "TO"}};
    for (const auto& m : v.movements) {
        const wire::LedgerEntry& e = m.entry;
        std::string signed_amount = format_credits(e.amount_micro);
        if (e.credit == account) {
            signed_amount = "+" + signed_amount;
        } else if (e.debit == account) {
            signed_amount = "-" + signed_amount;
        }
        rows.push_back({std::to_string(e.id), format_time(e.at), signed_amount, describe(e), e.debit, e.credit});
    }
    print_table(rows);
}

} // namespace

std::string cap_text(const std::optional<std::int64_t>& micro) {
    return micro ? format_credits(*micro) : "none";
}

int run_credits(const CreditsOptions& opts) {
    const GlobalOptions& global = opts.global;
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    // One row per job folds several ledger rows: read more of them than the rows shown.
    const std::int64_t rows = opts.ledger ? opts.limit : std::min<std::int64_t>(opts.limit * 6, 10'000);
    std::string path = "/v1/credits?limit=" + std::to_string(rows);
    if (!opts.team.empty()) {
        path += "&team=" + net::percent_encode(opts.team);
    }
    auto r = client::read_answer(api->get(path), "GET /v1/credits", wire::credits_reply_from_json);
    if (!r) {
        report_error(global, r.error());
        return k_exit_failed;
    }
    if (global.json) {
        std::cout << wire::to_json(*r).dump(2) << '\n';
        return k_exit_ok;
    }
    print_summary(*r);
    if (r->movements.empty()) {
        std::cout << "no movements yet\n";
        return k_exit_ok;
    }
    if (opts.ledger) {
        std::cout << "\nledger rows (newest first):\n";
        print_ledger(*r);
        return k_exit_ok;
    }
    std::cout << "\nrecent activity (newest first; one row per job, --ledger for the ledger's rows):\n";
    print_table(activity_rows(*r, static_cast<std::size_t>(opts.limit)));
    return k_exit_ok;
}

void register_credits(Cli& cli) {
    auto opts = std::make_shared<CreditsOptions>();
    CLI::App* sub = add_command(cli, "credits", "Show your team's credit balance, escrow and recent activity");
    sub->add_option("--team", opts->team, "Team (admins; members see their own)");
    sub->add_option("--limit", opts->limit, "How many recent rows to show")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{10'000}));
    sub->add_flag("--ledger", opts->ledger,
                  "The ledger's own rows (hold, charge, fee, release, payout, refund...) with their accounts, "
                  "instead of one row per job");
    add_help_footer(sub, "gpupool credits\ngpupool credits --ledger --limit 50\ngpupool --json credits",
                    "docs/credits.md (For researchers)", Reach::coordinator);
    sub->callback([&cli, opts] {
        opts->global = cli.global;
        cli.exit_code = run_credits(*opts);
    });
}

} // namespace gpupool::cmd
