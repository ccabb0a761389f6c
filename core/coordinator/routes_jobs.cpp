// The researchers' routes: submissions, jobs and sweeps, their logs and outputs, input archives.
#include "core/coordinator/service_impl.hpp"

#include "core/recipe/recipe_json.hpp"
#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

namespace {

json job_json(const Coordinator& coord, const JobRecord& j, const std::vector<AttemptRecord>& attempts,
              const std::string& waiting) {
    json a = json::array();
    std::int64_t cost = 0;
    for (const auto& at : attempts) {
        const std::int64_t c = coord.cost_micro(at);
        cost += c;
        a.push_back({{"id", at.id.value()},
                     {"worker", at.worker.value()},
                     {"gpu_index", at.gpu_index},
                     {"gpu_milli", at.gpu_milli},
                     {"state", to_string(at.state)},
                     {"assigned_at", at.assigned_at},
                     {"started_at", at.started_at ? json(*at.started_at) : json()},
                     {"ended_at", at.ended_at ? json(*at.ended_at) : json()},
                     {"exit_code", at.exit_code ? json(*at.exit_code) : json()},
                     {"reason", at.reason},
                     {"price_micro_per_hour", at.price_micro_per_hour},
                     {"cost_micro", c},
                     {"voided_at", at.voided_at ? json(*at.voided_at) : json()}});
    }
    return {{"id", j.id.value()},
            {"sweep_id", j.sweep_id},
            {"team", j.team.value()},
            {"submitted_by", coord.submitter_of(j.id)},
            {"name", j.spec.name},
            {"state", to_string(j.state)},
            {"attempts", j.attempts},
            {"created_at", j.created_at},
            {"updated_at", j.updated_at},
            {"finished_at", j.finished_at ? json(*j.finished_at) : json()},
            {"exit_code", j.exit_code ? json(*j.exit_code) : json()},
            {"reason", j.reason},
            {"waiting_reason", waiting},
            {"spec", recipe::to_wire_json(j.spec)},
            {"cost_micro", cost},
            {"held_micro", coord.held_micro(j.id)},
            {"attempt_history", a}};
}

net::Response submit_jobs(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    const json* body = &in.body;
    SubmitRequest sr;
    auto source = field<std::string>(*body, "source", std::string("api"));
    auto max_parallel = field<std::int64_t>(*body, "max_parallel", std::int64_t{0});
    if (!source || !max_parallel) {
        return error_response(!source ? source.error() : max_parallel.error());
    }
    sr.source = *source;
    sr.max_parallel = *max_parallel;
    if (body->contains("team") && (*body)["team"].is_string()) {
        sr.team = (*body)["team"].get<std::string>();
    }
    auto unfunded = field<bool>(*body, "allow_unfunded", false);
    auto key = field<std::string>(*body, "idempotency_key", std::string());
    if (!unfunded || !key) {
        return error_response(!unfunded ? unfunded.error() : key.error());
    }
    sr.allow_unfunded = *unfunded;
    sr.idempotency_key = *key;
    auto jobs = jobs_field(*body);
    if (!jobs) {
        return error_response(jobs.error());
    }
    sr.jobs = std::move(*jobs);
    auto res = svc.coord->submit(who, std::move(sr));
    if (!res) {
        return error_response(res.error());
    }
    json ids = json::array();
    for (JobId id : res->jobs) {
        ids.push_back(id.value());
    }
    svc.schedule_soon();
    return ok({{"sweep_id", res->sweep_id}, {"jobs", ids}}, 201);
}

net::Response list_jobs(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    JobQuery q;
    if (auto s = req.query_value("state"); !s.empty()) {
        q.state = job_state_from_string(s);
        if (!q.state) {
            return error_response(make_error(ErrorCode::invalid_input, "unknown state `" + s + "`", "state"));
        }
    }
    auto sweep = positive_query(req, "sweep");
    auto limit = positive_query(req, "limit");
    auto before = positive_query(req, "before");
    if (!sweep || !limit || !before) {
        return error_response(!sweep ? sweep.error() : !limit ? limit.error() : before.error());
    }
    q.sweep = *sweep;
    q.limit = static_cast<std::size_t>(limit->value_or(0));
    if (*before) {
        q.before = JobId(**before);
    }
    q.all_teams = req.query_value("all_teams") == "1" || req.query_value("all_teams") == "true";
    if (auto by = req.query_value("submitter"); !by.empty()) {
        q.submitter_label = by;
    }
    if (req.query_value("mine") == "1" || req.query_value("mine") == "true") {
        q.submitter_token = who.token_id;
    }
    auto list = svc.coord->jobs(who, q);
    if (!list) {
        return error_response(list.error());
    }
    json out = json::array();
    for (const auto& j : list->jobs) {
        out.push_back({{"id", j.id.value()},
                       {"sweep_id", j.sweep_id},
                       {"team", j.team.value()},
                       {"team_name", svc.coord->team_name(j.team)},
                       {"submitted_by", svc.coord->submitter_of(j.id)},
                       {"name", j.spec.name},
                       {"sweep_index", j.spec.sweep_index},
                       {"state", to_string(j.state)},
                       {"attempts", j.attempts},
                       {"exit_code", j.exit_code ? json(*j.exit_code) : json()},
                       {"reason", j.state == JobState::queued ? svc.coord->waiting_reason(j.id) : j.reason},
                       {"cost_micro", svc.coord->job_cost_micro(j.id)}});
    }
    return ok({{"jobs", out}, {"more", list->more}});
}

net::Response show_job(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto j = svc.coord->job(who, JobId(*id));
    if (!j) {
        return error_response(j.error());
    }
    return ok(job_json(*svc.coord, *j, svc.coord->attempts_of(j->id), svc.coord->waiting_reason(j->id)));
}

net::Response cancel_job(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto st = svc.coord->cancel_job(who, JobId(*id));
    return st ? ok({{"cancelled", json::array({*id})}}) : error_response(st.error());
}

net::Response cancel_sweep(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto n = svc.coord->cancel_sweep(who, *id);
    return n ? ok({{"sweep_id", *id}, {"cancelled", *n}}) : error_response(n.error());
}

net::Response read_job_logs(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    auto offset = parse_int(req.query_value("offset").empty() ? "0" : req.query_value("offset"), "offset");
    if (!id || !offset) {
        return error_response(!id ? id.error() : offset.error());
    }
    std::optional<AttemptId> attempt;
    if (auto a = req.query_value("attempt"); !a.empty()) {
        auto v = parse_int(a, "attempt");
        if (!v) {
            return error_response(v.error());
        }
        attempt = AttemptId(*v);
    }
    auto slice = svc.coord->read_logs(who, JobId(*id), *offset, attempt);
    if (!slice) {
        return error_response(slice.error());
    }
    json out = {{"attempt", slice->attempt.value()},
                {"offset", *offset},
                {"next_offset", slice->next_offset},
                {"finished", slice->finished},
                {"data", slice->data}};
    // JSON strings are UTF-8: invalid bytes are replaced in `data`; offsets count raw bytes.
    return net::json_response(200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

net::Response read_job_outputs(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    return bytes_response(svc.coord->read_output(who, JobId(*id)));
}

net::Response put_inputs(ServiceState& svc, const net::Request& req, const Input& in, const Principal& who) {
    std::optional<std::string> team;
    if (auto t = req.query_value("team"); !t.empty()) {
        team = t;
    }
    auto st = svc.coord->put_inputs(who, req.param("sha256"), *in.file, team);
    return st ? ok({{"sha256", req.param("sha256")}, {"bytes", in.file->size}}, 201) : error_response(st.error());
}

} // namespace

void add_job_routes(ServiceState& s, net::Router& r) {
    // An input archive is one blob in the store: one byte more than it keeps is refused unread.
    const auto max_upload = static_cast<std::size_t>(s.store->max_blob_bytes()) + 1;
    s.on(r, "POST", "/v1/jobs", submit_jobs, Accepts{k_max_submit_bytes, {Role::member, Role::admin}});
    s.on(r, "GET", "/v1/jobs", list_jobs, k_no_json_body);
    s.on(r, "GET", "/v1/jobs/{id}", show_job, k_no_json_body);
    s.on(r, "POST", "/v1/jobs/{id}/cancel", cancel_job, k_no_json_body);
    s.on(r, "POST", "/v1/sweeps/{id}/cancel", cancel_sweep, k_no_json_body);
    s.on(r, "GET", "/v1/jobs/{id}/logs", read_job_logs, k_no_json_body);
    s.on(r, "GET", "/v1/jobs/{id}/outputs", read_job_outputs, k_no_json_body);
    s.on(r, "PUT", "/v1/inputs/{sha256}", put_inputs, Accepts{max_upload, {Role::member, Role::admin}, false, true});
}

} // namespace gpupool::coordinator::service_detail
