#include "core/client/jobs_client.hpp"

#include "core/client/read_answer.hpp"
#include "core/net/url.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::client {

using nlohmann::json;

namespace {

std::string job_path(JobId id) { return "/v1/jobs/" + std::to_string(id.value()); }

} // namespace

Result<api::SubmitReply> JobsClient::submit(const api::SubmitRequest& request) {
    return read_answer(m_api.post("/v1/jobs", api::to_json(request)), "POST /v1/jobs", api::submit_reply_from_json);
}

Result<api::JobView> JobsClient::job(JobId id) {
    const std::string path = job_path(id);
    return read_answer(m_api.get(path), "GET " + path, api::job_view_from_json);
}

Result<api::JobWaitReply> JobsClient::wait(const std::vector<JobId>& ids, std::chrono::milliseconds wait) {
    return read_answer(m_api.post("/v1/jobs/wait", api::to_json(api::JobWaitRequest{ids, wait.count()})),
                       "POST /v1/jobs/wait", api::job_wait_reply_from_json);
}

Result<api::JobList> JobsClient::jobs(const JobsQuery& q) {
    net::QueryParams params;
    if (!q.state.empty()) {
        params.emplace_back("state", q.state);
    }
    if (q.sweep.value() > 0) {
        params.emplace_back("sweep", std::to_string(q.sweep.value()));
    }
    if (q.limit > 0) {
        params.emplace_back("limit", std::to_string(q.limit));
    }
    if (q.all_teams) {
        params.emplace_back("all_teams", "1");
    }
    if (!q.submitted_by.empty()) {
        params.emplace_back("submitter", q.submitted_by);
    }
    if (q.mine) {
        params.emplace_back("mine", "1");
    }
    const std::string path = net::with_query("/v1/jobs", params);
    return read_answer(m_api.get(path), "GET /v1/jobs", api::job_list_from_json);
}

Result<api::JobCancelled> JobsClient::cancel_job(JobId id) {
    const std::string path = job_path(id) + "/cancel";
    return read_answer(m_api.post(path, json::object()), "POST " + path, api::job_cancelled_from_json);
}

Result<api::SweepCancelled> JobsClient::cancel_sweep(SweepId sweep) {
    const std::string path = "/v1/sweeps/" + std::to_string(sweep.value()) + "/cancel";
    return read_answer(m_api.post(path, json::object()), "POST " + path, api::sweep_cancelled_from_json);
}

Result<api::RetryReply> JobsClient::retry(const api::RetryRequest& request) {
    return read_answer(m_api.post("/v1/jobs/retry", api::to_json(request)), "POST /v1/jobs/retry",
                       api::retry_reply_from_json);
}

Result<api::LogSlice> JobsClient::logs(JobId id, std::int64_t offset, std::optional<AttemptId> attempt) {
    net::QueryParams params{{"offset", std::to_string(offset)}};
    if (attempt) {
        params.emplace_back("attempt", std::to_string(attempt->value()));
    }
    const std::string path = job_path(id) + "/logs";
    return read_answer(m_api.get(net::with_query(path, params)), "GET " + path, api::log_slice_from_json);
}

Result<std::string> JobsClient::outputs(JobId id) { return m_api.get_bytes(job_path(id) + "/outputs"); }

Result<nlohmann::json> JobsClient::manifest(JobId id, std::optional<AttemptId> attempt) {
    std::string path = job_path(id) + "/manifest";
    if (attempt) {
        path = net::with_query(path, {{"attempt", std::to_string(attempt->value())}});
    }
    auto m = m_api.get(path);
    if (m && (!m->is_object() || !m->contains("manifest_version"))) {
        return make_error(ErrorCode::internal, "the coordinator's manifest is not an object with manifest_version",
                          "manifest");
    }
    return m;
}

} // namespace gpupool::client
