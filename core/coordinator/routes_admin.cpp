// The admin and identity routes: teams, tokens, whoami, and the fleet as admins see it (list,
// drain, activate, ban).
#include "core/api/admin.hpp"
#include "core/api/pool.hpp"
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/resolve_name.hpp"
#include "core/coordinator/service_impl.hpp"
#include "core/util/files.hpp"
#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

// The worker the path's {id} names: its id, or its name when one worker has it (resolve_name).
Result<WorkerId> worker_param(ServiceState& svc, const net::Request& req, const Principal& who) {
    if (who.role != Role::admin) {
        return make_error(ErrorCode::forbidden, "only admins drain, activate or ban workers");
    }
    auto list = coordinator::list_workers(*svc.coord, who);
    if (!list) {
        return list.error();
    }
    std::vector<NamedCandidate> workers;
    for (const auto& w : *list) {
        workers.push_back({w.id.value(), w.name,
                           svc.coord->roster().presence(w.id, svc.coord->now_ms()) + ", team " +
                               svc.coord->tokens().team_name(w.team)});
    }
    auto id = resolve_name("worker", req.param("id"), workers, "worker", "see `gpupool admin workers`");
    if (!id) {
        return id.error();
    }
    return WorkerId(*id);
}

// The token the path's {id} names: any token by its id, or the one active token with that label.
Result<TokenId> token_param(ServiceState& svc, const net::Request& req, const Principal& who) {
    auto list = coordinator::list_tokens(*svc.coord, who, std::nullopt); // admins only
    if (!list) {
        return list.error();
    }
    const std::string text = req.param("id");
    std::vector<NamedCandidate> active;
    for (const auto& t : *list) {
        if (std::to_string(t.id.value()) == text) {
            return t.id;
        }
        if (!t.revoked_at) {
            active.push_back(
                {t.id.value(), t.label,
                 to_string(t.role) + (t.team ? " of team " + svc.coord->tokens().team_name(*t.team) : "")});
        }
    }
    auto id = resolve_name("active token", text, active, "token", "see `gpupool admin token list`");
    if (!id) {
        return id.error();
    }
    return TokenId(*id);
}

net::Response create_team(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto req = api::team_create_request_from_json(in.body);
    if (!req) {
        return error_response(req.error());
    }
    auto t = coordinator::create_team(*svc.coord, who, req->name, req->weight);
    if (!t) {
        return error_response(t.error());
    }
    spdlog::info("team {} `{}` created (weight {}) by token {}", t->id.value(), util::escape_control(t->name),
                 t->weight, who.token_id.value());
    return ok(api::to_json(api::TeamView{t->id, t->name, t->weight}), 201);
}

net::Response list_teams(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    if (who.role != Role::admin) {
        return error_response(make_error(ErrorCode::forbidden, "only admins list teams"));
    }
    api::TeamList out;
    for (const auto& t : coordinator::list_teams(*svc.coord, who).value()) {
        out.teams.push_back({t.id, t.name, t.weight});
    }
    return ok(api::to_json(out));
}

net::Response create_token(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto req = api::token_create_request_from_json(in.body);
    if (!req) {
        return error_response(req.error());
    }
    auto role = role_from_string(req->role);
    if (!role) {
        return error_response(make_error(ErrorCode::invalid_input, "expected admin, member or enroll", "role"));
    }
    auto tok = coordinator::create_token(*svc.coord, who, *role, req->team, req->label, req->uses);
    if (!tok) {
        return error_response(tok.error());
    }
    spdlog::info("{} token {} created{} by token {}", to_string(tok->role), tok->id.value(),
                 req->team.empty() ? std::string() : " for team `" + util::escape_control(req->team) + "`",
                 who.token_id.value());
    return ok(api::to_json(api::CreatedToken{tok->id, tok->secret, to_string(tok->role), req->team}), 201);
}

net::Response list_tokens(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    std::optional<std::string> team;
    if (auto t = req.query_value("team"); !t.empty()) {
        team = t;
    }
    auto list = coordinator::list_tokens(*svc.coord, who, team);
    if (!list) {
        return error_response(list.error());
    }
    api::TokenList out;
    for (const auto& t : *list) {
        out.tokens.push_back(
            {t.id, to_string(t.role),
             t.team ? std::optional<std::string>(svc.coord->tokens().team_name(*t.team)) : std::nullopt, t.worker,
             t.label, t.created_at, t.revoked_at, t.uses_left, svc.coord->tokens().last_used(t.id)});
    }
    return ok(api::to_json(out));
}

net::Response revoke_token(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = token_param(svc, req, who);
    if (!id) {
        return error_response(id.error());
    }
    auto st = coordinator::revoke_token(*svc.coord, who, *id);
    if (st) {
        spdlog::info("token {} revoked by token {}", id->value(), who.token_id.value());
    }
    return st ? ok(api::to_json(api::TokenRevoked{*id})) : error_response(st.error());
}

