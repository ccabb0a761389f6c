// The researchers' routes: submissions, jobs and sweeps, their logs and outputs, input archives.
#include "core/api/jobs.hpp"
#include "core/api/retry.hpp"
#include "core/api/submit.hpp"
#include "core/coordinator/evidence.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/service_impl.hpp"
#include "core/recipe/parser.hpp"
#include "core/util/strings.hpp"

#include <spdlog/spdlog.h>

namespace gpupool::coordinator::service_detail {

using namespace gpupool::store;

static_assert(k_max_jobs_per_submission == recipe::k_default_max_sweep_jobs,
              "the server takes as many jobs at once as the client's sweeps may have");

namespace {

api::JobView job_view(const Coordinator& coord, const JobRecord& j, const std::vector<AttemptRecord>& attempts,
                      const std::string& waiting) {
    api::JobView v;
    std::int64_t cost = 0;
    for (const auto& at : attempts) {
        const std::int64_t c = coord.credit_desk().cost_micro(at, coord.now_ms());
        cost += c;
        v.attempt_history.push_back({at.id, at.worker, at.gpu_index, at.gpu_milli, to_string(at.state), at.assigned_at,
                                     at.started_at, at.ended_at, at.exit_code, at.reason, at.price_micro_per_hour, c,
                                     at.voided_at, at.retry});
        const bool active = at.state == AttemptState::assigned || at.state == AttemptState::running;
        v.attempt_history.back().unconfirmed = active && coord.roster().at(at.worker).unconfirmed;
    }
    v.id = j.id;
    v.sweep_id = j.sweep_id;
    v.team = j.team;
    v.submitted_by = coordinator::submitter_of(coord, j.id);
    v.name = j.spec.name;
    v.state = to_string(j.state);
    v.attempts = j.attempts;
    v.retries = j.retries;
    v.created_at = j.created_at;
    v.updated_at = j.updated_at;
    v.finished_at = j.finished_at;
    v.exit_code = j.exit_code;
    v.reason = j.state == JobState::assigned ? coordinator::shown_reason(coord, j) : j.reason;
    v.waiting_reason = waiting;
    v.spec = j.spec;
    v.cost_micro = cost;
    v.held_micro = coord.credit_desk().held_micro(j.id);
    if (j.check_of) {
        v.check_of = j.check_of->value();
    }
    return v;
}

api::JobSummary job_summary(const Coordinator& coord, const JobRecord& j) {
    api::JobSummary s;
    s.id = j.id;
    s.sweep_id = j.sweep_id;
    s.team = j.team;
    s.team_name = coord.tokens().team_name(j.team);
    s.submitted_by = coordinator::submitter_of(coord, j.id);
    s.name = j.spec.name;
    s.sweep_index = j.spec.sweep_index;
    s.state = to_string(j.state);
    s.attempts = j.attempts;
    s.exit_code = j.exit_code;
    s.reason = coordinator::shown_reason(coord, j);
    s.cost_micro = coord.credit_desk().job_cost_micro(j.id, coord.now_ms());
    if (j.check_of) {
        s.check_of = j.check_of->value();
    }
    return s;
}

// The body was read into a SubmitRequest where it was parsed (k_submission), off this thread.
net::Response submit_jobs(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto res = coordinator::submit(*svc.coord, who, std::move(*in.submission));
    if (!res) {
        return error_response(res.error());
    }
    svc.schedule_soon();
    return ok(api::to_json(*res), 201);
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
    if (*sweep) {
        q.sweep = SweepId(**sweep);
    }
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
    auto list = coordinator::list_jobs(*svc.coord, who, q);
    if (!list) {
        return error_response(list.error());
    }
    api::JobList out;
    out.more = list->more;
    for (const auto& j : list->jobs) {
        out.jobs.push_back(job_summary(*svc.coord, j));
    }
    return ok(api::to_json(out));
}

net::Response show_job(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto j = coordinator::read_job(*svc.coord, who, JobId(*id));
    if (!j) {
        return error_response(j.error());
    }
    return ok(api::to_json(job_view(*svc.coord, *j, svc.coord->job_book().attempts_of(j->id),
                                    coordinator::waiting_reason(*svc.coord, j->id))));
}

net::Response cancel_job(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto st = coordinator::cancel_job(*svc.coord, who, JobId(*id));
    return st ? ok(api::to_json(api::JobCancelled{{JobId(*id)}})) : error_response(st.error());
}

net::Response cancel_sweep(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    const SweepId sweep(*id);
    auto n = coordinator::cancel_sweep(*svc.coord, who, sweep);
    return n ? ok(api::to_json(api::SweepCancelled{sweep, *n})) : error_response(n.error());
}

// Failed or cancelled jobs queued again (retry, job_ops.hpp), answered with each job's retry number.
net::Response retry_jobs(ServiceState& svc, const net::Request&, const Input& in, const Principal& who) {
    auto request = api::retry_request_from_json(in.body);
    if (!request) {
        return error_response(request.error());
    }
    auto res = coordinator::retry(*svc.coord, who, *request);
    if (!res) {
        return error_response(res.error());
    }
    svc.schedule_soon();
    return ok(api::to_json(*res));
}

// `?attempt=N`: one attempt of the job rather than its latest; nullopt when not given.
Result<std::optional<AttemptId>> attempt_query(const net::Request& req) {
    const auto a = req.query_value("attempt");
    if (a.empty()) {
        return std::optional<AttemptId>();
    }
    auto v = parse_int(a, "attempt");
    if (!v) {
        return v.error();
    }
    return std::optional<AttemptId>(AttemptId(*v));
}

net::Response read_job_logs(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    auto offset = parse_int(req.query_value("offset").empty() ? "0" : req.query_value("offset"), "offset");
    if (!id || !offset) {
        return error_response(!id ? id.error() : offset.error());
    }
    auto attempt = attempt_query(req);
    if (!attempt) {
        return error_response(attempt.error());
    }
    auto slice = coordinator::read_logs(*svc.coord, who, JobId(*id), *offset, *attempt);
    if (!slice) {
        return error_response(slice.error());
    }
    const json out = api::to_json(api::LogSlice{slice->attempt, *offset, slice->next_offset, slice->finished, slice->data});
    // JSON strings are UTF-8: invalid bytes are replaced in `data`; offsets count raw bytes.
    return net::json_response(200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

net::Response read_job_manifest(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    auto attempt = attempt_query(req);
    if (!attempt) {
        return error_response(attempt.error());
    }
    auto manifest = coordinator::job_manifest(*svc.coord, who, JobId(*id), *attempt);
    if (!manifest) {
        return error_response(manifest.error());
    }
    return net::json_response(200, manifest->dump(-1, ' ', false, json::error_handler_t::replace));
}

net::Response read_job_outputs(ServiceState& svc, const net::Request& req, const Input&, const Principal& who) {
    auto id = parse_int(req.param("id"), "id");
    if (!id) {
        return error_response(id.error());
    }
    return bytes_response(coordinator::read_output(*svc.coord, who, JobId(*id)));
}

net::Response put_inputs(ServiceState& svc, const net::Request& req, const Input& in, const Principal& who) {
    std::optional<std::string> team;
    if (auto t = req.query_value("team"); !t.empty()) {
        team = t;
    }
    auto st = coordinator::put_inputs(*svc.coord, who, req.param("sha256"), *in.file, team);
    return st ? ok({{"sha256", req.param("sha256")}, {"bytes", in.file->size}}, 201) : error_response(st.error());
}

} // namespace

void add_job_routes(ServiceState& s, net::Router& r) {
    // An input archive is one blob in the store: one byte more than it keeps is refused unread.
    const auto max_upload = static_cast<std::size_t>(s.store->max_blob_bytes()) + 1;
    s.on(r, "POST", "/v1/jobs", submit_jobs, k_submission);
    s.on(r, "GET", "/v1/jobs", list_jobs, k_no_json_body);
    s.on(r, "GET", "/v1/jobs/{id}", show_job, k_no_json_body);
    add_wait_route(s, r);
    s.on(r, "POST", "/v1/jobs/{id}/cancel", cancel_job, k_no_json_body);
    s.on(r, "POST", "/v1/sweeps/{id}/cancel", cancel_sweep, k_no_json_body);
    // A retry names at most a submission's jobs (10,000 ids of 19 digits are 200 KB).
    s.on(r, "POST", "/v1/jobs/retry", retry_jobs,
         Accepts{k_max_json_body_bytes, {Role::member, Role::admin}, true, false, k_max_jobs_per_submission});
    s.on(r, "GET", "/v1/jobs/{id}/logs", read_job_logs, k_no_json_body);
    s.on(r, "GET", "/v1/jobs/{id}/outputs", read_job_outputs, k_no_json_body);
    s.on(r, "GET", "/v1/jobs/{id}/manifest", read_job_manifest, k_no_json_body);
    s.on(r, "PUT", "/v1/inputs/{sha256}", put_inputs, Accepts{max_upload, {Role::member, Role::admin}, false, true});
}

} // namespace gpupool::coordinator::service_detail
