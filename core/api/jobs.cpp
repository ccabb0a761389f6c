#include "core/api/jobs.hpp"

#include "core/api/field_reader.hpp"
#include "core/recipe/recipe_json.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::api {

using nlohmann::json;

namespace {

// Every member is what the coordinator wrote; none is trusted to be of the right type.
constexpr std::int64_t lo = k_min_integer;
constexpr std::int64_t hi = k_max_integer;
constexpr std::size_t text_max = std::size_t{1} << 30; // reasons and names: the body's cap applies

template <class Id>
Id id_of(FieldReader& r, const char* key, bool required) {
    return Id(r.integer(key, required ? 1 : 0, hi, required ? std::nullopt : std::optional<std::int64_t>(0)));
}

void read_spec(FieldReader& r, const json& j, const std::string& at, recipe::JobSpec& out) {
    if (!j.is_object() || !j.contains("spec") || j["spec"].is_null() || r.error()) {
        return;
    }
    auto s = recipe::job_from_json(j["spec"]);
    if (!s) {
        const std::string spec = at.empty() ? "spec" : at + ".spec";
        r.fail(s.error().message, s.error().field.empty() ? spec : spec + "." + s.error().field);
        return;
    }
    out = std::move(*s);
}

template <class T>
Result<T> done(const FieldReader& r, T value) {
    if (r.error()) {
        return *r.error();
    }
    return value;
}

} // namespace

json to_json(const AttemptView& a) {
    return {{"id", a.id.value()},
            {"worker", a.worker.value()},
            {"gpu_index", a.gpu_index},
            {"gpu_milli", a.gpu_milli},
            {"state", a.state},
            {"assigned_at", a.assigned_at},
            {"started_at", or_null(a.started_at)},
            {"ended_at", or_null(a.ended_at)},
            {"exit_code", or_null(a.exit_code)},
            {"reason", a.reason},
            {"price_micro_per_hour", a.price_micro_per_hour},
            {"cost_micro", a.cost_micro},
            {"voided_at", or_null(a.voided_at)},
            {"retry", a.retry},
            {"unconfirmed", a.unconfirmed}};
}

Result<AttemptView> attempt_view_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    AttemptView a;
    a.id = id_of<AttemptId>(r, "id", true);
    a.worker = id_of<WorkerId>(r, "worker", false);
    a.gpu_index = r.integer("gpu_index", lo, hi, a.gpu_index);
    a.gpu_milli = r.integer("gpu_milli", lo, hi, 0);
    a.state = r.text("state", text_max, std::string());
    a.assigned_at = r.integer("assigned_at", lo, hi, 0);
    a.started_at = r.optional_integer("started_at", lo, hi);
    a.ended_at = r.optional_integer("ended_at", lo, hi);
    a.exit_code = r.optional_integer("exit_code", lo, hi);
    a.reason = r.text("reason", text_max, std::string());
    a.price_micro_per_hour = r.integer("price_micro_per_hour", lo, hi, 0);
    a.cost_micro = r.integer("cost_micro", lo, hi, 0);
    a.voided_at = r.optional_integer("voided_at", lo, hi);
    a.retry = r.integer("retry", 0, hi, 0);
    a.unconfirmed = r.boolean("unconfirmed", false);
    return done(r, std::move(a));
}

json to_json(const JobView& v) {
    json history = json::array();
    for (const auto& a : v.attempt_history) {
        history.push_back(to_json(a));
    }
    json out = {{"id", v.id.value()},
                {"sweep_id", v.sweep_id.value()},
                {"team", v.team.value()},
                {"submitted_by", v.submitted_by},
                {"name", v.name},
                {"state", v.state},
                {"attempts", v.attempts},
                {"retries", v.retries},
                {"created_at", v.created_at},
                {"updated_at", v.updated_at},
                {"finished_at", or_null(v.finished_at)},
                {"exit_code", or_null(v.exit_code)},
                {"reason", v.reason},
                {"waiting_reason", v.waiting_reason},
                {"spec", recipe::to_wire_json(v.spec)},
                {"held_micro", v.held_micro},
                {"attempt_history", std::move(history)}};
    if (v.cost_micro) {
        out["cost_micro"] = *v.cost_micro;
    }
    if (v.check_of) {
        out["check_of"] = *v.check_of;
    }
    return out;
}

Result<JobView> job_view_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    JobView v;
    v.id = id_of<JobId>(r, "id", true);
    v.sweep_id = SweepId(r.integer("sweep_id", lo, hi, 0));
    v.team = id_of<TeamId>(r, "team", false);
    v.submitted_by = r.text("submitted_by", text_max, std::string());
    v.name = r.text("name", text_max, std::string());
    v.state = r.text("state", text_max);
    v.attempts = r.integer("attempts", lo, hi, 0);
    v.retries = r.integer("retries", 0, hi, 0);
    v.created_at = r.integer("created_at", lo, hi, 0);
    v.updated_at = r.integer("updated_at", lo, hi, 0);
    v.finished_at = r.optional_integer("finished_at", lo, hi);
    v.exit_code = r.optional_integer("exit_code", lo, hi);
    v.reason = r.text("reason", text_max, std::string());
    v.waiting_reason = r.text("waiting_reason", text_max, std::string());
    read_spec(r, j, "", v.spec);
    v.cost_micro = r.optional_integer("cost_micro", lo, hi);
    v.held_micro = r.integer("held_micro", lo, hi, 0);
    v.check_of = r.optional_integer("check_of", 1, hi);
    r.elements("attempt_history", false, [&](const json& e, const std::string& at) {
        auto a = attempt_view_from_json(e, at);
        a ? v.attempt_history.push_back(std::move(*a)) : r.fail(a.error().message, a.error().field);
    });
    return done(r, std::move(v));
}

