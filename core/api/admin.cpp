#include "core/api/admin.hpp"

#include "core/api/field_reader.hpp"

namespace gpupool::api {

using nlohmann::json;

namespace {

// What the coordinator writes is not trusted to be of the right type; its sizes are the body's.
constexpr std::int64_t k_admin_lo = k_min_integer;
constexpr std::int64_t k_admin_hi = k_max_integer;
constexpr std::size_t k_admin_text = std::size_t{1} << 30;

json text_or_null(const std::optional<std::string>& s) {
    return s ? json(*s) : json();
}

// A JSON value the coordinator passes on as it stored it: taken as it is.
json passed_on(const json& j, const char* key) {
    return j.is_object() && j.contains(key) ? j[key] : json();
}

} // namespace

json to_json(const TeamCreateRequest& t) {
    return {{"name", t.name}, {"weight", t.weight}};
}

Result<TeamCreateRequest> team_create_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    TeamCreateRequest t;
    t.name = r.text("name", k_max_text_bytes);
    t.weight = r.integer("weight", k_admin_lo, k_admin_hi, 1);
    return value_or_error(r, std::move(t));
}

json to_json(const TeamView& t) {
    return {{"id", t.id.value()}, {"name", t.name}, {"weight", t.weight}};
}

Result<TeamView> team_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    TeamView t;
    t.id = TeamId(r.integer("id", 1, k_admin_hi));
    t.name = r.text("name", k_admin_text);
    t.weight = r.integer("weight", k_admin_lo, k_admin_hi, 1);
    return value_or_error(r, std::move(t));
}

json to_json(const TeamList& list) {
    return {{"teams", array_json(list.teams)}};
}

Result<TeamList> team_list_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    TeamList list;
    read_each(r, "teams", false, list.teams, team_from_json);
    return value_or_error(r, std::move(list));
}

json to_json(const TokenCreateRequest& t) {
    return {{"role", t.role}, {"team", t.team}, {"label", t.label}, {"uses", t.uses}};
}

Result<TokenCreateRequest> token_create_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    TokenCreateRequest t;
    t.role = r.text("role", k_max_text_bytes);
    t.team = r.text("team", k_max_text_bytes, std::string());
    t.label = r.text("label", k_max_text_bytes, std::string());
    t.uses = r.integer("uses", k_admin_lo, k_admin_hi, 1);
    return value_or_error(r, std::move(t));
}

json to_json(const CreatedToken& t) {
    return {{"id", t.id.value()}, {"token", t.token}, {"role", t.role}, {"team", t.team}};
}

Result<CreatedToken> created_token_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    CreatedToken t;
    t.id = TokenId(r.integer("id", 1, k_admin_hi));
    t.token = r.text("token", k_admin_text);
    t.role = r.text("role", k_admin_text);
    t.team = r.text("team", k_admin_text, std::string());
    return value_or_error(r, std::move(t));
}

json to_json(const TokenView& t) {
    return {{"id", t.id.value()},
            {"role", t.role},
            {"team", text_or_null(t.team)},
            {"worker", id_or_null(t.worker)},
            {"label", t.label},
            {"created_at", t.created_at},
            {"revoked_at", or_null(t.revoked_at)},
            {"uses_left", or_null(t.uses_left)},
            {"last_used_at", or_null(t.last_used_at)}};
}

Result<TokenView> token_view_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    TokenView t;
    t.id = TokenId(r.integer("id", 1, k_admin_hi));
    t.role = r.text("role", k_admin_text);
    t.team = r.optional_text("team", k_admin_text);
    t.worker = optional_id<WorkerId>(r, "worker");
    t.label = r.text("label", k_admin_text, std::string());
    t.created_at = r.integer("created_at", k_admin_lo, k_admin_hi, 0);
    t.revoked_at = r.optional_integer("revoked_at", k_admin_lo, k_admin_hi);
    t.uses_left = r.optional_integer("uses_left", k_admin_lo, k_admin_hi);
    t.last_used_at = r.optional_integer("last_used_at", k_admin_lo, k_admin_hi);
    return value_or_error(r, std::move(t));
}

