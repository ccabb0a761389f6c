// The workers' protocol: register, heartbeat, the long poll, and their attempts (inputs, start,
// logs, outputs, completion).
#include "core/api/worker_protocol.hpp"
#include "core/coordinator/service_impl.hpp"
#include "core/coordinator/worker_ops.hpp"
#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

net::Response register_worker(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto req = api::registration_from_json(in.body);
    if (!req) {
        return error_response(req.error());
    }
    auto reg = coordinator::register_worker(*svc.coord, who, req->name, req->inventory, req->terms);
    if (!reg) {
        return error_response(reg.error());
    }
    spdlog::info("worker {} `{}` registered for team `{}`", reg->worker.value(), util::escape_control(req->name),
                 util::escape_control(svc.coord->tokens().team_name(*who.team)));
    for (const auto& w : reg->warnings) {
        spdlog::warn("worker `{}`: {}", util::escape_control(req->name), util::escape_control(w));
    }
    return ok(api::to_json(api::RegistrationReply{reg->worker, reg->secret, reg->warnings}), 201);
}

net::Response heartbeat(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto beat = api::heartbeat_from_json(in.body);
    if (!beat) {
        return error_response(beat.error());
    }
    auto reply = coordinator::receive_heartbeat(*svc.coord, who, *beat);
    if (!reply) {
        return error_response(reply.error());
    }
    for (const auto& w : reply->warnings) {
        spdlog::warn("worker {}: {}", who.worker->value(), util::escape_control(w));
    }
    return ok(api::to_json(*reply));
}

// A clean exit: offline at once, its unstarted attempts back to the queue, and its parked polls
// answered now (empty), so that the worker's poll thread ends without waiting out its long poll.
net::Response leave(ServiceState& svc, const net::Request&, const Input&, const Principal& who) {
    auto back = coordinator::worker_left(*svc.coord, who);
    if (!back) {
        return error_response(back.error());
    }
    const WorkerId w = *who.worker;
    if (auto it = svc.pollers.find(w); it != svc.pollers.end()) {
        for (auto& p : it->second) {
            p.timer->cancel();
            p.respond(ok({{"assignments", json::array()}}));
        }
        svc.pollers.erase(it);
    }
    spdlog::info("worker {} left the pool; {} unstarted attempt(s) back in the queue", w.value(), back->size());
    return ok({{"worker", w.value()}, {"handed_back", api::ids_json(*back)}});
}

// Long poll: answered at once when work it does not hold yet is waiting, else parked until a pass
// places some or the wait ends. The body may name the assignments the worker holds (`known`, at
// most k_max_known): they were re-sent until started, and are no answer now.
constexpr std::size_t k_max_known = 1024;

void poll(ServiceState& svc, const net::Request& req, const Input& in, net::Responder respond) {
    auto who = svc.coord->authenticate(bearer(req));
    if (!who) {
        respond(error_response(who.error()));
        return;
    }
    auto list = coordinator::assignments(*svc.coord, *who);
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
    api::FieldReader r(in.body, "");
    const auto held = api::read_ids<AttemptId>(r, "known");
    if (!r.error() && held.size() > k_max_known) {
        r.fail("at most " + std::to_string(k_max_known) + " ids", "known");
    }
    if (r.error()) {
        respond(error_response(*r.error()));
        return;
    }
    std::set<AttemptId> known(held.begin(), held.end());
    json arr = assignments_json(*list, known);
    if (!arr.empty() || *wait == 0 || svc.stopped) {
        respond(ok({{"assignments", std::move(arr)}}));
        return;
    }
    auto timer = std::make_shared<asio::steady_timer>(svc.ctx);
    timer->expires_after(std::min(std::chrono::milliseconds(*wait), svc.options.max_poll_wait));
    WorkerId w = *who->worker;
    svc.pollers[w].push_back({std::move(respond), timer, std::move(known)});
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
    return bytes_response(coordinator::read_inputs(*svc.coord, who, AttemptId(*id)));
}

