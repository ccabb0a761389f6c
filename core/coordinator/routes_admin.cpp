// The admin and identity routes: teams, tokens, whoami, and the fleet as admins see it (list,
// drain, activate, ban).
#include "core/coordinator/service_impl.hpp"

#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

net::Response create_team(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json* body = &in.body;
    auto name = field<std::string>(*body, "name");
    auto weight = field<std::int64_t>(*body, "weight", std::int64_t{1});
    if (!name || !weight) {
        return error_response(!name ? name.error() : weight.error());
    }
    auto t = svc.coord->create_team(who, *name, *weight);
    if (!t) {
        return error_response(t.error());
    }
    spdlog::info("team {} `{}` created (weight {}) by token {}", t->id.value(), util::escape_control(t->name),
                 t->weight, who.token_id.value());
    return ok({{"id", t->id.value()}, {"name", t->name}, {"weight", t->weight}}, 201);
}

net::Response list_teams(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    if (who.role != Role::admin) {
        return error_response(make_error(ErrorCode::forbidden, "only admins list teams"));
    }
    json out = json::array();
    for (const auto& t : svc.coord->list_teams(who).value()) {
        out.push_back({{"id", t.id.value()}, {"name", t.name}, {"weight", t.weight}});
    }
    return ok({{"teams", out}});
}

net::Response create_token(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json* body = &in.body;
    auto role_name = field<std::string>(*body, "role");
    auto team = field<std::string>(*body, "team", std::string());
    auto label = field<std::string>(*body, "label", std::string());
    auto uses = field<std::int64_t>(*body, "uses", std::int64_t{1});
    if (!role_name || !team || !label || !uses) {
        return error_response(!role_name ? role_name.error()
                              : !team    ? team.error()
                              : !label   ? label.error()
                                         : uses.error());
    }
    auto role = role_from_string(*role_name);
    if (!role) {
        return error_response(
            make_error(ErrorCode::invalid_input, "expected admin, member or enroll", "role"));
    }
    auto tok = svc.coord->create_token(who, *role, *team, *label, *uses);
    if (!tok) {
        return error_response(tok.error());
    }
    spdlog::info("{} token {} created{} by token {}", to_string(tok->role), tok->id.value(),
                 team->empty() ? std::string() : " for team `" + util::escape_control(*team) + "`",
                 who.token_id.value());
    return ok({{"id", tok->id.value()}, {"token", tok->secret}, {"role", to_string(tok->role)}, {"team", *team}}, 201);
}

net::Response list_tokens(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    std::optional<std::string> team;
    if (auto t = req.query_value("team"); !t.empty()) {
        team = t;
    }
    auto list = svc.coord->list_tokens(who, team);
    if (!list) {
        return error_response(list.error());
    }
    json out = json::array();
    for (const auto& t : *list) {
        out.push_back({{"id", t.id.value()},
                       {"role", to_string(t.role)},
                       {"team", t.team ? json(svc.coord->team_name(*t.team)) : json()},
                       {"worker", t.worker ? json(t.worker->value()) : json()},
                       {"label", t.label},
                       {"created_at", t.created_at},
                       {"revoked_at", opt_json(t.revoked_at)},
                       {"uses_left", opt_json(t.uses_left)},
                       {"last_used_at", opt_json(svc.coord->last_used(t.id))}});
    }
    return ok({{"tokens", out}});
}

net::Response revoke_token(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto st = svc.coord->revoke_token(who, TokenId(*id));
    if (st) {
        spdlog::info("token {} revoked by token {}", *id, who.token_id.value());
    }
    return st ? ok({{"revoked", *id}}) : error_response(st.error());
}

