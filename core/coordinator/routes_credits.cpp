// The credits routes: grants, adjustments, budgets, a team's balance and movements, one worker's
// earnings for its owner, the admins' report, and estimates of a submission's cost.
#include "core/api/credits.hpp"
#include "core/api/submit.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "core/coordinator/service_impl.hpp"
#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

api::LedgerEntry entry_view(const credits::Entry& e) {
    api::LedgerEntry out;
    out.id = e.id;
    out.at = e.at_ms;
    out.debit = credits::to_string(e.debit);
    out.credit = credits::to_string(e.credit);
    out.amount_micro = e.amount;
    out.reason = credits::to_string(e.reason);
    out.note = e.note;
    out.attempt = e.attempt != 0 ? std::optional<AttemptId>(AttemptId(e.attempt)) : std::nullopt;
    out.grant = e.grant != 0 ? std::optional<std::int64_t>(e.grant) : std::nullopt;
    out.payer_team = e.payer != 0 ? std::optional<TeamId>(TeamId(e.payer)) : std::nullopt;
    return out;
}

api::MemberBudgetView member_budget_view(const MemberBudget& m) {
    return {m.token_id, m.label, m.day_micro, m.week_micro, m.spent_day_micro, m.spent_week_micro, m.held_micro};
}

net::Response grant(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto req = api::grant_request_from_json(in.body);
    if (!req) {
        return error_response(req.error());
    }
    auto g = coordinator::grant_credits(*svc.coord, who, req->team, req->amount_micro, req->expires_at, req->note);
    if (!g) {
        return error_response(g.error());
    }
    spdlog::info("grant {}: {} micro-credits to team `{}` by token {}", g->id, g->amount,
                 util::escape_control(req->team), who.token_id.value());
    svc.schedule_soon();
    const auto balance = svc.coord->credit_desk().ledger().balance(credits::Account::of_team(g->team.value()));
    return ok(api::to_json(api::GrantReply{g->id, req->team, g->amount, g->expires_at, balance}), 201);
}

net::Response adjust(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto req = api::adjust_request_from_json(in.body);
    if (!req) {
        return error_response(req.error());
    }
    auto e = coordinator::adjust_credits(*svc.coord, who, req->team, req->amount_micro, req->note);
    if (!e) {
        return error_response(e.error());
    }
    spdlog::info("adjustment {}: {} micro-credits for team `{}` by token {} ({})", e->id, req->amount_micro,
                 util::escape_control(req->team), who.token_id.value(), util::escape_control(req->note));
    svc.schedule_soon();
    return ok(api::to_json(api::AdjustReply{entry_view(*e), req->team}), 201);
}

CapChange cap_change(const api::CapSetting& cap) {
    if (!cap.change) {
        return CapChange::keep();
    }
    return cap.micro ? CapChange::set(*cap.micro) : CapChange::remove();
}

net::Response change_budget(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto req = api::budget_request_from_json(in.body);
    if (!req) {
        return error_response(req.error());
    }
    // A cap left out keeps its value; null removes it.
    const BudgetChange change{req->team, req->member, cap_change(req->day), cap_change(req->week)};
    auto b = coordinator::change_budget(*svc.coord, who, change);
    if (!b) {
        return error_response(b.error());
    }
    auto cap = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("none"); };
    spdlog::info("budget of {}team `{}`: {} per day, {} per week (micro-credits) by token {}",
                 req->member.empty() ? "" : "member `" + util::escape_control(b->label) + "` of ",
                 util::escape_control(req->team), cap(b->day_micro), cap(b->week_micro), who.token_id.value());
    svc.schedule_soon();
    api::BudgetReply out{req->team, b->day_micro, b->week_micro, std::nullopt};
    if (!req->member.empty()) {
        out.member = member_budget_view(*b);
    }
    return ok(api::to_json(out));
}

// A ledger row in the reader's words: team names, and the job an attempt's row is about (its name
// only for the team's own jobs).
api::Movement movement_view(ServiceState& svc, const CreditsView& v, const credits::Entry& e) {
    api::Movement m{entry_view(e)};
    if (e.payer != 0) {
        m.payer_team_name = svc.coord->tokens().team_name(TeamId(e.payer));
    }
    if (e.attempt != 0) {
        if (const JobRecord* j = svc.coord->job_book().job_of_attempt(AttemptId(e.attempt))) {
            m.job = j->id;
            if (j->team == v.team) {
                m.job_name = j->spec.name;
            }
        }
    }
    return m;
}

