// The workers' protocol: register, heartbeat, the long poll, and their attempts (inputs, start,
// logs, outputs, completion).
#include "core/coordinator/service_impl.hpp"

#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

net::Response register_worker(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json* body = &in.body;
    auto name = field<std::string>(*body, "name");
    if (!name) {
        return error_response(name.error());
    }
    auto inventory = api::inventory_from_json(body->value("inventory", json()));
    if (!inventory) {
        return error_response(inventory.error());
    }
    auto reg = svc.coord->register_worker(who, *name, *inventory);
    if (!reg) {
        return error_response(reg.error());
    }
    spdlog::info("worker {} `{}` registered for team `{}`", reg->worker.value(), util::escape_control(*name),
                 util::escape_control(svc.coord->team_name(*who.team)));
    for (const auto& w : reg->warnings) {
        spdlog::warn("worker `{}`: {}", util::escape_control(*name), util::escape_control(w));
    }
    return ok({{"worker_id", reg->worker.value()}, {"token", reg->secret}, {"warnings", reg->warnings}}, 201);
}

net::Response heartbeat(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json* body = &in.body;
    auto running = field<std::vector<std::int64_t>>(*body, "running", std::vector<std::int64_t>{});
    if (!running) {
        return error_response(running.error());
    }
    auto unhealthy = field<std::vector<std::int64_t>>(*body, "unhealthy_gpus", std::vector<std::int64_t>{});
    if (!unhealthy) {
        return error_response(unhealthy.error());
    }
    std::vector<AttemptId> ids;
    for (auto v : *running) {
        ids.emplace_back(v);
    }
    auto draining = field<bool>(*body, "draining", false);
    auto paused = field<bool>(*body, "paused", false);
    if (!draining || !paused) {
        return error_response(!draining ? draining.error() : paused.error());
    }
    std::optional<api::Inventory> inventory;
    if (auto it = body->find("inventory"); it != body->end() && !it->is_null()) {
        auto parsed = api::inventory_from_json(*it);
        if (!parsed) {
            return error_response(parsed.error());
        }
        inventory = std::move(*parsed);
    }
    auto reply = svc.coord->heartbeat(who, ids, *unhealthy, *draining, inventory ? &*inventory : nullptr, *paused);
    if (!reply) {
        return error_response(reply.error());
    }
    for (const auto& w : reply->warnings) {
        spdlog::warn("worker {}: {}", who.worker->value(), util::escape_control(w));
    }
    json stop = json::array();
    for (AttemptId a : reply->stop) {
        stop.push_back(a.value());
    }
    return ok({{"stop", stop}, {"lease_ms", reply->lease_ms}});
}

// Long poll: answered at once when work is waiting, else parked until work or the wait ends.
void poll(ServiceState& svc, const net::Request& req, net::Responder respond) {
    auto who = svc.coord->authenticate(bearer(req));
    if (!who) {
        respond(error_response(who.error()));
        return;
    }
    auto list = svc.coord->assignments(*who);
    if (!list) {
        respond(error_response(list.error()));
        return;
    }
    auto wait = parse_int(req.query_value("wait_ms").empty() ? "0" : req.query_value("wait_ms"), "wait_ms");
    if (!wait || *wait < 0) {
        respond(error_response(wait ? make_error(ErrorCode::invalid_input, "must be 0 or more", "wait_ms")
                                    : wait.error()));
        return;
    }
    if (!list->empty() || *wait == 0 || svc.stopped) {
        json arr = json::array();
        for (const auto& a : *list) {
            arr.push_back(assignment_json(a));
        }
        respond(ok({{"assignments", arr}}));
        return;
    }
    auto timer = std::make_shared<asio::steady_timer>(svc.ctx);
    timer->expires_after(std::min(std::chrono::milliseconds(*wait), svc.options.max_poll_wait));
    WorkerId w = *who->worker;
    svc.pollers[w].push_back({std::move(respond), timer});
    timer->async_wait([&svc, w, timer](boost::system::error_code ec) {
        if (ec) {
            return; // answered early
        }
        auto& parked = svc.pollers[w];
        for (auto it = parked.begin(); it != parked.end(); ++it) {
            if (it->timer == timer) {
                it->respond(ok({{"assignments", json::array()}}));
                parked.erase(it);
                break;
            }
        }
    });
}

