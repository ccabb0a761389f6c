#include "core/api/submit.hpp"

#include "core/api/fields.hpp"
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
    if (auto st = fields::object(body, ""); !st) {
        return st.error();
    }
    SubmitRequest r;
    if (auto st = fields::text(body, "source", r.source, "", false, k_max_string_field_bytes); !st) {
        return st.error();
    }
    if (auto st = fields::integer(body, "max_parallel", r.max_parallel, ""); !st) {
        return st.error();
    }
    if (auto it = body.find("team"); it != body.end() && it->is_string()) {
        r.team = it->get<std::string>();
    }
    if (auto st = fields::boolean(body, "allow_unfunded", r.allow_unfunded, ""); !st) {
        return st.error();
    }
    if (auto st = fields::text(body, "idempotency_key", r.idempotency_key, "", false, k_max_string_field_bytes); !st) {
        return st.error();
    }
    auto jobs = jobs_from_json(body);
    if (!jobs) {
        return jobs.error();
    }
    r.jobs = std::move(*jobs);
    return r;
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
    if (auto st = fields::object(j, ""); !st) {
        return st.error();
    }
    SubmitReply r;
    if (auto st = fields::integer(j, "sweep_id", r.sweep_id, "", true); !st) {
        return st.error();
    }
    auto it = j.find("jobs");
    if (it == j.end() || !it->is_array()) {
        return make_error(ErrorCode::invalid_input, "expected an array of job ids", "jobs");
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
        const json& id = (*it)[i];
        if (!id.is_number_integer()) {
            return make_error(ErrorCode::invalid_input, std::string("expected an integer, got ") + id.type_name(),
                              "jobs[" + std::to_string(i) + "]");
        }
        r.jobs.emplace_back(id.get<std::int64_t>());
    }
    return r;
}

json to_json(const SubmitReply& r) {
    json ids = json::array();
    for (JobId id : r.jobs) {
        ids.push_back(id.value());
    }
    return {{"sweep_id", r.sweep_id}, {"jobs", ids}};
}

} // namespace gpupool::api
