// Credits: estimates, grants and adjustments, settling payouts and grant expiry, the credits view
// and the pool report, and what attempts and jobs cost (Coordinator's credit methods; the ledger's
// rules are in core/credits/ledger.hpp, budgets in budgets.cpp).
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/resolve_name.hpp"
#include "core/resources/quantity.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

std::vector<RecipeHistory> Coordinator::recipe_history(const Principal& who,
                                                       const std::vector<recipe::Origin>& recipes) const {
    // (repo, recipe) -> the runtimes and costs of its successful attempts.
    std::map<std::pair<std::string, std::string>, std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> runs;
    for (const auto& r : recipes) {
        runs[{r.repo, r.recipe}];
    }
    const auto& open = m_options.public_recipe_repos;
    const auto counts_for_caller = [&](const JobRecord& j) {
        return who.role == Role::admin || (who.team && *who.team == j.team) ||
               std::find(open.begin(), open.end(), j.spec.origins.front().repo) != open.end();
    };
    for (const auto& [id, a] : m_job_book.attempts()) {
        if (!counts_as_run(a)) {
            continue;
        }
        const JobRecord& j = m_job_book.jobs().at(a.job);
        if (j.spec.origins.empty()) {
            continue;
        }
        auto it = runs.find({j.spec.origins.front().repo, j.spec.origins.front().recipe});
        if (it != runs.end() && counts_for_caller(j)) {
            it->second.first.push_back(run_seconds(a));
            it->second.second.push_back(cost_micro(a));
        }
    }
    std::vector<RecipeHistory> out;
    for (const auto& r : recipes) {
        const auto& [times, costs] = runs.at({r.repo, r.recipe});
        RecipeHistory h{recipe::Origin{r.recipe, r.repo, ""}, static_cast<std::int64_t>(times.size()), 0, 0};
        if (!times.empty()) {
            h.median_runtime_s = median_of(times);
            h.median_cost_micro = median_of(costs);
        }
        out.push_back(std::move(h));
    }
    return out;
}

Estimate Coordinator::estimate_for(TeamId team, const std::string& source, const std::vector<recipe::JobSpec>& jobs) const {
    Estimate est;
    est.enforced = m_options.credits.enforce;
    const auto& rates = m_options.credits.rates;
    const auto [median_s, runs] = m_credits.history(team, source);
    // The hourly price and the model it is priced on, for one resource request.
    const auto price_of = [&](const recipe::Resources& r) {
        std::pair<Micro, std::string> out{0, std::string()};
        if (r.gpus == 0) {
            out.first = credits::cpu_price_per_hour(rates.cpu_micro_per_core_hour, r.cpu_milli);
            return out;
        }
        // The priciest GPU in the pool the job may land on; the catalog default in an empty pool.
        bool seen = false;
        for (const auto& [kind, count] : m_roster.gpu_kinds()) {
            const auto& [model, memory_mib] = kind;
            const bool model_ok = r.gpu_models.empty() ||
                                  std::find(r.gpu_models.begin(), r.gpu_models.end(), model) != r.gpu_models.end();
            if (!model_ok || memory_mib < r.gpu_memory_mib) {
                continue;
            }
            const Micro price = credits::attempt_price_per_hour({r.gpus, r.gpu_milli, r.gpu_memory_mib, r.cpu_milli},
                                                                credits::PricedGpu{count.rate, memory_mib},
                                                                rates.cpu_micro_per_core_hour);
            if (!seen || price > out.first) {
                out = {price, model};
                seen = true;
            }
        }
        if (!seen) {
            const std::int64_t share = r.gpu_milli > 0 ? r.gpu_milli : 1000;
            out.first = credits::gpu_price_per_hour(rates.default_micro_per_gpu_hour, share);
        }
        return out;
    };
    ByResources<std::pair<Micro, std::string>> prices;
    for (const auto& spec : jobs) {
        JobEstimate je;
        je.name = spec.name;
        const auto& r = spec.resources;
        std::tie(je.price_micro_per_hour, je.gpu_model) = prices.get(r, [&] { return price_of(r); });
        je.max_micro = credits::cost_of(je.price_micro_per_hour, r.max_runtime_s * 1000);
        je.history_runs = runs;
        je.runtime_s = runs > 0 ? std::min(median_s, r.max_runtime_s) : r.max_runtime_s;
        je.estimate_micro = credits::cost_of(je.price_micro_per_hour, je.runtime_s * 1000);
        est.total_max_micro += je.max_micro;
        est.total_estimate_micro += je.estimate_micro;
        est.jobs.push_back(std::move(je));
    }
    est.available_micro = m_credits.ledger().balance(credits::Account::of_team(team.value()));
    est.budget_room_micro =
        m_credits.team_caps_room(team, m_clock.now_ms()); // what the budgets leave, whatever the balance
    return est;
}

