#include "core/api/credits.hpp"

#include "core/api/field_reader.hpp"
#include "core/recipe/field_rules.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::api {

using nlohmann::json;

namespace {

// What the coordinator writes is not trusted to be of the right type; its sizes are the body's.
constexpr std::int64_t k_credits_lo = k_min_integer;
constexpr std::int64_t k_credits_hi = k_max_integer;
constexpr std::size_t k_credits_text = std::size_t{1} << 30;

std::int64_t read_micro(FieldReader& r, const char* key) {
    return r.integer(key, k_credits_lo, k_credits_hi, 0);
}

std::optional<std::int64_t> read_optional_micro(FieldReader& r, const char* key) {
    return r.optional_integer(key, k_credits_lo, k_credits_hi);
}

// The entry's members, written into `out` (a movement or an adjustment adds its own).
void put_ledger_entry(json& out, const LedgerEntry& e) {
    out["id"] = e.id;
    out["at"] = e.at;
    out["debit"] = e.debit;
    out["credit"] = e.credit;
    out["amount_micro"] = e.amount_micro;
    out["reason"] = e.reason;
    out["note"] = e.note;
    out["attempt"] = id_or_null(e.attempt);
    out["grant"] = or_null(e.grant);
    out["payer_team"] = id_or_null(e.payer_team);
}

LedgerEntry read_ledger_entry(FieldReader& r) {
    LedgerEntry e;
    e.id = r.integer("id", 0, k_credits_hi);
    e.at = r.integer("at", k_credits_lo, k_credits_hi, 0);
    e.debit = r.text("debit", k_credits_text);
    e.credit = r.text("credit", k_credits_text);
    e.amount_micro = r.integer("amount_micro", k_credits_lo, k_credits_hi);
    e.reason = r.text("reason", k_credits_text);
    e.note = r.text("note", k_credits_text, std::string());
    e.attempt = optional_id<AttemptId>(r, "attempt");
    e.grant = r.optional_integer("grant", 1, k_credits_hi);
    e.payer_team = optional_id<TeamId>(r, "payer_team");
    return e;
}

// A request's text member: the service's limit for names and notes.
std::string read_request_text(FieldReader& r, const char* key, std::optional<std::string> fallback = std::nullopt) {
    return r.text(key, k_max_text_bytes, std::move(fallback));
}

} // namespace

json to_json(const LedgerEntry& e) {
    json out = json::object();
    put_ledger_entry(out, e);
    return out;
}

Result<LedgerEntry> ledger_entry_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    LedgerEntry e = read_ledger_entry(r);
    return value_or_error(r, std::move(e));
}

json to_json(const Movement& m) {
    json out = to_json(m.entry);
    out["payer_team_name"] = m.payer_team_name ? json(*m.payer_team_name) : json();
    out["job"] = id_or_null(m.job);
    out["job_name"] = m.job_name ? json(*m.job_name) : json();
    return out;
}

Result<Movement> movement_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    Movement m;
    m.entry = read_ledger_entry(r);
    m.payer_team_name = r.optional_text("payer_team_name", k_credits_text);
    m.job = optional_id<JobId>(r, "job");
    m.job_name = r.optional_text("job_name", k_credits_text);
    return value_or_error(r, std::move(m));
}

json to_json(const MemberBudgetView& m) {
    return {{"token_id", m.token_id.value()},
            {"label", m.label},
            {"day_micro", or_null(m.day_micro)},
            {"week_micro", or_null(m.week_micro)},
            {"spent_day_micro", m.spent_day_micro},
            {"spent_week_micro", m.spent_week_micro},
            {"held_micro", m.held_micro}};
}

