#include "core/api/retry.hpp"

#include "core/api/field_reader.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::api {

using nlohmann::json;

Result<RetryRequest> retry_request_from_json(const json& body) {
    FieldReader r(body, "");
    r.object();
    RetryRequest req;
    req.jobs = read_ids<JobId>(r, "jobs");
    req.sweep = SweepId(r.integer("sweep", 1, k_max_integer, 0));
    req.states = r.texts("states", k_max_text_bytes);
    req.allow_unfunded = r.boolean("allow_unfunded", false);
    req.idempotency_key = r.text("idempotency_key", k_max_text_bytes, std::string());
    if (r.error()) {
        return *r.error();
    }
    if (req.jobs.empty() == (req.sweep.value() == 0)) {
        return make_error(ErrorCode::invalid_input, "name either jobs (`jobs`: ids) or one sweep (`sweep`: an id)",
                          req.jobs.empty() ? "jobs" : "sweep");
    }
    if (!req.states.empty() && req.sweep.value() == 0) {
        return make_error(ErrorCode::invalid_input, "`states` picks a sweep's jobs: it needs `sweep`", "states");
    }
    for (std::size_t i = 0; i < req.states.size(); ++i) {
        if (req.states[i] != "failed" && req.states[i] != "cancelled") {
            return make_error(ErrorCode::invalid_input,
                              "only failed or cancelled jobs are retried, not `" + req.states[i] + "`",
                              "states[" + std::to_string(i) + "]");
        }
    }
    return req;
}

json to_json(const RetryRequest& r) {
    json out = json::object();
    if (!r.jobs.empty()) {
        out["jobs"] = ids_json(r.jobs);
    }
    if (r.sweep.value() > 0) {
        out["sweep"] = r.sweep.value();
    }
    if (!r.states.empty()) {
        out["states"] = r.states;
    }
    if (r.allow_unfunded) {
        out["allow_unfunded"] = true;
    }
    if (!r.idempotency_key.empty()) {
        out["idempotency_key"] = r.idempotency_key;
    }
    return out;
}

Result<RetryReply> retry_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    RetryReply reply;
    r.elements("jobs", true, [&](const json& e, const std::string& at) {
        FieldReader one(e, at);
        one.object();
        RetriedJob job;
        job.id = JobId(one.integer("id", 1, k_max_integer));
        job.retry = one.integer("retry", 1, k_max_integer);
        one.error() ? r.fail(one.error()->message, one.error()->field) : reply.jobs.push_back(job);
    });
    if (r.error()) {
        return *r.error();
    }
    return reply;
}

json to_json(const RetryReply& reply) {
    json jobs = json::array();
    for (const auto& j : reply.jobs) {
        jobs.push_back({{"id", j.id.value()}, {"retry", j.retry}});
    }
    return {{"jobs", std::move(jobs)}};
}

} // namespace gpupool::api
