// The credit operations (credit_ops.hpp): grants, adjustments and budgets an admin sets, the
// credits view, the pool report, a worker's earnings, estimates and the recipes' history, and the
// funding check a submission and a retry pass. The ledger's rules are core/credits/ledger.hpp's; the
// records and the staging are the CreditDesk's (credit_desk.hpp).
#include "core/coordinator/credit_ops.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/resolve_name.hpp"
#include "core/resources/quantity.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

// A budget as the audit log records it: the caps after the change (null: none).
std::string budget_detail(const std::optional<std::int64_t>& day, const std::optional<std::int64_t>& week) {
    return nlohmann::json{{"day_micro", day ? nlohmann::json(*day) : nlohmann::json()},
                          {"week_micro", week ? nlohmann::json(*week) : nlohmann::json()}}
        .dump();
}

std::optional<std::int64_t> applied(const CapChange& change, const std::optional<std::int64_t>& now) {
    switch (change.kind) {
    case CapChange::Kind::keep:
        return now;
    case CapChange::Kind::remove:
        return std::nullopt;
    case CapChange::Kind::set:
        return change.micro;
    }
    return now;
}

} // namespace

std::vector<RecipeHistory> recipe_history(const Coordinator& pool, const Principal& who,
                                          const std::vector<recipe::Origin>& recipes) {
    const std::int64_t now = pool.now_ms();
    // (repo, recipe) -> the runtimes and costs of its successful attempts.
    std::map<std::pair<std::string, std::string>, std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> runs;
    for (const auto& r : recipes) {
        runs[{r.repo, r.recipe}];
    }
    const auto& open = pool.options().public_recipe_repos;
    const auto counts_for_caller = [&](const JobRecord& j) {
        return who.role == Role::admin || (who.team && *who.team == j.team) ||
               std::find(open.begin(), open.end(), j.spec.origins.front().repo) != open.end();
    };
    for (const auto& [id, a] : pool.job_book().attempts()) {
        if (!counts_as_run(a)) {
            continue;
        }
        const JobRecord& j = pool.job_book().jobs().at(a.job);
        if (j.spec.origins.empty()) {
            continue;
        }
        auto it = runs.find({j.spec.origins.front().repo, j.spec.origins.front().recipe});
        if (it != runs.end() && counts_for_caller(j)) {
            it->second.first.push_back(run_seconds(a));
            it->second.second.push_back(pool.credit_desk().cost_micro(a, now));
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

Estimate detail::estimate_for(const Coordinator& pool, TeamId team, const std::string& source,
                              const std::vector<recipe::JobSpec>& jobs) {
    Estimate est;
    est.enforced = pool.options().credits.enforce;
    const auto& rates = pool.options().credits.rates;
    const auto [median_s, runs] = pool.credit_desk().history(team, source);
    // The hourly price and the model it is priced on, for one resource request.
    const auto price_of = [&](const recipe::Resources& r) {
        std::pair<Micro, std::string> out{0, std::string()};
        if (r.gpus == 0) {
            out.first = credits::cpu_price_per_hour(rates.cpu_micro_per_core_hour, r.cpu_milli);
            return out;
        }
        // The priciest GPU in the pool the job may land on; the catalog default in an empty pool.
        bool seen = false;
        for (const auto& [kind, count] : pool.roster().gpu_kinds()) {
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
    est.available_micro = pool.credit_desk().ledger().balance(credits::Account::of_team(team.value()));
    est.budget_room_micro =
        pool.credit_desk().team_caps_room(team, pool.now_ms()); // what the budgets leave, whatever the balance
    return est;
}

Result<Estimate> estimate_cost(const Coordinator& pool, const Principal& who, const std::string& source,
                               const std::vector<recipe::JobSpec>& jobs, const std::optional<std::string>& team) {
    TeamId id;
    if (who.role == Role::member && who.team) {
        id = *who.team;
    } else if (who.role == Role::admin) {
        if (!team) {
            return invalid("admins estimate for a team: set `team`", "team");
        }
        auto t = pool.tokens().team_named(*team);
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
        if (const auto& why =
                infeasible.get(jobs[i].resources, [&] { return pool.roster().infeasible_reason(jobs[i].resources); })) {
            return invalid("job `" + jobs[i].name + "` can never run on this pool: " + *why,
                           "jobs[" + std::to_string(i) + "].resources");
        }
    }
    Estimate est = estimate_for(pool, id, source, jobs);
    for (const auto& [worker, live] : pool.roster().workers()) {
        if (live.record.state != WorkerState::banned) {
            ++est.workers_joined;
            est.workers_online += pool.roster().presence(worker, pool.now_ms()) == "online" ? 1 : 0;
        }
    }
    if (auto mine = pool.credit_desk().member_room(who.token_id, pool.now_ms())) {
        est.budget_room_micro = std::min(est.budget_room_micro.value_or(k_unlimited), *mine);
    }
    return est;
}

Result<GrantRecord> grant_credits(Coordinator& pool, const Principal& who, const std::string& team,
                                  std::int64_t amount_micro, std::optional<std::int64_t> expires_at,
                                  const std::string& note) {
    if (who.role != Role::admin) {
        return denied("only admins grant credits");
    }
    auto id = pool.tokens().team_named(team);
    if (!id) {
        return id.error();
    }
    Changes c;
    auto staged = pool.credit_desk().stage_grant(*id, amount_micro, expires_at, note, pool.now_ms(), c);
    if (!staged) {
        return staged.error();
    }
    const GrantRecord& g = *staged;
    nlohmann::json detail{{"grant", g.id}, {"amount_micro", amount_micro}, {"note", note}};
    if (expires_at) {
        detail["expires_at"] = *expires_at;
    }
    pool.audit(who.token_id, "credits.grant", "team `" + team + "`", detail.dump(), c);
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return g;
}

Result<credits::Entry> adjust_credits(Coordinator& pool, const Principal& who, const std::string& team,
                                      std::int64_t amount_micro, const std::string& note) {
    if (who.role != Role::admin) {
        return denied("only admins adjust balances");
    }
    auto id = pool.tokens().team_named(team);
    if (!id) {
        return id.error();
    }
    Changes c;
    auto e = pool.credit_desk().stage_adjustment(*id, amount_micro, note, pool.now_ms(), c);
    if (!e) {
        return e.error();
    }
    pool.audit(who.token_id, "credits.adjust", "team `" + team + "`",
               nlohmann::json{{"entry", e->id}, {"amount_micro", amount_micro}, {"note", note}}.dump(), c);
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return *e;
}

Result<CreditsView> credits_of(const Coordinator& pool, const Principal& who, const std::optional<std::string>& team,
                               std::size_t movements) {
    TeamId id;
    if ((who.role == Role::member || who.role == Role::worker) && who.team) {
        // A worker reads its owner team's credits: the owner sees its earnings with the identity
        // the machine already has (`gpupool worker status`).
        if (team && *team != pool.tokens().teams().at(*who.team).name) {
            return denied("members and workers see their own team's credits");
        }
        id = *who.team;
    } else if (who.role == Role::admin) {
        if (!team) {
            return invalid("admins name the team: set `team`", "team");
        }
        auto t = pool.tokens().team_named(*team);
        if (!t) {
            return t.error();
        }
        id = *t;
    } else {
        return denied("only team members, their workers and admins read credits");
    }
    const std::int64_t now = pool.now_ms();
    const TeamRecord& t = pool.tokens().teams().at(id);
    CreditsView v;
    v.team = id;
    v.name = t.name;
    v.balance_micro = pool.credit_desk().ledger().balance(credits::Account::of_team(id.value()));
    v.held_micro = pool.credit_desk().ledger().held_by_team(id.value());
    v.settling_micro = pool.credit_desk().ledger().balance(credits::Account::settling_of(id.value()));
    v.budget_day_micro = t.budget_day_micro;
    v.budget_week_micro = t.budget_week_micro;
    v.spent_day_micro = pool.credit_desk().ledger().spent_since(id.value(), now - k_day_ms);
    v.spent_week_micro = pool.credit_desk().ledger().spent_since(id.value(), now - k_week_ms);
    for (const TokenRecord* tok : pool.tokens().members_of(id)) { // oldest first
        if (tok->budget_day_micro || tok->budget_week_micro) {
            v.members.push_back(pool.credit_desk().member_budget(*tok, now));
        }
    }
    const auto acc = credits::Account::of_team(id.value());
    const auto settling = credits::Account::settling_of(id.value());
    const auto& entries = pool.credit_desk().ledger().entries();
    for (auto it = entries.rbegin(); it != entries.rend() && v.movements.size() < movements; ++it) {
        if (it->debit == acc || it->credit == acc || it->debit == settling || it->credit == settling ||
            it->payer == id.value()) {
            v.movements.push_back(*it);
        }
    }
    return v;
}

Result<Report> pool_report(const Coordinator& pool, const Principal& who, std::int64_t since_ms) {
    if (who.role != Role::admin) {
        return denied("only admins read the pool report");
    }
    Report r;
    r.since_ms = since_ms;
    std::map<std::int64_t, TeamReport> teams;
    for (const auto& [id, t] : pool.tokens().teams()) {
        TeamReport tr;
        tr.team = id;
        tr.name = t.name;
        tr.balance_micro = pool.credit_desk().ledger().balance(credits::Account::of_team(id.value()));
        tr.held_micro = pool.credit_desk().ledger().held_by_team(id.value());
        tr.settling_micro = pool.credit_desk().ledger().balance(credits::Account::settling_of(id.value()));
        teams[id.value()] = tr;
    }
    std::map<std::int64_t, Micro> earned_by_attempt;
    std::map<std::int64_t, CreditTotals> totals;
    for (const auto& e : pool.credit_desk().ledger().entries()) {
        if (e.at_ms < since_ms) {
            continue;
        }
        tally_entry(e, totals);
        if (e.reason == credits::EntryReason::charge || e.reason == credits::EntryReason::check_pay) {
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
    const std::int64_t now = pool.now_ms();
    std::map<WorkerId, WorkerReport> workers;
    for (const auto& [id, w] : pool.roster().workers()) {
        workers[id] = WorkerReport{id, w.record.name, w.record.team, 0.0, 0, 0, 0, 0, 0};
    }
    for (const auto& [id, a] : pool.job_book().attempts()) {
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
    r.pool_fee_micro = pool.credit_desk().ledger().balance(credits::Account::pool_fee());
    r.escrow_micro = pool.credit_desk().ledger().balance(credits::Account::escrow());
    for (const auto& [account, balance] : pool.credit_desk().ledger().balances()) {
        r.settling_micro += account.kind == credits::AccountKind::settling ? balance : 0;
    }
    r.issuer_micro = pool.credit_desk().ledger().balance(credits::Account::issuer());
    return r;
}

Status set_budget(Coordinator& pool, const Principal& who, const std::string& team,
                  std::optional<std::int64_t> day_micro, std::optional<std::int64_t> week_micro) {
    BudgetChange change{team};
    change.day = day_micro ? CapChange::set(*day_micro) : CapChange::remove();
    change.week = week_micro ? CapChange::set(*week_micro) : CapChange::remove();
    auto r = change_budget(pool, who, change);
    return r ? Status{} : Status(r.error());
}

Result<MemberBudget> change_budget(Coordinator& pool, const Principal& who, const BudgetChange& change) {
    if (who.role != Role::admin) {
        return denied("only admins set budgets");
    }
    auto id = pool.tokens().team_named(change.team);
    if (!id) {
        return id.error();
    }
    for (const auto& [cap, field] : {std::pair{&change.day, "day_micro"}, std::pair{&change.week, "week_micro"}}) {
        if (cap->kind == CapChange::Kind::set && cap->micro < 0) {
            return make_error(ErrorCode::invalid_input, "a budget is 0 or more", field);
        }
    }
    Changes c;
    const std::int64_t now = pool.now_ms();
    if (change.member.empty()) {
        TeamRecord t = pool.tokens().teams().at(*id);
        t.budget_day_micro = applied(change.day, t.budget_day_micro);
        t.budget_week_micro = applied(change.week, t.budget_week_micro);
        c.teams.push_back(t);
        pool.audit(who.token_id, "budget.team", "team `" + change.team + "`",
                   budget_detail(t.budget_day_micro, t.budget_week_micro), c);
        if (auto st = pool.commit(c); !st) {
            return st.error();
        }
        MemberBudget out;
        out.day_micro = t.budget_day_micro;
        out.week_micro = t.budget_week_micro;
        out.spent_day_micro = pool.credit_desk().ledger().spent_since(id->value(), now - k_day_ms);
        out.spent_week_micro = pool.credit_desk().ledger().spent_since(id->value(), now - k_week_ms);
        out.held_micro = pool.credit_desk().ledger().held_by_team(id->value());
        return out;
    }
    auto token = pool.tokens().member_token(*id, change.member);
    if (!token) {
        return token.error();
    }
    TokenRecord t = **token;
    t.budget_day_micro = applied(change.day, t.budget_day_micro);
    t.budget_week_micro = applied(change.week, t.budget_week_micro);
    c.tokens.push_back(t);
    pool.audit(who.token_id, "budget.member",
               "member token " + std::to_string(t.id.value()) + " `" + t.label + "` of team `" + change.team + "`",
               budget_detail(t.budget_day_micro, t.budget_week_micro), c);
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return pool.credit_desk().member_budget(t, now);
}

Result<WorkerEarnings> worker_earnings(const Coordinator& pool, const Principal& who, WorkerId worker) {
    if (who.role != Role::admin && who.role != Role::worker && who.role != Role::member) {
        return denied("a worker's earnings are read by the worker, its team's members and admins");
    }
    const LiveWorker* live = pool.roster().find(worker);
    const bool mine =
        live != nullptr && (who.role == Role::admin || (who.role == Role::worker && who.worker == worker) ||
                            (who.role == Role::member && who.team && *who.team == live->record.team));
    if (!mine) {
        return not_found("no worker " + std::to_string(worker.value()) + " among your team's workers");
    }
    const store::WorkerRecord& w = live->record;
    WorkerEarnings e;
    e.worker = worker;
    e.name = w.name;
    e.team = w.team;
    e.team_name = pool.tokens().team_name(w.team);
    const std::int64_t now = pool.now_ms();
    e.day_start_ms = utc_day_start_ms(now);
    e.week_start_ms = utc_week_start_ms(now);
    std::set<std::int64_t> earning;
    for (const auto& entry : pool.credit_desk().ledger().entries()) {
        const bool charge =
            entry.reason == credits::EntryReason::charge || entry.reason == credits::EntryReason::check_pay;
        const bool refund =
            entry.reason == credits::EntryReason::refund && entry.debit.kind != credits::AccountKind::pool_fee;
        if ((!charge && !refund) || entry.attempt == 0) {
            continue;
        }
        const auto a = pool.job_book().attempts().find(AttemptId(entry.attempt));
        if (a == pool.job_book().attempts().end() || a->second.worker != worker) {
            continue;
        }
        const std::int64_t amount = charge ? entry.amount : -entry.amount;
        e.total_micro += amount;
        e.week_micro += entry.at_ms >= e.week_start_ms ? amount : 0;
        e.today_micro += entry.at_ms >= e.day_start_ms ? amount : 0;
        if (charge) {
            earning.insert(entry.attempt);
        }
    }
    for (const std::int64_t attempt : earning) {
        e.settling_micro += pool.credit_desk().ledger().earnings(attempt).settling;
    }
    e.attempts = static_cast<std::int64_t>(earning.size());
    return e;
}

// Refuses a submission (or a retry) of `jobs` jobs its team (or its submitting member) cannot fund
// by the estimate.
Status detail::check_funded(const Coordinator& pool, const Principal& who, TeamId team, const Estimate& est,
                            std::size_t jobs, bool for_retry) {
    const std::string& name = pool.tokens().teams().at(team).name;
    const std::string verb = for_retry ? "retry" : "submit";
    const std::string what = std::string(for_retry ? "this retry (" : "this submission (") + std::to_string(jobs) +
                             (jobs == 1 ? " job" : " jobs") + ") is estimated at " +
                             credits_text(est.total_estimate_micro) + " (at most " + credits_text(est.total_max_micro) +
                             ")";
    const std::string hint = "; ask an admin for a grant (`gpupool admin grant " + name + " AMOUNT`), or " + verb +
                             " with --allow-unfunded to queue it until funds arrive";
    if (est.total_estimate_micro > est.available_micro) {
        return make_error(ErrorCode::conflict,
                          what + " but team `" + name + "` has " + credits_text(est.available_micro) + " available" +
                              hint,
                          "credits");
    }
    if (est.budget_room_micro && est.total_estimate_micro > *est.budget_room_micro) {
        return make_error(ErrorCode::conflict,
                          what + " but team `" + name + "`'s budget allows " +
                              credits_text(std::max<Micro>(*est.budget_room_micro, 0)) + " more now" + hint,
                          "credits");
    }
    if (auto mine = pool.credit_desk().member_room(who.token_id, pool.now_ms());
        mine && est.total_estimate_micro > *mine) {
        const TokenRecord* t = pool.tokens().token(who.token_id);
        return make_error(ErrorCode::conflict,
                          what + " but your own budget (member `" + (t ? t->label : std::string()) + "`) allows " +
                              credits_text(std::max<Micro>(*mine, 0)) + " more now; ask an admin to raise it " +
                              "(`gpupool admin budget " + name + " --member ...`), or " + verb + " with " +
                              "--allow-unfunded to queue it until your budget has room",
                          "credits");
    }
    return {};
}

} // namespace gpupool::coordinator
