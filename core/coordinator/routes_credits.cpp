// The credits routes: grants, adjustments, budgets, a team's balance and movements, one worker's
// earnings for its owner, the admins' report, and estimates of a submission's cost.
#include "core/coordinator/service_impl.hpp"

#include "core/api/submit.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

json entry_json(const credits::Entry& e) {
    json j = {{"id", e.id},
              {"at", e.at_ms},
              {"debit", credits::to_string(e.debit)},
              {"credit", credits::to_string(e.credit)},
              {"amount_micro", e.amount},
              {"reason", credits::to_string(e.reason)},
              {"note", e.note}};
    j["attempt"] = e.attempt != 0 ? json(e.attempt) : json();
    j["grant"] = e.grant != 0 ? json(e.grant) : json();
    j["payer_team"] = e.payer != 0 ? json(e.payer) : json();
    return j;
}

json member_budget_json(const MemberBudget& m) {
    return {{"token_id", m.token_id.value()},
            {"label", m.label},
            {"day_micro", opt_json(m.day_micro)},
            {"week_micro", opt_json(m.week_micro)},
            {"spent_day_micro", m.spent_day_micro},
            {"spent_week_micro", m.spent_week_micro},
            {"held_micro", m.held_micro}};
}

net::Response grant(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json* body = &in.body;
    auto team = field<std::string>(*body, "team");
    auto amount = field<std::int64_t>(*body, "amount_micro");
    auto note = field<std::string>(*body, "note", std::string());
    auto expires = opt_field(*body, "expires_at");
    if (!team || !amount || !note || !expires) {
        return error_response(!team ? team.error() : !amount ? amount.error() : !note ? note.error() : expires.error());
    }
    auto g = svc.coord->grant(who, *team, *amount, *expires, *note);
    if (!g) {
        return error_response(g.error());
    }
    spdlog::info("grant {}: {} micro-credits to team `{}` by token {}", g->id, g->amount, util::escape_control(*team),
                 who.token_id.value());
    svc.schedule_soon();
    return ok({{"grant", g->id},
               {"team", *team},
               {"amount_micro", g->amount},
               {"expires_at", opt_json(g->expires_at)},
               {"balance_micro", svc.coord->ledger().balance(credits::Account::of_team(g->team.value()))}},
              201);
}

net::Response adjust(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json* body = &in.body;
    auto team = field<std::string>(*body, "team");
    auto amount = field<std::int64_t>(*body, "amount_micro");
    auto note = field<std::string>(*body, "note", std::string());
    if (!team || !amount || !note) {
        return error_response(!team ? team.error() : !amount ? amount.error() : note.error());
    }
    auto e = svc.coord->adjust(who, *team, *amount, *note);
    if (!e) {
        return error_response(e.error());
    }
    spdlog::info("adjustment {}: {} micro-credits for team `{}` by token {} ({})", e->id, *amount,
                 util::escape_control(*team), who.token_id.value(), util::escape_control(*note));
    svc.schedule_soon();
    json out = entry_json(*e);
    out["team"] = *team;
    return ok(out, 201);
}