Result<MemberBudgetView> member_budget_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    MemberBudgetView m;
    m.token_id = TokenId(r.integer("token_id", 1, k_credits_hi));
    m.label = r.text("label", k_credits_text, std::string());
    m.day_micro = read_optional_micro(r, "day_micro");
    m.week_micro = read_optional_micro(r, "week_micro");
    m.spent_day_micro = read_micro(r, "spent_day_micro");
    m.spent_week_micro = read_micro(r, "spent_week_micro");
    m.held_micro = read_micro(r, "held_micro");
    return value_or_error(r, std::move(m));
}

json to_json(const CreditsReply& c) {
    return {{"team", c.team},
            {"team_id", c.team_id.value()},
            {"balance_micro", c.balance_micro},
            {"held_micro", c.held_micro},
            {"settling_micro", c.settling_micro},
            {"budget_day_micro", or_null(c.budget_day_micro)},
            {"budget_week_micro", or_null(c.budget_week_micro)},
            {"spent_day_micro", c.spent_day_micro},
            {"spent_week_micro", c.spent_week_micro},
            {"members", array_json(c.members)},
            {"movements", array_json(c.movements)}};
}

Result<CreditsReply> credits_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    CreditsReply c;
    c.team = r.text("team", k_credits_text);
    c.team_id = TeamId(r.integer("team_id", 1, k_credits_hi));
    c.balance_micro = read_micro(r, "balance_micro");
    c.held_micro = read_micro(r, "held_micro");
    c.settling_micro = read_micro(r, "settling_micro");
    c.budget_day_micro = read_optional_micro(r, "budget_day_micro");
    c.budget_week_micro = read_optional_micro(r, "budget_week_micro");
    c.spent_day_micro = read_micro(r, "spent_day_micro");
    c.spent_week_micro = read_micro(r, "spent_week_micro");
    read_each(r, "members", false, c.members, member_budget_from_json);
    read_each(r, "movements", false, c.movements, movement_from_json);
    return value_or_error(r, std::move(c));
}

json to_json(const GrantRequest& g) {
    json out = {{"team", g.team}, {"amount_micro", g.amount_micro}, {"note", g.note}};
    if (g.expires_at) {
        out["expires_at"] = *g.expires_at;
    }
    return out;
}

Result<GrantRequest> grant_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    GrantRequest g;
    g.team = read_request_text(r, "team");
    g.amount_micro = r.integer("amount_micro", k_credits_lo, k_credits_hi);
    g.note = read_request_text(r, "note", std::string());
    g.expires_at = read_optional_micro(r, "expires_at");
    return value_or_error(r, std::move(g));
}

json to_json(const GrantReply& g) {
    return {{"grant", g.grant},
            {"team", g.team},
            {"amount_micro", g.amount_micro},
            {"expires_at", or_null(g.expires_at)},
            {"balance_micro", g.balance_micro}};
}

Result<GrantReply> grant_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    GrantReply g;
    g.grant = r.integer("grant", 1, k_credits_hi);
    g.team = r.text("team", k_credits_text, std::string());
    g.amount_micro = read_micro(r, "amount_micro");
    g.expires_at = read_optional_micro(r, "expires_at");
    g.balance_micro = read_micro(r, "balance_micro");
    return value_or_error(r, std::move(g));
}

json to_json(const AdjustRequest& a) {
    return {{"team", a.team}, {"amount_micro", a.amount_micro}, {"note", a.note}};
}

Result<AdjustRequest> adjust_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    AdjustRequest a;
    a.team = read_request_text(r, "team");
    a.amount_micro = r.integer("amount_micro", k_credits_lo, k_credits_hi);
    a.note = read_request_text(r, "note", std::string());
    return value_or_error(r, std::move(a));
}

json to_json(const AdjustReply& a) {
    json out = to_json(a.entry);
    out["team"] = a.team;
    return out;
}

Result<AdjustReply> adjust_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    AdjustReply a;
    a.entry = read_ledger_entry(r);
    a.team = r.text("team", k_credits_text, std::string());
    return value_or_error(r, std::move(a));
}