net::Response list_workers(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    auto list = coordinator::list_workers(*svc.coord, who);
    if (!list) {
        return error_response(list.error());
    }
    api::WorkerList out;
    for (const auto& w : *list) {
        const LiveWorker& live = svc.coord->roster().at(w.id); // what its heartbeats said
        api::WorkerView v;
        v.id = w.id;
        v.team = w.team;
        v.team_name = svc.coord->tokens().team_name(w.team);
        v.name = w.name;
        v.state = to_string(w.state);
        v.presence = svc.coord->roster().presence(w.id, svc.coord->now_ms());
        v.sharing = api::to_string(live.sharing);
        v.sharing_changes_at_ms = live.sharing_changes_at_ms;
        v.terms = live.terms;
        v.last_seen_at = w.last_seen_at;
        v.model_mismatch = live.model_mismatch.empty() ? std::nullopt : std::optional<std::string>(live.model_mismatch);
        v.inventory = json::parse(w.inventory_json, nullptr, false); // as the worker reported it
        v.checks_agreed = w.checks_agreed;
        v.checks_disagreed = w.checks_disagreed;
        v.reliability = verify::reliability(check_record(w));
        out.workers.push_back(std::move(v));
    }
    return ok(api::to_json(out));
}

net::Response set_worker_state(ServiceState& svc, const net::Request& req, const Principal& who, WorkerState to) {
    auto id = worker_param(svc, req, who);
    if (!id) {
        return error_response(id.error());
    }
    auto st = coordinator::set_worker_state(*svc.coord, who, *id, to);
    if (st) {
        spdlog::info("worker {} set {} by token {}", id->value(), to_string(to), who.token_id.value());
    }
    return st ? ok(api::to_json(api::WorkerStateChanged{*id, to_string(to)})) : error_response(st.error());
}

// A ban may void the worker's results since a time: {"void_since": ms, "with_siblings": bool} (both
// optional). The answer names the other workers enrolled with the same token (revoked by the ban,
// which stops no worker it registered) and, with `with_siblings`, bans them too in the same commit.
net::Response ban_worker(ServiceState& svc, const net::Request& req, const Input& in, const Principal& who) {
    auto worker = worker_param(svc, req, who);
    if (!worker) {
        return error_response(worker.error());
    }
    auto body = api::ban_request_from_json(in.body);
    if (!body) {
        return error_response(body.error());
    }
    auto voided = coordinator::ban_worker(*svc.coord, who, *worker, body->void_since, body->with_siblings);
    if (!voided) {
        return error_response(voided.error());
    }
    spdlog::info("worker {} banned by token {}{}{}", worker->value(), who.token_id.value(),
                 voided->banned.size() > 1
                     ? " with " + std::to_string(voided->banned.size() - 1) + " worker(s) enrolled with the same token"
                     : std::string(),
                 body->void_since ? "; " + std::to_string(voided->attempts.size()) + " result(s) voided, " +
                                        std::to_string(voided->refunded_micro) + " micro-credits refunded, " +
                                        std::to_string(voided->requeued.size()) + " job(s) queued again"
                                  : std::string());
    api::BanReply out;
    out.worker = *worker;
    out.state = to_string(WorkerState::banned);
    out.voided_attempts = voided->attempts;
    out.requeued_jobs = voided->requeued;
    out.refunded_micro = voided->refunded_micro;
    out.banned = voided->banned;
    for (const auto& w : voided->siblings) {
        out.siblings.push_back(
            {w.id, w.name, to_string(w.state), svc.coord->roster().presence(w.id, svc.coord->now_ms())});
    }
    return ok(api::to_json(out));
}

// GET /v1/admin/audit?since=MS&before=ID&action=PREFIX&limit=N: the audit log, newest first.
net::Response read_audit(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    store::AuditQuery q;
    auto since = positive_query(req, "since");
    auto before = positive_query(req, "before");
    auto limit = positive_query(req, "limit");
    if (!since || !before || !limit) {
        return error_response(!since ? since.error() : !before ? before.error() : limit.error());
    }
    q.since_ms = *since;
    q.before_id = *before;
    q.limit = limit->value_or(100);
    q.action_prefix = req.query_value("action");
    if (q.action_prefix.size() > 64) {
        return error_response(make_error(ErrorCode::invalid_input, "longer than 64 bytes", "action"));
    }
    auto records = svc.coord->audit_log(who, q);
    if (!records) {
        return error_response(records.error());
    }
    api::AuditList out;
    for (const auto& a : *records) {
        std::optional<api::AuditActor> actor;
        if (a.actor) {
            actor = api::AuditActor{*a.actor, svc.coord->tokens().token_name(*a.actor)};
        }
        json detail = json::parse(a.detail, nullptr, false); // stored as JSON text
        out.audit.push_back({a.id, a.at_ms, std::move(actor), a.action, a.target,
                             detail.is_object() ? std::move(detail) : json::object()});
    }
    return ok(api::to_json(out));
}