net::Response start_attempt(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto st = coordinator::start_attempt(*svc.coord, who, AttemptId(*id));
    return st ? ok({{"attempt", *id}, {"state", "running"}}) : error_response(st.error());
}

net::Response append_attempt_log(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    auto offset = parse_int(req.query_value("offset"), "offset");
    if (!id || !offset) {
        return error_response(!id ? id.error() : offset.error());
    }
    auto res = coordinator::append_log(*svc.coord, who, AttemptId(*id), *offset, req.body);
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
    auto st = coordinator::upload_output(*svc.coord, who, AttemptId(*id), *in.file);
    return st ? ok({{"attempt", *id}, {"bytes", in.file->size}}) : error_response(st.error());
}

net::Response complete_attempt(ServiceState& svc, const net::Request& req, const Input& in, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto done = api::completion_from_json(in.body);
    if (!done) {
        return error_response(done.error());
    }
    auto st = coordinator::complete_attempt(*svc.coord, who, AttemptId(*id), *done);
    if (st) {
        svc.schedule_soon();
    }
    return st ? ok({{"attempt", *id}, {"exit_code", opt_json(done->exit_code)}, {"outcome", to_string(done->outcome)}})
              : error_response(st.error());
}

// Several ends in one request, committed together (api::AttemptEnd); one answer per end.
net::Response complete_attempts(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto ends = api::attempt_ends_from_json(in.body);
    if (!ends) {
        return error_response(ends.error());
    }
    auto answers = coordinator::complete_attempts(*svc.coord, who, *ends);
    if (!answers) {
        return error_response(answers.error());
    }
    return ok(api::to_json(*answers));
}

// Several starts in one request, committed together; one answer per attempt.
net::Response start_attempts(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto ids = api::attempt_starts_from_json(in.body);
    if (!ids) {
        return error_response(ids.error());
    }
    auto answers = coordinator::start_attempts(*svc.coord, who, *ids);
    if (!answers) {
        return error_response(answers.error());
    }
    return ok(api::to_json(*answers));
}

} // namespace

void add_worker_routes(ServiceState& s, net::Router& r) {
    s.on(r, "POST", "/v1/workers/register", register_worker, Accepts{k_max_json_body_bytes, {Role::enroll}});
    s.on(r, "POST", "/v1/workers/heartbeat", heartbeat, Accepts{k_max_json_body_bytes, {Role::worker}});
    s.on(r, "POST", "/v1/workers/leave", leave, k_no_json_body);
    const Accepts poll_accepts{k_max_json_body_bytes, {Role::worker}};
    r.add(
        "POST", "/v1/workers/poll",
        [&s, poll_accepts](net::Request req, net::Responder respond) {
            auto in = ServiceState::prepare(req, poll_accepts);
            if (!in) {
                respond(error_response(in.error()));
                return;
            }
            s.post_active(std::move(respond), [&s, req = std::move(req), in = std::move(*in)](net::Responder answer) {
                poll(s, req, in, std::move(answer));
            });
        },
        s.route_options(poll_accepts));
    s.on(r, "GET", "/v1/attempts/{id}/inputs", read_attempt_inputs, k_no_json_body);
    s.on(r, "POST", "/v1/attempts/{id}/start", start_attempt, k_no_json_body);
    s.on(r, "POST", "/v1/attempts/start", start_attempts, Accepts{k_max_json_body_bytes, {Role::worker}});
    s.on(r, "POST", "/v1/attempts/{id}/logs", append_attempt_log, Accepts{std::size_t{4} * 1024 * 1024, {Role::worker}, false});
    s.on(r, "PUT", "/v1/attempts/{id}/outputs", upload_attempt_outputs,
         Accepts{std::size_t{900} * 1024 * 1024, {Role::worker}, false, true, 0, false, true});
    s.on(r, "POST", "/v1/attempts/{id}/complete", complete_attempt);
    s.on(r, "POST", "/v1/attempts/complete", complete_attempts, Accepts{k_max_json_body_bytes, {Role::worker}});
}

} // namespace gpupool::coordinator::service_detail