json to_json(const BudgetRequest& b) {
    json out = {{"team", b.team}};
    if (!b.member.empty()) {
        out["member"] = b.member;
    }
    for (auto [cap, key] : {std::pair{&b.day, "day_micro"}, std::pair{&b.week, "week_micro"}}) {
        if (cap->change) {
            out[key] = or_null(cap->micro);
        }
    }
    return out;
}

Result<BudgetRequest> budget_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    BudgetRequest b;
    b.team = read_request_text(r, "team");
    b.member = read_request_text(r, "member", std::string());
    for (auto [cap, key] : {std::pair{&b.day, "day_micro"}, std::pair{&b.week, "week_micro"}}) {
        // Present, even as null, is a change; FieldReader reads absent and null alike.
        cap->change = body.is_object() && body.contains(key);
        cap->micro = read_optional_micro(r, key);
    }
    return value_or_error(r, std::move(b));
}

json to_json(const BudgetReply& b) {
    json out = {{"team", b.team}, {"day_micro", or_null(b.day_micro)}, {"week_micro", or_null(b.week_micro)}};
    if (b.member) {
        out["member"] = to_json(*b.member);
    }
    return out;
}

Result<BudgetReply> budget_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    BudgetReply b;
    b.team = r.text("team", k_credits_text, std::string());
    b.day_micro = read_optional_micro(r, "day_micro");
    b.week_micro = read_optional_micro(r, "week_micro");
    if (j.is_object() && j.contains("member") && !j["member"].is_null() && !r.error()) {
        auto m = member_budget_from_json(j["member"], "member");
        m ? void(b.member = std::move(*m)) : r.fail(m.error().message, m.error().field);
    }
    return value_or_error(r, std::move(b));
}

namespace {

json team_credits_json(const TeamCredits& t) {
    return {{"team", t.team},
            {"team_id", t.team_id.value()},
            {"granted_micro", t.granted_micro},
            {"earned_micro", t.earned_micro},
            {"spent_micro", t.spent_micro},
            {"balance_micro", t.balance_micro},
            {"held_micro", t.held_micro},
            {"settling_micro", t.settling_micro},
            {"refunded_micro", t.refunded_micro}};
}

Result<TeamCredits> team_credits_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    TeamCredits t;
    t.team = r.text("team", k_credits_text);
    t.team_id = TeamId(r.integer("team_id", 0, k_credits_hi, 0));
    t.granted_micro = read_micro(r, "granted_micro");
    t.earned_micro = read_micro(r, "earned_micro");
    t.spent_micro = read_micro(r, "spent_micro");
    t.balance_micro = read_micro(r, "balance_micro");
    t.held_micro = read_micro(r, "held_micro");
    t.settling_micro = read_micro(r, "settling_micro");
    t.refunded_micro = read_micro(r, "refunded_micro");
    return value_or_error(r, std::move(t));
}

json worker_credits_json(const WorkerCredits& w) {
    return {{"worker", w.worker.value()},     {"name", w.name},         {"team_id", w.team_id.value()},
            {"gpu_hours", w.gpu_hours},       {"attempts", w.attempts}, {"failures", w.failures},
            {"earned_micro", w.earned_micro}, {"voided", w.voided},     {"owner_preempted", w.owner_preempted}};
}

Result<WorkerCredits> worker_credits_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    WorkerCredits w;
    w.worker = WorkerId(r.integer("worker", 1, k_credits_hi));
    w.name = r.text("name", k_credits_text, std::string());
    w.team_id = TeamId(r.integer("team_id", 0, k_credits_hi, 0));
    w.gpu_hours = r.number("gpu_hours", 0.0);
    w.attempts = r.integer("attempts", 0, k_credits_hi, 0);
    w.failures = r.integer("failures", 0, k_credits_hi, 0);
    w.earned_micro = read_micro(r, "earned_micro");
    w.voided = r.integer("voided", 0, k_credits_hi, 0);
    w.owner_preempted = r.integer("owner_preempted", 0, k_credits_hi, 0); // absent from older coordinators
    return value_or_error(r, std::move(w));
}

} // namespace

