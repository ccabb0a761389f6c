#include "worker/agent/worker_api.hpp"

#include "core/api/field_reader.hpp"

#include <utility>

namespace gpupool::worker {

using nlohmann::json;

namespace {

net::ClientOptions client_options(const std::string& url, std::string token, const std::string& ca) {
    net::ClientOptions o;
    o.base_url = url;
    o.token = std::move(token);
    o.ca_cert = ca;
    o.timeout = std::chrono::milliseconds(15'000);
    o.connect_timeout = std::chrono::milliseconds(5'000);
    return o;
}

std::string attempt_path(AttemptId attempt, const std::string& rest) {
    return "/v1/attempts/" + std::to_string(attempt.value()) + rest;
}

// A reply that does not read as its type: the coordinator is not one this worker can talk to now.
template <class T>
Result<T> unexpected_as_unavailable(Result<T> r, const char* what) {
    if (!r) {
        return make_error(ErrorCode::unavailable, std::string(what) + ": unexpected answer: " + r.error().field + ": " +
                                                      r.error().message);
    }
    return r;
}

} // namespace

WorkerApi::WorkerApi(std::string base_url, std::string token, std::string ca_cert)
    : m_base_url(std::move(base_url)), m_ca_cert(std::move(ca_cert)),
      m_http(client_options(m_base_url, std::move(token), m_ca_cert)) {}

void WorkerApi::set_token(std::string token) {
    m_http = net::HttpClient(client_options(m_base_url, std::move(token), m_ca_cert));
}

Result<std::string> WorkerApi::raw(std::string_view method, const std::string& path, std::string_view body,
                                   std::optional<std::chrono::milliseconds> timeout) {
    auto r = m_http.request(method, path, body, {}, timeout);
    if (!r) {
        return r.error(); // unreachable, timeout, TLS: ErrorCode::unavailable from HttpClient
    }
    if (r->status >= 200 && r->status < 300) {
        return std::move(r->body);
    }
    std::string detail = r->body;
    std::string field;
    try {
        auto j = json::parse(r->body);
        detail = j.value("detail", r->body);
        field = j.value("field", "");
    } catch (const json::exception&) {
    }
    return make_error(net::error_code_for_status(r->status),
                      std::string(method) + " " + path + " -> " + std::to_string(r->status) + ": " + detail, field);
}

Result<json> WorkerApi::call(std::string_view method, const std::string& path, std::string_view body,
                             std::optional<std::chrono::milliseconds> timeout) {
    auto text = raw(method, path, body, timeout);
    if (!text) {
        return text.error();
    }
    if (text->empty()) {
        return Result<json>(boost::system::in_place_value, json::object());
    }
    try {
        return Result<json>(boost::system::in_place_value, json::parse(*text));
    } catch (const json::exception& e) {
        return make_error(ErrorCode::unavailable,
                          std::string(method) + " " + path + ": the coordinator answered invalid JSON: " + e.what());
    }
}

Result<api::RegistrationReply> WorkerApi::register_worker(const api::Registration& registration) {
    auto r = call("POST", "/v1/workers/register", api::to_json(registration).dump());
    if (!r) {
        return r.error();
    }
    return unexpected_as_unavailable(api::registration_reply_from_json(*r), "register");
}

Result<api::HeartbeatReply> WorkerApi::heartbeat(const api::Heartbeat& beat) {
    auto r = call("POST", "/v1/workers/heartbeat", api::to_json(beat).dump());
    if (!r) {
        return r.error();
    }
    return unexpected_as_unavailable(api::heartbeat_reply_from_json(*r), "heartbeat");
}

Result<std::vector<AttemptId>> WorkerApi::leave(std::chrono::milliseconds wait) {
    auto r = call("POST", "/v1/workers/leave", "{}", wait);
    if (!r) {
        return r.error();
    }
    api::FieldReader reader(*r, "");
    auto back = api::read_ids<AttemptId>(reader, "handed_back");
    if (reader.error()) {
        return make_error(ErrorCode::unavailable, "leave: unexpected answer: " + reader.error()->field + ": " +
                                                      reader.error()->message);
    }
    return back;
}

Result<std::vector<api::Assignment>> WorkerApi::poll(std::chrono::milliseconds wait,
                                                     const std::vector<AttemptId>& known) {
    const json body{{"known", api::ids_json(known)}};
    auto r = call("POST", "/v1/workers/poll?wait_ms=" + std::to_string(wait.count()), body.dump(),
                  wait + std::chrono::milliseconds(10'000));
    if (!r) {
        return r.error();
    }
    std::vector<api::Assignment> out;
    const json list = r->value("assignments", json::array());
    if (!list.is_array()) {
        return make_error(ErrorCode::invalid_input, "expected an array", "assignments");
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
        auto a = api::assignment_from_json(list[i], "assignments[" + std::to_string(i) + "]");
        if (!a) {
            return a.error();
        }
        out.push_back(std::move(*a));
    }
    return out;
}

Status WorkerApi::start(AttemptId attempt) {
    auto r = call("POST", attempt_path(attempt, "/start"), "{}");
    return r ? Status{} : Status(r.error());
}

Result<std::string> WorkerApi::inputs(AttemptId attempt) {
    return raw("GET", attempt_path(attempt, "/inputs"), {}, std::chrono::milliseconds(600'000));
}

Result<std::int64_t> WorkerApi::append_log(AttemptId attempt, std::int64_t offset, std::string_view data) {
    auto r = call("POST", attempt_path(attempt, "/logs?offset=" + std::to_string(offset)), data);
    if (!r) {
        return r.error();
    }
    return r->value("length", offset + static_cast<std::int64_t>(data.size()));
}

Status WorkerApi::upload_outputs(AttemptId attempt, std::string_view archive) {
    auto r = call("PUT", attempt_path(attempt, "/outputs"), archive, std::chrono::milliseconds(600'000));
    return r ? Status{} : Status(r.error());
}

Status WorkerApi::complete(AttemptId attempt, const api::Completion& completion) {
    auto r = call("POST", attempt_path(attempt, "/complete"), api::to_json(completion).dump());
    return r ? Status{} : Status(r.error());
}

Result<std::vector<api::EndAnswer>> WorkerApi::batch(const std::string& path, const nlohmann::json& body,
                                                     bool& one_by_one, const char* what) {
    if (!one_by_one) {
        auto r = call("POST", path, body.dump());
        if (r) {
            return unexpected_as_unavailable(api::end_answers_from_json(*r), what);
        }
        if (r.error().code != ErrorCode::not_found) {
            return r.error();
        }
        one_by_one = true; // an older coordinator: its 404 names no attempt
    }
    return make_error(ErrorCode::not_implemented, std::string("the coordinator takes each ") + what + " on its own");
}

Result<std::vector<api::EndAnswer>> WorkerApi::complete_many(const std::vector<api::AttemptEnd>& ends) {
    return batch("/v1/attempts/complete", api::to_json(ends), m_one_by_one, "complete");
}

Result<std::vector<api::EndAnswer>> WorkerApi::start_many(const std::vector<AttemptId>& attempts) {
    return batch("/v1/attempts/start", api::starts_json(attempts), m_starts_one_by_one, "start");
}

} // namespace gpupool::worker