Result<Estimate> Coordinator::estimate(const Principal& who, const std::string& source,
                                       const std::vector<recipe::JobSpec>& jobs,
                                       const std::optional<std::string>& team) const {
    TeamId id;
    if (who.role == Role::member && who.team) {
        id = *who.team;
    } else if (who.role == Role::admin) {
        if (!team) {
            return invalid("admins estimate for a team: set `team`", "team");
        }
        auto t = m_tokens.team_named(*team);
        if (!t) {
            return t.error();
        }
        id = *t;
    } else {
        return denied("only team members and admins ask for estimates");
    }
    if (jobs.empty()) {
        return invalid("an estimate needs at least one job", "jobs");
    }
    // As submit says it: a job no worker in the pool can ever run has no price here.
    ByResources<std::optional<std::string>> infeasible;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (const auto& why = infeasible.get(jobs[i].resources, [&] { return m_roster.infeasible_reason(jobs[i].resources); })) {
            return invalid("job `" + jobs[i].name + "` can never run on this pool: " + *why,
                           "jobs[" + std::to_string(i) + "].resources");
        }
    }
    Estimate est = estimate_for(id, source, jobs);
    for (const auto& [worker, live] : m_roster.workers()) {
        if (live.record.state != WorkerState::banned) {
            ++est.workers_joined;
            est.workers_online += presence(worker) == "online" ? 1 : 0;
        }
    }
    if (auto mine = m_credits.member_room(who.token_id, m_clock.now_ms())) {
        est.budget_room_micro = std::min(est.budget_room_micro.value_or(k_unlimited), *mine);
    }
    return est;
}

Result<GrantRecord> Coordinator::grant(const Principal& who, const std::string& team, std::int64_t amount_micro,
                                       std::optional<std::int64_t> expires_at, const std::string& note) {
    if (who.role != Role::admin) {
        return denied("only admins grant credits");
    }
    auto id = m_tokens.team_named(team);
    if (!id) {
        return id.error();
    }
    Changes c;
    auto staged = m_credits.stage_grant(*id, amount_micro, expires_at, note, m_clock.now_ms(), c);
    if (!staged) {
        return staged.error();
    }
    const GrantRecord& g = *staged;
    nlohmann::json detail{{"grant", g.id}, {"amount_micro", amount_micro}, {"note", note}};
    if (expires_at) {
        detail["expires_at"] = *expires_at;
    }
    audit(who.token_id, "credits.grant", "team `" + team + "`", detail.dump(), c);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return g;
}

Result<credits::Entry> Coordinator::adjust(const Principal& who, const std::string& team, std::int64_t amount_micro,
                                           const std::string& note) {
    if (who.role != Role::admin) {
        return denied("only admins adjust balances");
    }
    auto id = m_tokens.team_named(team);
    if (!id) {
        return id.error();
    }
    Changes c;
    auto e = m_credits.stage_adjustment(*id, amount_micro, note, m_clock.now_ms(), c);
    if (!e) {
        return e.error();
    }
    audit(who.token_id, "credits.adjust", "team `" + team + "`",
          nlohmann::json{{"entry", e->id}, {"amount_micro", amount_micro}, {"note", note}}.dump(), c);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return *e;
}

Result<CreditsView> Coordinator::credits_of(const Principal& who, const std::optional<std::string>& team,
                                            std::size_t movements) const {
    TeamId id;
    if ((who.role == Role::member || who.role == Role::worker) && who.team) {
        // A worker reads its owner team's credits: the owner sees its earnings with the identity
        // the machine already has (`gpupool worker status`).
        if (team && *team != m_tokens.teams().at(*who.team).name) {
            return denied("members and workers see their own team's credits");
        }
        id = *who.team;
    } else if (who.role == Role::admin) {
        if (!team) {
            return invalid("admins name the team: set `team`", "team");
        }
        auto t = m_tokens.team_named(*team);
        if (!t) {
            return t.error();
        }
        id = *t;
    } else {
        return denied("only team members, their workers and admins read credits");
    }
    const std::int64_t now = m_clock.now_ms();
    const TeamRecord& t = m_tokens.teams().at(id);
    CreditsView v;
    v.team = id;
    v.name = t.name;
    v.balance_micro = m_credits.ledger().balance(credits::Account::of_team(id.value()));
    v.held_micro = m_credits.ledger().held_by_team(id.value());
    v.settling_micro = m_credits.ledger().balance(credits::Account::settling_of(id.value()));
    v.budget_day_micro = t.budget_day_micro;
    v.budget_week_micro = t.budget_week_micro;
    v.spent_day_micro = m_credits.ledger().spent_since(id.value(), now - k_day_ms);
    v.spent_week_micro = m_credits.ledger().spent_since(id.value(), now - k_week_ms);
    for (const TokenRecord* tok : m_tokens.members_of(id)) { // oldest first
        if (tok->budget_day_micro || tok->budget_week_micro) {
            v.members.push_back(m_credits.member_budget(*tok, now));
        }
    }
    const auto acc = credits::Account::of_team(id.value());
    const auto settling = credits::Account::settling_of(id.value());
    const auto& entries = m_credits.ledger().entries();
    for (auto it = entries.rbegin(); it != entries.rend() && v.movements.size() < movements; ++it) {
        if (it->debit == acc || it->credit == acc || it->debit == settling || it->credit == settling ||
            it->payer == id.value()) {
            v.movements.push_back(*it);
        }
    }
    return v;
}