json to_json(const JobSummary& s) {
    json out = {{"id", s.id.value()},
                {"sweep_id", s.sweep_id.value()},
                {"team", s.team.value()},
                {"name", s.name},
                {"sweep_index", s.sweep_index},
                {"state", s.state},
                {"attempts", s.attempts},
                {"exit_code", or_null(s.exit_code)},
                {"reason", s.reason},
                {"cost_micro", s.cost_micro}};
    if (s.team_name) {
        out["team_name"] = *s.team_name;
    }
    if (s.submitted_by) {
        out["submitted_by"] = *s.submitted_by;
    }
    if (s.check_of) {
        out["check_of"] = *s.check_of;
    }
    return out;
}

Result<JobSummary> job_summary_from_json(const json& j, const std::string& at) {
    FieldReader r(j, at);
    r.object();
    JobSummary s;
    s.id = id_of<JobId>(r, "id", true);
    s.sweep_id = SweepId(r.integer("sweep_id", lo, hi, 0));
    s.team = id_of<TeamId>(r, "team", false);
    s.team_name = r.optional_text("team_name", text_max);
    s.submitted_by = r.optional_text("submitted_by", text_max);
    s.name = r.text("name", text_max, std::string());
    s.sweep_index = r.integer("sweep_index", lo, hi, 0);
    s.state = r.text("state", text_max);
    s.attempts = r.integer("attempts", lo, hi, 0);
    s.exit_code = r.optional_integer("exit_code", lo, hi);
    s.reason = r.text("reason", text_max, std::string());
    s.cost_micro = r.integer("cost_micro", lo, hi, 0);
    s.check_of = r.optional_integer("check_of", 1, hi);
    return done(r, std::move(s));
}

json to_json(const JobList& list) {
    json jobs = json::array();
    for (const auto& s : list.jobs) {
        jobs.push_back(to_json(s));
    }
    return {{"jobs", std::move(jobs)}, {"more", list.more}};
}

Result<JobList> job_list_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    JobList list;
    list.more = r.boolean("more", false);
    r.elements("jobs", false, [&](const json& e, const std::string& at) {
        auto s = job_summary_from_json(e, at);
        s ? list.jobs.push_back(std::move(*s)) : r.fail(s.error().message, s.error().field);
    });
    return done(r, std::move(list));
}

json to_json(const JobWaitRequest& w) { return {{"jobs", ids_json(w.jobs)}, {"wait_ms", w.wait_ms}}; }

json to_json(const JobWaitReply& w) {
    json jobs = json::array();
    for (const auto& p : w.jobs) {
        jobs.push_back({{"id", p.id.value()}, {"state", p.state}, {"exit_code", or_null(p.exit_code)}});
    }
    return {{"jobs", std::move(jobs)}, {"done", w.done}};
}

Result<JobWaitRequest> job_wait_request_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    JobWaitRequest w;
    w.jobs = read_ids<JobId>(r, "jobs", true);
    w.wait_ms = r.integer("wait_ms", 0, hi, 0);
    return done(r, std::move(w));
}

Result<JobWaitReply> job_wait_reply_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    JobWaitReply w;
    w.done = r.boolean("done", std::nullopt);
    r.elements("jobs", false, [&](const json& e, const std::string& at) {
        FieldReader er(e, at);
        er.object();
        JobProgress p;
        p.id = JobId(er.integer("id", 1, hi));
        p.state = er.text("state", k_max_text_bytes);
        p.exit_code = er.optional_integer("exit_code", lo, hi);
        er.error() ? r.fail(er.error()->message, er.error()->field) : w.jobs.push_back(std::move(p));
    });
    return done(r, std::move(w));
}

json to_json(const LogSlice& s) {
    return {{"attempt", s.attempt.value()},
            {"offset", s.offset},
            {"next_offset", s.next_offset},
            {"finished", s.finished},
            {"data", s.data}};
}

Result<LogSlice> log_slice_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    LogSlice s;
    s.attempt = id_of<AttemptId>(r, "attempt", false);
    if (!j.is_object() || !j.contains("attempt")) {
        r.fail("missing required field", "attempt");
    }
    s.offset = r.integer("offset", lo, hi, 0);
    s.next_offset = r.integer("next_offset", lo, hi);
    s.finished = r.boolean("finished", std::nullopt);
    s.data = r.text("data", std::string::npos);
    return done(r, std::move(s));
}

json to_json(const JobCancelled& c) {
    json ids = json::array();
    for (JobId id : c.cancelled) {
        ids.push_back(id.value());
    }
    return {{"cancelled", std::move(ids)}};
}

Result<JobCancelled> job_cancelled_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    JobCancelled c;
    c.cancelled = read_ids<JobId>(r, "cancelled");
    return done(r, std::move(c));
}

json to_json(const SweepCancelled& c) { return {{"sweep_id", c.sweep_id.value()}, {"cancelled", c.cancelled}}; }

Result<SweepCancelled> sweep_cancelled_from_json(const json& j) {
    FieldReader r(j, "");
    r.object();
    SweepCancelled c;
    c.sweep_id = SweepId(r.integer("sweep_id", lo, hi, 0));
    c.cancelled = r.integer("cancelled", lo, hi);
    return done(r, c);
}

} // namespace gpupool::api
