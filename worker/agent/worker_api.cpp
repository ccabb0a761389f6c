#include "worker/agent/worker_api.hpp"

#include "core/recipe/recipe_json.hpp"

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

Result<WorkerApi::Registration> WorkerApi::register_worker(const std::string& name, const json& inventory) {
    auto r = call("POST", "/v1/workers/register", json{{"name", name}, {"inventory", inventory}}.dump());
    if (!r) {
        return r.error();
    }
    try {
        return Registration{r->at("worker_id").get<std::int64_t>(), r->at("token").get<std::string>()};
    } catch (const json::exception& e) {
        return make_error(ErrorCode::unavailable, std::string("register: unexpected answer: ") + e.what());
    }
}

Result<HeartbeatAnswer> WorkerApi::heartbeat(const std::vector<std::int64_t>& running,
                                             const std::vector<std::int64_t>& unhealthy_gpus, bool draining,
                                             const json& inventory, bool paused) {
    json body{{"running", running}, {"unhealthy_gpus", unhealthy_gpus}, {"draining", draining}, {"paused", paused}};
    if (!inventory.is_null()) {
        body["inventory"] = inventory;
    }
    auto r = call("POST", "/v1/workers/heartbeat", body.dump());
    if (!r) {
        return r.error();
    }
    try {
        HeartbeatAnswer a;
        a.stop = r->value("stop", std::vector<std::int64_t>{});
        a.lease_ms = r->value("lease_ms", std::int64_t{0});
        return a;
    } catch (const json::exception& e) {
        return make_error(ErrorCode::unavailable, std::string("heartbeat: unexpected answer: ") + e.what());
    }
}

Result<AssignmentMsg> parse_assignment(const json& j) {
    try {
        AssignmentMsg a;
        a.attempt = j.at("attempt").get<std::int64_t>();
        a.job = j.at("job").get<std::int64_t>();
        a.attempt_number = j.value("attempt_number", std::int64_t{1});
        a.gpu_index = j.value("gpu_index", std::int64_t{-1});
        a.gpu_milli = j.value("gpu_milli", std::int64_t{0});
        a.team = j.value("team", std::int64_t{0});
        if (a.team < 0) {
            return make_error(ErrorCode::invalid_input, "assignment: team must be 0 or more", "assignments");
        }
        a.team_name = j.value("team_name", std::string());
        if (a.team_name.size() > 256) {
            return make_error(ErrorCode::invalid_input, "assignment: team_name is longer than 256 bytes", "assignments");
        }
        auto spec = recipe::job_from_json(j.at("spec"));
        if (!spec) {
            return spec.error();
        }
        a.spec = std::move(*spec);
        a.raw = j;
        return a;
    } catch (const json::exception& e) {
        return make_error(ErrorCode::invalid_input, std::string("assignment: ") + e.what(), "assignments");
    }
}

Result<std::vector<AssignmentMsg>> WorkerApi::poll(std::chrono::milliseconds wait) {
    auto r = call("POST", "/v1/workers/poll?wait_ms=" + std::to_string(wait.count()), "{}",
                  wait + std::chrono::milliseconds(10'000));
    if (!r) {
        return r.error();
    }
    std::vector<AssignmentMsg> out;
    const json list = r->value("assignments", json::array());
    for (const auto& item : list) {
        auto a = parse_assignment(item);
        if (!a) {
            return a.error();
        }
        out.push_back(std::move(*a));
    }
    return out;
}

Status WorkerApi::start(std::int64_t attempt) {
    auto r = call("POST", "/v1/attempts/" + std::to_string(attempt) + "/start", "{}");
    return r ? Status{} : Status(r.error());
}

Result<std::string> WorkerApi::inputs(std::int64_t attempt) {
    return raw("GET", "/v1/attempts/" + std::to_string(attempt) + "/inputs", {}, std::chrono::milliseconds(600'000));
}

Result<std::int64_t> WorkerApi::append_log(std::int64_t attempt, std::int64_t offset, std::string_view data) {
    auto r = call("POST", "/v1/attempts/" + std::to_string(attempt) + "/logs?offset=" + std::to_string(offset), data);
    if (!r) {
        return r.error();
    }
    return r->value("length", offset + static_cast<std::int64_t>(data.size()));
}

Status WorkerApi::upload_outputs(std::int64_t attempt, std::string_view archive) {
    auto r = call("PUT", "/v1/attempts/" + std::to_string(attempt) + "/outputs", archive,
                  std::chrono::milliseconds(600'000));
    return r ? Status{} : Status(r.error());
}

Status WorkerApi::complete(std::int64_t attempt, std::optional<int> exit_code, const std::string& reason,
                           Outcome outcome) {
    json body{{"reason", reason}, {"outcome", to_string(outcome)}};
    if (exit_code) {
        body["exit_code"] = *exit_code;
    }
    auto r = call("POST", "/v1/attempts/" + std::to_string(attempt) + "/complete", body.dump());
    return r ? Status{} : Status(r.error());
}

} // namespace gpupool::worker