net::Response change_budget(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json& body = in.body;
    auto team = field<std::string>(body, "team");
    auto member = field<std::string>(body, "member", std::string());
    if (!team || !member) {
        return error_response(!team ? team.error() : member.error());
    }
    BudgetChange change{*team, *member};
    // A cap left out keeps its value; null removes it.
    for (auto [cap, key] : {std::pair{&change.day, "day_micro"}, std::pair{&change.week, "week_micro"}}) {
        if (!body.contains(key)) {
            continue;
        }
        auto v = opt_field(body, key);
        if (!v) {
            return error_response(v.error());
        }
        *cap = *v ? CapChange::set(**v) : CapChange::remove();
    }
    auto b = svc.coord->change_budget(who, change);
    if (!b) {
        return error_response(b.error());
    }
    auto cap = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("none"); };
    spdlog::info("budget of {}team `{}`: {} per day, {} per week (micro-credits) by token {}",
                 member->empty() ? "" : "member `" + util::escape_control(b->label) + "` of ",
                 util::escape_control(*team), cap(b->day_micro), cap(b->week_micro), who.token_id.value());
    svc.schedule_soon();
    json out = {{"team", *team}, {"day_micro", opt_json(b->day_micro)}, {"week_micro", opt_json(b->week_micro)}};
    if (!member->empty()) {
        out["member"] = member_budget_json(*b);
    }
    return ok(out);
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
    auto v = svc.coord->credits_of(who, team, static_cast<std::size_t>(limit));
    if (!v) {
        return error_response(v.error());
    }
    json moves = json::array();
    for (const auto& e : v->movements) {
        json m = entry_json(e);
        // In the reader's words: team names, and the job an attempt's row is about (its name
        // only for the team's own jobs).
        m["payer_team_name"] = e.payer != 0 ? json(svc.coord->tokens().team_name(TeamId(e.payer))) : json();
        m["job"] = json();
        m["job_name"] = json();
        if (e.attempt != 0) {
            if (const JobRecord* j = svc.coord->job_of_attempt(AttemptId(e.attempt))) {
                m["job"] = j->id.value();
                m["job_name"] = j->team == v->team ? json(j->spec.name) : json();
            }
        }
        moves.push_back(std::move(m));
    }
    json members = json::array();
    for (const auto& m : v->members) {
        members.push_back(member_budget_json(m));
    }
    return ok({{"team", v->name},
               {"team_id", v->team.value()},
               {"balance_micro", v->balance_micro},
               {"held_micro", v->held_micro},
               {"settling_micro", v->settling_micro},
               {"budget_day_micro", opt_json(v->budget_day_micro)},
               {"budget_week_micro", opt_json(v->budget_week_micro)},
               {"spent_day_micro", v->spent_day_micro},
               {"spent_week_micro", v->spent_week_micro},
               {"members", members},
               {"movements", moves}});
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
    auto rep = svc.coord->report(who, since);
    if (!rep) {
        return error_response(rep.error());
    }
    json teams = json::array();
    for (const auto& t : rep->teams) {
        teams.push_back({{"team", t.name},
                         {"team_id", t.team.value()},
                         {"granted_micro", t.granted_micro},
                         {"earned_micro", t.earned_micro},
                         {"spent_micro", t.spent_micro},
                         {"balance_micro", t.balance_micro},
                         {"held_micro", t.held_micro},
                         {"settling_micro", t.settling_micro},
                         {"refunded_micro", t.refunded_micro}});
    }
    json workers = json::array();
    for (const auto& w : rep->workers) {
        workers.push_back({{"worker", w.worker.value()},
                           {"name", w.name},
                           {"team_id", w.team.value()},
                           {"gpu_hours", w.gpu_hours},
                           {"attempts", w.attempts},
                           {"failures", w.failures},
                           {"earned_micro", w.earned_micro},
                           {"voided", w.voided},
                           {"owner_preempted", w.owner_preempted}});
    }
    return ok({{"since", rep->since_ms},
               {"teams", teams},
               {"workers", workers},
               {"pool_fee_micro", rep->pool_fee_micro},
               {"escrow_micro", rep->escrow_micro},
               {"settling_micro", rep->settling_micro},
               {"issuer_micro", rep->issuer_micro}});
}