net::Response show_credits(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    std::optional<std::string> team;
    if (auto t = req.query_value("team"); !t.empty()) {
        team = t;
    }
    std::int64_t limit = 20;
    if (auto l = req.query_value("limit"); !l.empty()) {
        auto v = parse_int(l, "limit");
        if (!v || *v < 0 || *v > 10'000) {
            return error_response(v ? make_error(ErrorCode::invalid_input, "must be 0-10000", "limit") : v.error());
        }
        limit = *v;
    }
    auto v = coordinator::credits_of(*svc.coord, who, team, static_cast<std::size_t>(limit));
    if (!v) {
        return error_response(v.error());
    }
    api::CreditsReply out{v->name,
                          v->team,
                          v->balance_micro,
                          v->held_micro,
                          v->settling_micro,
                          v->budget_day_micro,
                          v->budget_week_micro,
                          v->spent_day_micro,
                          v->spent_week_micro};
    for (const auto& m : v->members) {
        out.members.push_back(member_budget_view(m));
    }
    for (const auto& e : v->movements) {
        out.movements.push_back(movement_view(svc, *v, e));
    }
    return ok(api::to_json(out));
}

net::Response report(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    std::int64_t since = 0;
    if (auto s = req.query_value("since"); !s.empty()) {
        auto v = parse_int(s, "since");
        if (!v) {
            return error_response(v.error());
        }
        since = *v;
    }
    auto rep = coordinator::pool_report(*svc.coord, who, since);
    if (!rep) {
        return error_response(rep.error());
    }
    api::CreditReport out;
    out.since = rep->since_ms;
    for (const auto& t : rep->teams) {
        out.teams.push_back({t.name, t.team, t.granted_micro, t.earned_micro, t.spent_micro, t.balance_micro,
                             t.held_micro, t.settling_micro, t.refunded_micro});
    }
    for (const auto& w : rep->workers) {
        out.workers.push_back({w.worker, w.name, w.team, w.gpu_hours, w.attempts, w.failures, w.earned_micro, w.voided,
                               w.owner_preempted});
    }
    out.pool_fee_micro = rep->pool_fee_micro;
    out.escrow_micro = rep->escrow_micro;
    out.settling_micro = rep->settling_micro;
    out.issuer_micro = rep->issuer_micro;
    return ok(api::to_json(out));
}

// The body is a submission's, read where it was parsed (k_submission), off this thread.
net::Response estimate(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const api::SubmitRequest& body = *in.submission;
    auto est = coordinator::estimate_cost(*svc.coord, who, body.source, body.jobs, body.team);
    if (!est) {
        return error_response(est.error());
    }
    api::EstimateReply out;
    for (const auto& j : est->jobs) {
        out.jobs.push_back(
            {j.name, j.gpu_model, j.price_micro_per_hour, j.max_micro, j.estimate_micro, j.runtime_s, j.history_runs});
    }
    out.total_max_micro = est->total_max_micro;
    out.total_estimate_micro = est->total_estimate_micro;
    out.available_micro = est->available_micro;
    out.budget_room_micro = est->budget_room_micro;
    out.enforced = est->enforced;
    out.workers_joined = est->workers_joined;
    out.workers_online = est->workers_online;
    return ok(api::to_json(out));
}

// POST /v1/recipes/history {"recipes": [{"recipe": NAME, "repo": URL}, ...]} (at most 500): the
// caller's team's runs, and every team's for the pool's public repositories (recipe_history).
net::Response recipe_history(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto asked = api::recipe_history_request_from_json(in.body);
    if (!asked) {
        return error_response(asked.error());
    }
    api::RecipeHistoryReply out;
    for (const auto& h : coordinator::recipe_history(*svc.coord, who, asked->recipes)) {
        out.recipes.push_back({h.recipe.recipe, h.recipe.repo, h.runs, h.median_runtime_s, h.median_cost_micro});
    }
    return ok(api::to_json(out));
}

// GET /v1/workers/{id}/earnings: the worker itself, its team's members and admins
// (credit_ops.hpp, worker_earnings).
net::Response read_worker_earnings(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto e = coordinator::worker_earnings(*svc.coord, who, WorkerId(*id));
    if (!e) {
        return error_response(e.error());
    }
    return ok(api::to_json(api::WorkerEarningsReply{e->worker, e->name, e->team_name, e->team, e->day_start_ms,
                                                    e->week_start_ms, e->today_micro, e->week_micro, e->total_micro,
                                                    e->settling_micro, e->attempts}));
}

} // namespace

void add_credit_routes(ServiceState& s, net::Router& r) {
    s.on(r, "POST", "/v1/admin/grants", grant);
    s.on(r, "POST", "/v1/admin/adjustments", adjust);
    s.on(r, "POST", "/v1/admin/budgets", change_budget);
    s.on(r, "GET", "/v1/credits", show_credits, k_no_json_body);
    s.on(r, "GET", "/v1/workers/{id}/earnings", read_worker_earnings, k_no_json_body);
    s.on(r, "GET", "/v1/admin/report", report, k_no_json_body);
    s.on(r, "POST", "/v1/estimate", estimate, k_submission);
    s.on(r, "POST", "/v1/recipes/history", recipe_history, Accepts{k_max_json_body_bytes, {Role::member, Role::admin}});
}

} // namespace gpupool::coordinator::service_detail