json to_json(const CreditReport& rep) {
    json teams = json::array();
    for (const auto& t : rep.teams) {
        teams.push_back(team_credits_json(t));
    }
    json workers = json::array();
    for (const auto& w : rep.workers) {
        workers.push_back(worker_credits_json(w));
    }
    return {{"since", rep.since},
            {"teams", std::move(teams)},
            {"workers", std::move(workers)},
            {"pool_fee_micro", rep.pool_fee_micro},
            {"escrow_micro", rep.escrow_micro},
            {"settling_micro", rep.settling_micro},
            {"issuer_micro", rep.issuer_micro}};
}

Result<CreditReport> credit_report_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    CreditReport rep;
    rep.since = r.integer("since", k_credits_lo, k_credits_hi, 0);
    read_each(r, "teams", false, rep.teams, team_credits_from_json);
    read_each(r, "workers", false, rep.workers, worker_credits_from_json);
    rep.pool_fee_micro = read_micro(r, "pool_fee_micro");
    rep.escrow_micro = read_micro(r, "escrow_micro");
    rep.settling_micro = read_micro(r, "settling_micro");
    rep.issuer_micro = read_micro(r, "issuer_micro");
    return value_or_error(r, std::move(rep));
}

namespace {

json job_cost_json(const JobCost& c) {
    return {{"name", c.name},
            {"gpu_model", c.gpu_model},
            {"price_micro_per_hour", c.price_micro_per_hour},
            {"max_micro", c.max_micro},
            {"estimate_micro", c.estimate_micro},
            {"runtime_s", c.runtime_s},
            {"history_runs", c.history_runs}};
}

Result<JobCost> job_cost_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    JobCost c;
    c.name = r.text("name", k_credits_text, std::string());
    c.gpu_model = r.text("gpu_model", k_credits_text, std::string());
    c.price_micro_per_hour = read_micro(r, "price_micro_per_hour");
    c.max_micro = read_micro(r, "max_micro");
    c.estimate_micro = read_micro(r, "estimate_micro");
    c.runtime_s = r.integer("runtime_s", 0, k_credits_hi, 0);
    c.history_runs = r.integer("history_runs", 0, k_credits_hi, 0);
    return value_or_error(r, std::move(c));
}

} // namespace

json to_json(const EstimateReply& e) {
    json jobs = json::array();
    for (const auto& c : e.jobs) {
        jobs.push_back(job_cost_json(c));
    }
    json out = {{"jobs", std::move(jobs)},
                {"total_max_micro", e.total_max_micro},
                {"total_estimate_micro", e.total_estimate_micro},
                {"available_micro", e.available_micro},
                {"budget_room_micro", or_null(e.budget_room_micro)},
                {"enforced", e.enforced}};
    if (e.workers_joined) {
        out["workers_joined"] = *e.workers_joined;
    }
    if (e.workers_online) {
        out["workers_online"] = *e.workers_online;
    }
    return out;
}

Result<EstimateReply> estimate_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    EstimateReply e;
    read_each(r, "jobs", false, e.jobs, job_cost_from_json);
    e.total_max_micro = read_micro(r, "total_max_micro");
    e.total_estimate_micro = read_micro(r, "total_estimate_micro");
    e.available_micro = read_micro(r, "available_micro");
    e.budget_room_micro = read_optional_micro(r, "budget_room_micro");
    e.enforced = r.boolean("enforced", true);
    e.workers_joined = r.optional_integer("workers_joined", 0, k_credits_hi);
    e.workers_online = r.optional_integer("workers_online", 0, k_credits_hi);
    return value_or_error(r, std::move(e));
}