net::Response list_workers(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    auto list = svc.coord->list_workers(who);
    if (!list) {
        return error_response(list.error());
    }
    json out = json::array();
    for (const auto& w : *list) {
        const auto says = svc.coord->owner_says(w.id);
        out.push_back({{"id", w.id.value()},
                       {"team", w.team.value()},
                       {"team_name", svc.coord->team_name(w.team)},
                       {"name", w.name},
                       {"state", to_string(w.state)},
                       {"presence", svc.coord->presence(w.id)},
                       {"sharing", api::to_string(says.sharing)},
                       {"sharing_changes_at_ms", says.changes_at_ms ? json(*says.changes_at_ms) : json()},
                       {"terms", says.terms ? api::to_json(*says.terms) : json()},
                       {"last_seen_at", w.last_seen_at},
                       {"inventory", json::parse(w.inventory_json, nullptr, false)}});
    }
    return ok({{"workers", out}});
}

net::Response set_worker_state(ServiceState& svc, const net::Request& req, const Principal& who, WorkerState to) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto st = svc.coord->set_worker_state(who, WorkerId(*id), to);
    if (st) {
        spdlog::info("worker {} set {} by token {}", *id, to_string(to), who.token_id.value());
    }
    return st ? ok({{"worker", *id}, {"state", to_string(to)}}) : error_response(st.error());
}

// A ban may void the worker's results since a time: {"void_since": ms} (optional).
net::Response ban_worker(ServiceState& svc, const net::Request& req, const Input& in, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto since = opt_field(in.body, "void_since");
    if (!since) {
        return error_response(since.error());
    }
    auto voided = svc.coord->ban_worker(who, WorkerId(*id), *since);
    if (!voided) {
        return error_response(voided.error());
    }
    spdlog::info("worker {} banned by token {}{}", *id, who.token_id.value(),
                 *since ? "; " + std::to_string(voided->attempts.size()) + " result(s) voided, " +
                              std::to_string(voided->refunded_micro) + " micro-credits refunded, " +
                              std::to_string(voided->requeued.size()) + " job(s) queued again"
                        : std::string());
    json attempts = json::array();
    for (AttemptId a : voided->attempts) {
        attempts.push_back(a.value());
    }
    json requeued = json::array();
    for (JobId j : voided->requeued) {
        requeued.push_back(j.value());
    }
    return ok({{"worker", *id},
               {"state", to_string(WorkerState::banned)},
               {"voided_attempts", attempts},
               {"requeued_jobs", requeued},
               {"refunded_micro", voided->refunded_micro}});
}

net::Response whoami(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    json out = {{"role", to_string(who.role)},
                {"token_id", who.token_id.value()},
                {"label", svc.coord->token_name(who.token_id)}};
    out["team"] = who.team ? json(svc.coord->team_name(*who.team)) : json();
    out["worker"] = who.worker ? json(who.worker->value()) : json();
    return ok(out);
}

} // namespace

void add_admin_routes(ServiceState& s, net::Router& r) {
    s.on(r, "POST", "/v1/admin/teams", create_team);
    s.on(r, "GET", "/v1/admin/teams", list_teams, k_no_json_body);
    s.on(r, "POST", "/v1/admin/tokens", create_token);
    s.on(r, "GET", "/v1/admin/tokens", list_tokens, k_no_json_body);
    s.on(r, "DELETE", "/v1/admin/tokens/{id}", revoke_token, k_no_json_body);
    s.on(r, "GET", "/v1/workers", list_workers, k_no_json_body);
    for (const auto& [verb, state] : {std::pair{"drain", WorkerState::draining}, std::pair{"activate", WorkerState::active}}) {
        const WorkerState to = state;
        s.on(r, "POST", std::string("/v1/admin/workers/{id}/") + verb,
             [to](ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
                 return set_worker_state(svc, req, who, to);
             },
             k_no_json_body);
    }
    s.on(r, "POST", "/v1/admin/workers/{id}/ban", ban_worker, Accepts{k_max_json_body_bytes, {Role::admin}});
    s.on(r, "GET", "/v1/whoami", whoami, k_no_json_body);
}

} // namespace gpupool::coordinator::service_detail