// The body is a submission's, read where it was parsed (k_submission), off this thread.
net::Response estimate(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const api::SubmitRequest& body = *in.submission;
    auto est = svc.coord->estimate(who, body.source, body.jobs, body.team);
    if (!est) {
        return error_response(est.error());
    }
    json list = json::array();
    for (const auto& j : est->jobs) {
        list.push_back({{"name", j.name},
                        {"gpu_model", j.gpu_model},
                        {"price_micro_per_hour", j.price_micro_per_hour},
                        {"max_micro", j.max_micro},
                        {"estimate_micro", j.estimate_micro},
                        {"runtime_s", j.runtime_s},
                        {"history_runs", j.history_runs}});
    }
    return ok({{"jobs", list},
               {"total_max_micro", est->total_max_micro},
               {"total_estimate_micro", est->total_estimate_micro},
               {"available_micro", est->available_micro},
               {"budget_room_micro", opt_json(est->budget_room_micro)},
               {"enforced", est->enforced},
               {"workers_joined", est->workers_joined},
               {"workers_online", est->workers_online}});
}

// POST /v1/recipes/history {"recipes": [{"recipe": NAME, "repo": URL}, ...]} (at most 500): the
// caller's team's runs, and every team's for the pool's public repositories (recipe_history).
net::Response recipe_history(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    constexpr std::size_t k_max_recipes = 500;
    const json& body = in.body;
    const auto it = body.find("recipes");
    if (it == body.end() || !it->is_array() || it->size() > k_max_recipes) {
        return error_response(
            make_error(ErrorCode::invalid_input, "expected an array of at most 500 {recipe, repo} objects", "recipes"));
    }
    std::vector<recipe::Origin> asked;
    for (std::size_t i = 0; i < it->size(); ++i) {
        const std::string f = "recipes[" + std::to_string(i) + "]";
        const json& o = (*it)[i];
        if (!o.is_object() || !o.contains("recipe") || !o["recipe"].is_string() || !o.contains("repo") ||
            !o["repo"].is_string()) {
            return error_response(
                make_error(ErrorCode::invalid_input, "expected {\"recipe\": NAME, \"repo\": URL}", f));
        }
        recipe::Origin origin{o["recipe"].get<std::string>(), o["repo"].get<std::string>(), ""};
        if (auto st = recipe::check_origin(origin); !st) {
            return error_response(make_error(ErrorCode::invalid_input, st.error().message, f));
        }
        asked.push_back(std::move(origin));
    }
    json list = json::array();
    for (const auto& h : svc.coord->recipe_history(who, asked)) {
        list.push_back({{"recipe", h.recipe.recipe},
                        {"repo", h.recipe.repo},
                        {"runs", h.runs},
                        {"median_runtime_s", h.median_runtime_s},
                        {"median_cost_micro", h.median_cost_micro}});
    }
    return ok({{"recipes", list}});
}

// GET /v1/workers/{id}/earnings: the worker itself, its team's members and admins
// (Coordinator::worker_earnings).
net::Response worker_earnings(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto e = svc.coord->worker_earnings(who, WorkerId(*id));
    if (!e) {
        return error_response(e.error());
    }
    return ok({{"worker", e->worker.value()},
               {"name", e->name},
               {"team", e->team_name},
               {"team_id", e->team.value()},
               {"day_start_ms", e->day_start_ms},
               {"week_start_ms", e->week_start_ms},
               {"today_micro", e->today_micro},
               {"week_micro", e->week_micro},
               {"total_micro", e->total_micro},
               {"settling_micro", e->settling_micro},
               {"attempts", e->attempts}});
}

} // namespace

void add_credit_routes(ServiceState& s, net::Router& r) {
    s.on(r, "POST", "/v1/admin/grants", grant);
    s.on(r, "POST", "/v1/admin/adjustments", adjust);
    s.on(r, "POST", "/v1/admin/budgets", change_budget);
    s.on(r, "GET", "/v1/credits", show_credits, k_no_json_body);
    s.on(r, "GET", "/v1/workers/{id}/earnings", worker_earnings, k_no_json_body);
    s.on(r, "GET", "/v1/admin/report", report, k_no_json_body);
    s.on(r, "POST", "/v1/estimate", estimate, k_submission);
    s.on(r, "POST", "/v1/recipes/history", recipe_history, Accepts{k_max_json_body_bytes, {Role::member, Role::admin}});
}

} // namespace gpupool::coordinator::service_detail