json to_json(const RecipeHistoryRequest& req) {
    json list = json::array();
    for (const auto& o : req.recipes) {
        list.push_back({{"recipe", o.recipe}, {"repo", o.repo}});
    }
    return {{"recipes", std::move(list)}};
}

Result<RecipeHistoryRequest> recipe_history_request_from_json(const json& body) {
    const json* list = body.is_object() && body.contains("recipes") ? &body["recipes"] : nullptr;
    if (list == nullptr || !list->is_array() || list->size() > k_max_history_recipes) {
        return invalid_input("expected an array of at most " + std::to_string(k_max_history_recipes) +
                                 " {recipe, repo} objects",
                             "recipes");
    }
    RecipeHistoryRequest req;
    for (std::size_t i = 0; i < list->size(); ++i) {
        const std::string at = "recipes[" + std::to_string(i) + "]";
        FieldReader r((*list)[i], at);
        r.object();
        recipe::Origin origin{r.text("recipe", k_credits_text), r.text("repo", k_credits_text), ""};
        if (r.error()) {
            return invalid_input("expected {\"recipe\": NAME, \"repo\": URL}", at);
        }
        if (auto st = recipe::check_origin(origin); !st) {
            return invalid_input(st.error().message, at);
        }
        req.recipes.push_back(std::move(origin));
    }
    return req;
}

namespace {

Result<RecipeRuns> recipe_runs_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    RecipeRuns h;
    h.recipe = r.text("recipe", k_credits_text);
    h.repo = r.text("repo", k_credits_text);
    h.runs = r.integer("runs", 0, k_credits_hi, 0);
    h.median_runtime_s = r.integer("median_runtime_s", 0, k_credits_hi, 0);
    h.median_cost_micro = read_micro(r, "median_cost_micro");
    return value_or_error(r, std::move(h));
}

} // namespace

json to_json(const RecipeHistoryReply& reply) {
    json list = json::array();
    for (const auto& h : reply.recipes) {
        list.push_back({{"recipe", h.recipe},
                        {"repo", h.repo},
                        {"runs", h.runs},
                        {"median_runtime_s", h.median_runtime_s},
                        {"median_cost_micro", h.median_cost_micro}});
    }
    return {{"recipes", std::move(list)}};
}

Result<RecipeHistoryReply> recipe_history_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    RecipeHistoryReply reply;
    read_each(r, "recipes", false, reply.recipes, recipe_runs_from_json);
    return value_or_error(r, std::move(reply));
}

json to_json(const WorkerEarningsReply& e) {
    return {{"worker", e.worker.value()},
            {"name", e.name},
            {"team", e.team},
            {"team_id", e.team_id.value()},
            {"day_start_ms", e.day_start_ms},
            {"week_start_ms", e.week_start_ms},
            {"today_micro", e.today_micro},
            {"week_micro", e.week_micro},
            {"total_micro", e.total_micro},
            {"settling_micro", e.settling_micro},
            {"attempts", e.attempts}};
}

Result<WorkerEarningsReply> worker_earnings_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    WorkerEarningsReply e;
    e.worker = WorkerId(r.integer("worker", 1, k_credits_hi));
    e.name = r.text("name", k_credits_text, std::string());
    e.team = r.text("team", k_credits_text, std::string());
    e.team_id = TeamId(r.integer("team_id", 0, k_credits_hi, 0));
    e.day_start_ms = r.integer("day_start_ms", k_credits_lo, k_credits_hi, 0);
    e.week_start_ms = r.integer("week_start_ms", k_credits_lo, k_credits_hi, 0);
    e.today_micro = read_micro(r, "today_micro");
    e.week_micro = read_micro(r, "week_micro");
    e.total_micro = read_micro(r, "total_micro");
    e.settling_micro = read_micro(r, "settling_micro");
    e.attempts = r.integer("attempts", 0, k_credits_hi, 0);
    return value_or_error(r, std::move(e));
}

} // namespace gpupool::api
