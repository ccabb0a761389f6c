#include "core/api/submit.hpp"

#include "core/api/field_reader.hpp"
#include "core/recipe/recipe_json.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::api {

using nlohmann::json;

Result<std::vector<recipe::JobSpec>> jobs_from_json(const json& body) {
    auto jobs_it = body.find("jobs");
    if (jobs_it == body.end() || !jobs_it->is_array()) {
        return make_error(ErrorCode::invalid_input, "expected an array of jobs", "jobs");
    }
    std::vector<recipe::JobSpec> out;
    out.reserve(jobs_it->size());
    for (std::size_t i = 0; i < jobs_it->size(); ++i) {
        auto spec = recipe::job_from_json((*jobs_it)[i]);
        if (!spec) {
            Error e = spec.error();
            e.field = "jobs[" + std::to_string(i) + "]." + e.field;
            return e;
        }
        out.push_back(std::move(*spec));
    }
    return out;
}

Result<SubmitRequest> submit_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    SubmitRequest req;
    req.source = r.text("source", k_max_text_bytes, req.source);
    req.max_parallel = r.integer("max_parallel", k_min_integer, k_max_integer, 0);
    if (auto it = body.find("team"); body.is_object() && it != body.end() && it->is_string()) {
        req.team = it->get<std::string>(); // anything else: the member's own team, as before
    }
    req.allow_unfunded = r.boolean("allow_unfunded", false);
    req.idempotency_key = r.text("idempotency_key", k_max_text_bytes, std::string());
    if (r.error()) {
        return *r.error();
    }
    auto jobs = jobs_from_json(body);
    if (!jobs) {
        return jobs.error();
    }
    req.jobs = std::move(*jobs);
    return req;
}

json to_json(const SubmitRequest& r) {
    json out = {{"source", r.source}, {"max_parallel", r.max_parallel}, {"jobs", recipe::to_wire_json(r.jobs)}};
    if (r.team) {
        out["team"] = *r.team;
    }
    if (r.allow_unfunded) {
        out["allow_unfunded"] = true;
    }
    if (!r.idempotency_key.empty()) {
        out["idempotency_key"] = r.idempotency_key;
    }
    return out;
}

Result<SubmitReply> submit_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    SubmitReply reply;
    reply.sweep_id = SweepId(r.integer("sweep_id", k_min_integer, k_max_integer));
    reply.jobs = read_ids<JobId>(r, "jobs", true);
    if (r.error()) {
        return *r.error();
    }
    return reply;
}

json to_json(const SubmitReply& r) {
    json ids = json::array();
    for (JobId id : r.jobs) {
        ids.push_back(id.value());
    }
    return {{"sweep_id", r.sweep_id.value()}, {"jobs", ids}};
}

} // namespace gpupool::api
