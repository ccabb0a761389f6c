#include "core/api/pool.hpp"

#include "core/api/field_reader.hpp"

namespace gpupool::api {

using nlohmann::json;

namespace {

// What the coordinator writes is not trusted to be of the right type; its sizes are the body's.
constexpr std::int64_t k_pool_lo = k_min_integer;
constexpr std::int64_t k_pool_hi = k_max_integer;
constexpr std::size_t k_pool_text = std::size_t{1} << 30;

std::int64_t pool_count(FieldReader& r, const char* key) {
    return r.integer(key, 0, k_pool_hi, 0);
}

} // namespace

json to_json(const PoolGpu& g) {
    return {{"index", g.index},
            {"model", g.model},
            {"memory_mib", g.memory_mib},
            {"allocated_milli", g.allocated_milli},
            {"jobs", g.jobs},
            {"healthy", g.healthy},
            {"memory_enforcement", g.memory_enforcement}};
}

Result<PoolGpu> pool_gpu_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    PoolGpu g;
    g.index = r.integer("index", 0, k_pool_hi);
    g.model = r.text("model", k_pool_text, std::string());
    g.memory_mib = pool_count(r, "memory_mib");
    g.allocated_milli = pool_count(r, "allocated_milli");
    g.jobs = pool_count(r, "jobs");
    g.healthy = r.boolean("healthy", true);
    g.memory_enforcement = r.text("memory_enforcement", k_pool_text, std::string());
    return value_or_error(r, std::move(g));
}

json to_json(const PoolWorker& w) {
    json out = {{"id", w.id.value()},
                {"name", w.name},
                {"team", w.team},
                {"presence", w.presence},
                {"last_seen_at", w.last_seen_at},
                {"gpus", array_json(w.gpus)}};
    if (w.reliability) {
        out["reliability"] = *w.reliability;
    }
    return out;
}

Result<PoolWorker> pool_worker_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    PoolWorker w;
    w.id = WorkerId(r.integer("id", 1, k_pool_hi));
    w.name = r.text("name", k_pool_text, std::string());
    w.team = r.text("team", k_pool_text, std::string());
    w.presence = r.text("presence", k_pool_text, std::string());
    w.last_seen_at = r.integer("last_seen_at", k_pool_lo, k_pool_hi, 0);
    read_each(r, "gpus", false, w.gpus, pool_gpu_from_json);
    if (j.is_object() && j.contains("reliability") && !j["reliability"].is_null()) {
        w.reliability = r.number("reliability", std::nullopt);
    }
    return value_or_error(r, std::move(w));
}

json to_json(const PoolJob& j) {
    json out = {{"id", j.id.value()}, {"name", j.name},   {"team", j.team}, {"submitter", j.submitter},
                {"state", j.state},   {"since", j.since}, {"why", j.why},   {"exit_code", or_null(j.exit_code)}};
    if (j.worker) {
        out["worker"] = j.worker->value();
        out["worker_name"] = j.worker_name;
        out["gpu_index"] = j.gpu_index;
        out["gpu_milli"] = j.gpu_milli;
    }
    return out;
}

Result<PoolJob> pool_job_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    PoolJob p;
    p.id = JobId(r.integer("id", 1, k_pool_hi));
    p.name = r.text("name", k_pool_text, std::string());
    p.team = r.text("team", k_pool_text, std::string());
    p.submitter = r.text("submitter", k_pool_text, std::string());
    p.state = r.text("state", k_pool_text, std::string());
    p.since = r.integer("since", k_pool_lo, k_pool_hi, 0);
    p.why = r.text("why", k_pool_text, std::string());
    p.exit_code = r.optional_integer("exit_code", k_pool_lo, k_pool_hi);
    p.worker = optional_id<WorkerId>(r, "worker");
    p.worker_name = r.text("worker_name", k_pool_text, std::string());
    p.gpu_index = r.integer("gpu_index", k_pool_lo, k_pool_hi, 0);
    p.gpu_milli = pool_count(r, "gpu_milli");
    return value_or_error(r, std::move(p));
}

json to_json(const PoolCredits& c) {
    return {{"team", c.team}, {"balance_micro", c.balance_micro}, {"held_micro", c.held_micro}};
}

Result<PoolCredits> pool_credits_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    PoolCredits c;
    c.team = r.text("team", k_pool_text, std::string());
    c.balance_micro = r.integer("balance_micro", k_pool_lo, k_pool_hi, 0);
    c.held_micro = r.integer("held_micro", k_pool_lo, k_pool_hi, 0);
    return value_or_error(r, std::move(c));
}

json to_json(const PoolTotals& t) {
    return {{"workers", t.workers},
            {"workers_online", t.workers_online},
            {"gpus_online", t.gpus_online},
            {"gpu_milli_online", t.gpu_milli_online},
            {"gpu_milli_allocated", t.gpu_milli_allocated},
            {"gpus_shared", t.gpus_shared},
            {"jobs_queued", t.jobs_queued},
            {"jobs_running", t.jobs_running}};
}

Result<PoolTotals> pool_totals_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    PoolTotals t;
    t.workers = pool_count(r, "workers");
    t.workers_online = pool_count(r, "workers_online");
    t.gpus_online = pool_count(r, "gpus_online");
    t.gpu_milli_online = pool_count(r, "gpu_milli_online");
    t.gpu_milli_allocated = pool_count(r, "gpu_milli_allocated");
    t.gpus_shared = pool_count(r, "gpus_shared");
    t.jobs_queued = pool_count(r, "jobs_queued");
    t.jobs_running = pool_count(r, "jobs_running");
    return value_or_error(r, std::move(t));
}

json to_json(const PoolOverviewReply& o) {
    return {{"at", o.at},
            {"detail", o.detail},
            {"workers", array_json(o.workers)},
            {"running", array_json(o.running)},
            {"queued", array_json(o.queued)},
            {"recent", array_json(o.recent)},
            {"credits", array_json(o.credits)},
            {"totals", to_json(o.totals)}};
}

Result<PoolOverviewReply> pool_overview_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    PoolOverviewReply o;
    o.at = r.integer("at", k_pool_lo, k_pool_hi, 0);
    o.detail = r.text("detail", k_pool_text, std::string());
    read_each(r, "workers", false, o.workers, pool_worker_from_json);
    read_each(r, "running", false, o.running, pool_job_from_json);
    read_each(r, "queued", false, o.queued, pool_job_from_json);
    read_each(r, "recent", false, o.recent, pool_job_from_json);
    read_each(r, "credits", false, o.credits, pool_credits_from_json);
    if (j.is_object() && j.contains("totals") && !j["totals"].is_null() && !r.error()) {
        auto t = pool_totals_from_json(j["totals"], "totals");
        t ? void(o.totals = *t) : r.fail(t.error().message, t.error().field);
    }
    return value_or_error(r, std::move(o));
}

} // namespace gpupool::api