json to_json(const TokenList& list) {
    return {{"tokens", array_json(list.tokens)}};
}

Result<TokenList> token_list_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    TokenList list;
    read_each(r, "tokens", false, list.tokens, token_view_from_json);
    return value_or_error(r, std::move(list));
}

json to_json(const TokenRevoked& t) {
    return {{"revoked", t.revoked.value()}};
}

Result<TokenRevoked> token_revoked_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    TokenRevoked t{TokenId(r.integer("revoked", 1, k_admin_hi))};
    return value_or_error(r, t);
}

json to_json(const WorkerView& w) {
    return {{"id", w.id.value()},
            {"team", w.team.value()},
            {"team_name", w.team_name},
            {"name", w.name},
            {"state", w.state},
            {"presence", w.presence},
            {"sharing", w.sharing},
            {"sharing_changes_at_ms", or_null(w.sharing_changes_at_ms)},
            {"terms", w.terms ? to_json(*w.terms) : json()},
            {"last_seen_at", w.last_seen_at},
            {"model_mismatch", text_or_null(w.model_mismatch)},
            {"checks_agreed", w.checks_agreed},
            {"checks_disagreed", w.checks_disagreed},
            {"reliability", w.reliability},
            {"inventory", w.inventory}};
}

Result<WorkerView> worker_view_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    WorkerView w;
    w.id = WorkerId(r.integer("id", 1, k_admin_hi));
    w.team = TeamId(r.integer("team", 0, k_admin_hi, 0));
    w.team_name = r.text("team_name", k_admin_text, std::string());
    w.name = r.text("name", k_admin_text, std::string());
    w.state = r.text("state", k_admin_text, std::string());
    w.presence = r.text("presence", k_admin_text, std::string());
    w.sharing = r.text("sharing", k_admin_text, std::string());
    w.sharing_changes_at_ms = r.optional_integer("sharing_changes_at_ms", k_admin_lo, k_admin_hi);
    w.last_seen_at = r.integer("last_seen_at", k_admin_lo, k_admin_hi, 0);
    w.model_mismatch = r.optional_text("model_mismatch", k_admin_text);
    w.checks_agreed = r.integer("checks_agreed", 0, k_admin_hi, 0);
    w.checks_disagreed = r.integer("checks_disagreed", 0, k_admin_hi, 0);
    w.reliability = r.number("reliability", 0.0);
    w.inventory = passed_on(j, "inventory");
    if (const json terms = passed_on(j, "terms"); !terms.is_null() && !r.error()) {
        auto t = owner_terms_from_json(terms, r.name("terms"));
        t ? void(w.terms = std::move(*t)) : r.fail(t.error().message, t.error().field);
    }
    return value_or_error(r, std::move(w));
}

json to_json(const WorkerList& list) {
    return {{"workers", array_json(list.workers)}};
}

Result<WorkerList> worker_list_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    WorkerList list;
    read_each(r, "workers", false, list.workers, worker_view_from_json);
    return value_or_error(r, std::move(list));
}

json to_json(const WorkerStateChanged& w) {
    return {{"worker", w.worker.value()}, {"state", w.state}};
}

Result<WorkerStateChanged> worker_state_changed_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    WorkerStateChanged w;
    w.worker = WorkerId(r.integer("worker", 1, k_admin_hi));
    w.state = r.text("state", k_admin_text);
    return value_or_error(r, std::move(w));
}

json to_json(const BanRequest& b) {
    json out = json::object();
    if (b.void_since) {
        out["void_since"] = *b.void_since;
    }
    if (b.with_siblings) {
        out["with_siblings"] = true;
    }
    return out;
}

Result<BanRequest> ban_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    BanRequest b;
    b.void_since = r.optional_integer("void_since", k_admin_lo, k_admin_hi);
    b.with_siblings = r.boolean("with_siblings", false);
    return value_or_error(r, std::move(b));
}