net::Response read_attempt_inputs(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    return bytes_response(svc.coord->read_inputs(who, AttemptId(*id)));
}

net::Response start_attempt(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto st = svc.coord->start_attempt(who, AttemptId(*id));
    return st ? ok({{"attempt", *id}, {"state", "running"}}) : error_response(st.error());
}

net::Response append_attempt_log(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    auto offset = parse_int(req.query_value("offset"), "offset");
    if (!id || !offset) {
        return error_response(!id ? id.error() : offset.error());
    }
    auto res = svc.coord->append_log(who, AttemptId(*id), *offset, req.body);
    if (!res) {
        return error_response(res.error());
    }
    return ok({{"stored", res->stored_bytes}, {"length", res->length}});
}

net::Response upload_attempt_outputs(ServiceState& svc, const net::Request& req, const Input& in, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto st = svc.coord->upload_output(who, AttemptId(*id), *in.file);
    return st ? ok({{"attempt", *id}, {"bytes", in.file->size}}) : error_response(st.error());
}

net::Response complete_attempt(ServiceState& svc, const net::Request& req, const Input& in, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    const json* body = &in.body;
    auto exit_code = opt_field(*body, "exit_code");
    auto reason = field<std::string>(*body, "reason", std::string());
    auto outcome_name = field<std::string>(*body, "outcome", std::string("exited"));
    if (!exit_code || !reason || !outcome_name) {
        return error_response(!exit_code ? exit_code.error() : !reason ? reason.error() : outcome_name.error());
    }
    auto outcome = outcome_from_string(*outcome_name);
    if (!outcome) {
        return error_response(make_error(ErrorCode::invalid_input,
                                         "expected exited, worker_fault or owner_preempted, got `" +
                                             *outcome_name + "`",
                                         "outcome"));
    }
    auto st = svc.coord->complete_attempt(who, AttemptId(*id), *exit_code, *reason, *outcome);
    if (st) {
        svc.schedule_soon();
    }
    return st ? ok({{"attempt", *id}, {"exit_code", opt_json(*exit_code)}, {"outcome", *outcome_name}})
              : error_response(st.error());
}

} // namespace

void add_worker_routes(ServiceState& s, net::Router& r) {
    s.on(r, "POST", "/v1/workers/register", register_worker, Accepts{k_max_json_body_bytes, {Role::enroll}});
    s.on(r, "POST", "/v1/workers/heartbeat", heartbeat, Accepts{k_max_json_body_bytes, {Role::worker}});
    r.add(
        "POST", "/v1/workers/poll",
        [&s](net::Request req, net::Responder respond) {
            asio::post(s.ctx, [&s, req = std::move(req), respond = std::move(respond)]() mutable {
                poll(s, req, std::move(respond));
            });
        },
        s.route_options(Accepts{k_max_json_body_bytes, {Role::worker}}));
    s.on(r, "GET", "/v1/attempts/{id}/inputs", read_attempt_inputs, k_no_json_body);
    s.on(r, "POST", "/v1/attempts/{id}/start", start_attempt, k_no_json_body);
    s.on(r, "POST", "/v1/attempts/{id}/logs", append_attempt_log, Accepts{std::size_t{4} * 1024 * 1024, {Role::worker}, false});
    s.on(r, "PUT", "/v1/attempts/{id}/outputs", upload_attempt_outputs, Accepts{std::size_t{900} * 1024 * 1024, {Role::worker}, false, true});
    s.on(r, "POST", "/v1/attempts/{id}/complete", complete_attempt);
}

} // namespace gpupool::coordinator::service_detail