Result<Report> Coordinator::report(const Principal& who, std::int64_t since_ms) const {
    if (who.role != Role::admin) {
        return denied("only admins read the pool report");
    }
    Report r;
    r.since_ms = since_ms;
    std::map<std::int64_t, TeamReport> teams;
    for (const auto& [id, t] : m_tokens.teams()) {
        TeamReport tr;
        tr.team = id;
        tr.name = t.name;
        tr.balance_micro = m_credits.ledger().balance(credits::Account::of_team(id.value()));
        tr.held_micro = m_credits.ledger().held_by_team(id.value());
        tr.settling_micro = m_credits.ledger().balance(credits::Account::settling_of(id.value()));
        teams[id.value()] = tr;
    }
    std::map<std::int64_t, Micro> earned_by_attempt;
    std::map<std::int64_t, CreditTotals> totals;
    for (const auto& e : m_credits.ledger().entries()) {
        if (e.at_ms < since_ms) {
            continue;
        }
        tally_entry(e, totals);
        if (e.reason == credits::EntryReason::charge) {
            earned_by_attempt[e.attempt] += e.amount;
        } else if (e.reason == credits::EntryReason::refund && e.debit.kind != credits::AccountKind::pool_fee) {
            earned_by_attempt[e.attempt] -= e.amount;
        }
    }
    for (const auto& [team, t] : totals) {
        TeamReport& tr = teams[team];
        tr.granted_micro = t.granted;
        tr.earned_micro = t.earned;
        tr.spent_micro = t.spent;
        tr.refunded_micro = t.refunded;
    }
    for (auto& [id, tr] : teams) {
        r.teams.push_back(tr);
    }
    const std::int64_t now = m_clock.now_ms();
    std::map<WorkerId, WorkerReport> workers;
    for (const auto& [id, w] : m_roster.workers()) {
        workers[id] = WorkerReport{id, w.record.name, w.record.team, 0.0, 0, 0, 0, 0, 0};
    }
    for (const auto& [id, a] : m_job_book.attempts()) {
        const std::int64_t end = a.ended_at.value_or(now);
        if (end < since_ms) {
            continue;
        }
        WorkerReport& wr = workers[a.worker];
        if (a.started_at && a.gpu_milli > 0) {
            const std::int64_t from = std::max(*a.started_at, since_ms);
            wr.gpu_hours += static_cast<double>(std::max<std::int64_t>(0, end - from)) / 3.6e6 *
                            static_cast<double>(a.gpu_milli) / static_cast<double>(resources::k_milli_per_gpu);
        }
        if (a.ended_at) {
            ++wr.attempts;
            if (a.state == AttemptState::lost) {
                ++wr.failures;
            }
            wr.voided += a.voided_at ? 1 : 0;
            wr.owner_preempted += preempted_by_owner(a) ? 1 : 0;
        }
        auto earned = earned_by_attempt.find(id.value());
        if (earned != earned_by_attempt.end()) {
            wr.earned_micro += earned->second;
        }
    }
    for (auto& [id, wr] : workers) {
        r.workers.push_back(wr);
    }
    r.pool_fee_micro = m_credits.ledger().balance(credits::Account::pool_fee());
    r.escrow_micro = m_credits.ledger().balance(credits::Account::escrow());
    for (const auto& [account, balance] : m_credits.ledger().balances()) {
        r.settling_micro += account.kind == credits::AccountKind::settling ? balance : 0;
    }
    r.issuer_micro = m_credits.ledger().balance(credits::Account::issuer());
    return r;
}

} // namespace gpupool::coordinator