// POST /v1/admin/backup: the whole pool as one database file, copied on a thread of its own while
// the coordinator goes on serving, then sent as it is read. One at a time; audited once sent off.
void take_backup(ServiceState& svc, const net::Request& req, net::Responder respond) {
    auto who = svc.coord->authenticate(bearer(req));
    if (!who) {
        respond(error_response(who.error()));
        return;
    }
    if (who->role != Role::admin) {
        respond(error_response(make_error(ErrorCode::forbidden, "only admins take backups")));
        return;
    }
    if (svc.backup_running) {
        respond(error_response(make_error(ErrorCode::conflict, "a backup is being taken; try again when it is done")));
        return;
    }
    const std::filesystem::path dir =
        svc.options.backup_dir.empty() ? std::filesystem::temp_directory_path() : svc.options.backup_dir;
    auto file = util::TempFile::create(dir, ".gpupool-backup-", ".db");
    if (!file) {
        respond(error_response(file.error()));
        return;
    }
    if (svc.backup_thread.joinable()) {
        svc.backup_thread.join(); // the last one, long finished (backup_running is false)
    }
    svc.backup_running = true;
    auto held = std::make_shared<util::TempFile>(std::move(*file));
    const Principal admin = *who;
    svc.backup_thread = std::thread([&svc, held, admin, respond = std::move(respond)]() mutable {
        const auto started = std::chrono::steady_clock::now();
        Status st = svc.store->backup(held->path());
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
        asio::post(svc.ctx, [&svc, held, admin, st, ms, respond = std::move(respond)]() {
            svc.backup_running = false;
            if (!st) {
                spdlog::error("backup failed: {}", st.error().describe());
                respond(error_response(st.error()));
                return;
            }
            std::error_code ec;
            const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(held->path(), ec));
            if (auto audited = coordinator::record_audit(*svc.coord, admin, "pool.backup", "pool",
                                                         json{{"bytes", bytes}, {"copy_ms", ms.count()}}.dump());
                !audited) {
                respond(error_response(audited.error())); // nothing leaves unrecorded
                return;
            }
            spdlog::info("backup of {} bytes taken in {} ms for token {}", bytes, ms.count(), admin.token_id.value());
            net::Response r;
            r.content_type = "application/vnd.sqlite3";
            r.headers.set("Content-Disposition", "attachment; filename=\"gpupool-backup.db\"");
            r.body_file = held;
            respond(std::move(r));
        });
    });
}

api::PoolJob pool_job_view(const OverviewJob& j) {
    api::PoolJob out{j.id, j.name, j.team, j.submitter, j.state, j.since_ms, j.why, j.exit_code};
    if (j.worker) {
        out.worker = *j.worker;
        out.worker_name = j.worker_name;
        out.gpu_index = j.gpu_index;
        out.gpu_milli = j.gpu_milli;
    }
    return out;
}

// GET /v1/pool: the pool at a glance (`gpupool pool`, the dashboard).
net::Response pool_overview(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    auto o = svc.coord->overview(who);
    if (!o) {
        return error_response(o.error());
    }
    api::PoolOverviewReply out;
    out.at = o->at_ms;
    out.detail = to_string(o->detail);
    for (const auto& w : o->workers) {
        api::PoolWorker pw{w.id, w.name, w.team, w.presence, w.last_seen_at, {}, w.reliability};
        for (const auto& g : w.gpus) {
            pw.gpus.push_back({g.index, g.model, g.memory_mib, g.allocated_milli, g.jobs, g.healthy, g.enforcement});
        }
        out.workers.push_back(std::move(pw));
    }
    for (auto [from, to] : {std::pair{&o->running, &out.running}, std::pair{&o->queued, &out.queued},
                            std::pair{&o->recent, &out.recent}}) {
        for (const auto& j : *from) {
            to->push_back(pool_job_view(j));
        }
    }
    for (const auto& c : o->credits) {
        out.credits.push_back({c.team, c.balance, c.held});
    }
    const auto& t = o->totals;
    out.totals = {t.workers,     t.workers_online, t.gpus_online, t.gpu_milli_online, t.gpu_milli_allocated,
                  t.gpus_shared, t.jobs_queued,    t.jobs_running};
    return ok(api::to_json(out));
}

net::Response whoami(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    std::optional<std::string> team;
    if (who.team) {
        team = svc.coord->tokens().team_name(*who.team);
    }
    return ok(api::to_json(api::Whoami{to_string(who.role), who.token_id, svc.coord->tokens().token_name(who.token_id),
                                       team, who.worker}));
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
    s.on(r, "GET", "/v1/admin/audit", read_audit, k_no_json_body);
    s.on(r, "GET", "/v1/pool", pool_overview, k_no_json_body);
    r.add(
        "POST", "/v1/admin/backup",
        [&s](net::Request req, net::Responder respond) {
            s.post_active(std::move(respond), [&s, req = std::move(req)](net::Responder answer) {
                take_backup(s, req, std::move(answer));
            });
        },
        s.route_options(k_no_json_body));
}

} // namespace gpupool::coordinator::service_detail