json to_json(const BanSibling& s) {
    return {{"id", s.id.value()}, {"name", s.name}, {"state", s.state}, {"presence", s.presence}};
}

Result<BanSibling> ban_sibling_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    BanSibling s;
    s.id = WorkerId(r.integer("id", 1, k_admin_hi));
    s.name = r.text("name", k_admin_text, std::string());
    s.state = r.text("state", k_admin_text, std::string());
    s.presence = r.text("presence", k_admin_text, std::string());
    return value_or_error(r, std::move(s));
}

json to_json(const BanReply& b) {
    return {{"worker", b.worker.value()},
            {"state", b.state},
            {"voided_attempts", ids_json(b.voided_attempts)},
            {"requeued_jobs", ids_json(b.requeued_jobs)},
            {"refunded_micro", b.refunded_micro},
            {"siblings", array_json(b.siblings)},
            {"banned", ids_json(b.banned)}};
}

Result<BanReply> ban_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    BanReply b;
    b.worker = WorkerId(r.integer("worker", 1, k_admin_hi));
    b.state = r.text("state", k_admin_text, std::string());
    b.voided_attempts = read_ids<AttemptId>(r, "voided_attempts");
    b.requeued_jobs = read_ids<JobId>(r, "requeued_jobs");
    b.refunded_micro = r.integer("refunded_micro", k_admin_lo, k_admin_hi, 0);
    read_each(r, "siblings", false, b.siblings, ban_sibling_from_json);
    b.banned = read_ids<WorkerId>(r, "banned");
    return value_or_error(r, std::move(b));
}

json to_json(const AuditRecord& a) {
    json actor;
    if (a.actor) {
        actor = {{"id", a.actor->id.value()}, {"label", a.actor->label}};
    }
    return {{"id", a.id},         {"at", a.at},         {"actor", std::move(actor)},
            {"action", a.action}, {"target", a.target}, {"detail", a.detail.is_object() ? a.detail : json::object()}};
}

Result<AuditRecord> audit_record_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    AuditRecord a;
    a.id = r.integer("id", 1, k_admin_hi);
    a.at = r.integer("at", k_admin_lo, k_admin_hi, 0);
    a.action = r.text("action", k_admin_text);
    a.target = r.text("target", k_admin_text, std::string());
    if (const json actor = passed_on(j, "actor"); !actor.is_null()) {
        FieldReader who(actor, r.name("actor"));
        who.object();
        AuditActor found{TokenId(who.integer("id", 1, k_admin_hi)), who.text("label", k_admin_text, std::string())};
        who.error() ? r.fail(who.error()->message, who.error()->field) : void(a.actor = std::move(found));
    }
    const json detail = passed_on(j, "detail");
    if (!detail.is_null() && !detail.is_object()) {
        r.fail(std::string("expected a JSON object, got ") + detail.type_name(), r.name("detail"));
    }
    a.detail = detail.is_object() ? detail : json::object();
    return value_or_error(r, std::move(a));
}

json to_json(const AuditList& list) {
    return {{"audit", array_json(list.audit)}};
}

Result<AuditList> audit_list_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    AuditList list;
    read_each(r, "audit", false, list.audit, audit_record_from_json);
    return value_or_error(r, std::move(list));
}

json to_json(const Whoami& w) {
    return {{"role", w.role},
            {"token_id", w.token_id.value()},
            {"label", w.label},
            {"team", text_or_null(w.team)},
            {"worker", id_or_null(w.worker)}};
}

Result<Whoami> whoami_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    Whoami w;
    w.role = r.text("role", k_admin_text);
    w.token_id = TokenId(r.integer("token_id", 0, k_admin_hi, 0));
    w.label = r.text("label", k_admin_text, std::string());
    w.team = r.optional_text("team", k_admin_text);
    w.worker = optional_id<WorkerId>(r, "worker");
    return value_or_error(r, std::move(w));
}

} // namespace gpupool::api
