#include "core/api/jobs.hpp"

#include "core/api/fields.hpp"
#include "core/recipe/recipe_json.hpp"

#include <nlohmann/json.hpp>

#include <initializer_list>

namespace gpupool::api {

using nlohmann::json;
using fields::or_null;

namespace {

// The first error of checks made in order (each reader has already run).
Status first_error(std::initializer_list<Status> checks) {
    for (const auto& st : checks) {
        if (!st) {
            return st;
        }
    }
    return {};
}

template <class Id>
Status typed_id(const json& j, const char* key, Id& out, const std::string& at, bool required = false) {
    std::int64_t v = out.value();
    auto st = fields::integer(j, key, v, at, required);
    out = Id(v);
    return st;
}

std::string element(const std::string& at, const char* key, std::size_t i) {
    return fields::path(at, key) + "[" + std::to_string(i) + "]";
}

// An array member (absent or null: empty), each element read by `read`.
template <class T, class Read>
Status array(const json& j, const char* key, std::vector<T>& out, const std::string& at, Read read) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return {};
    }
    if (!it->is_array()) {
        return make_error(ErrorCode::invalid_input, std::string("expected an array, got ") + it->type_name(),
                          fields::path(at, key));
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
        auto v = read((*it)[i], element(at, key, i));
        if (!v) {
            return v.error();
        }
        out.push_back(std::move(*v));
    }
    return {};
}

Status spec(const json& j, recipe::JobSpec& out) {
    auto it = j.find("spec");
    if (it == j.end() || it->is_null()) {
        return {};
    }
    auto s = recipe::job_from_json(*it);
    if (!s) {
        Error e = s.error();
        e.field = e.field.empty() ? "spec" : "spec." + e.field;
        return e;
    }
    out = std::move(*s);
    return {};
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
            {"voided_at", or_null(a.voided_at)}};
}

Result<AttemptView> attempt_view_from_json(const json& j, const std::string& at) {
    if (auto st = fields::object(j, at); !st) {
        return st.error();
    }
    AttemptView a;
    auto st = first_error({typed_id(j, "id", a.id, at, true), typed_id(j, "worker", a.worker, at),
                           fields::integer(j, "gpu_index", a.gpu_index, at), fields::integer(j, "gpu_milli", a.gpu_milli, at),
                           fields::text(j, "state", a.state, at), fields::integer(j, "assigned_at", a.assigned_at, at),
                           fields::integer(j, "started_at", a.started_at, at), fields::integer(j, "ended_at", a.ended_at, at),
                           fields::integer(j, "exit_code", a.exit_code, at), fields::text(j, "reason", a.reason, at),
                           fields::integer(j, "price_micro_per_hour", a.price_micro_per_hour, at),
                           fields::integer(j, "cost_micro", a.cost_micro, at),
                           fields::integer(j, "voided_at", a.voided_at, at)});
    if (!st) {
        return st.error();
    }
    return a;
}

json to_json(const JobView& v) {
    json history = json::array();
    for (const auto& a : v.attempt_history) {
        history.push_back(to_json(a));
    }
    json out = {{"id", v.id.value()},
                {"sweep_id", v.sweep_id},
                {"team", v.team.value()},
                {"submitted_by", v.submitted_by},
                {"name", v.name},
                {"state", v.state},
                {"attempts", v.attempts},
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
    return out;
}

Result<JobView> job_view_from_json(const json& j) {
    if (auto st = fields::object(j, ""); !st) {
        return st.error();
    }
    JobView v;
    const std::string at;
    auto st = first_error(
        {typed_id(j, "id", v.id, at, true), fields::integer(j, "sweep_id", v.sweep_id, at), typed_id(j, "team", v.team, at),
         fields::text(j, "submitted_by", v.submitted_by, at), fields::text(j, "name", v.name, at),
         fields::text(j, "state", v.state, at, true), fields::integer(j, "attempts", v.attempts, at),
         fields::integer(j, "created_at", v.created_at, at), fields::integer(j, "updated_at", v.updated_at, at),
         fields::integer(j, "finished_at", v.finished_at, at), fields::integer(j, "exit_code", v.exit_code, at),
         fields::text(j, "reason", v.reason, at), fields::text(j, "waiting_reason", v.waiting_reason, at), spec(j, v.spec),
         fields::integer(j, "cost_micro", v.cost_micro, at), fields::integer(j, "held_micro", v.held_micro, at),
         array(j, "attempt_history", v.attempt_history, at, attempt_view_from_json)});
    if (!st) {
        return st.error();
    }
    return v;
}

json to_json(const JobSummary& s) {
    json out = {{"id", s.id.value()},
                {"sweep_id", s.sweep_id},
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
    return out;
}

Result<JobSummary> job_summary_from_json(const json& j, const std::string& at) {
    if (auto st = fields::object(j, at); !st) {
        return st.error();
    }
    JobSummary s;
    auto st = first_error({typed_id(j, "id", s.id, at, true), fields::integer(j, "sweep_id", s.sweep_id, at),
                           typed_id(j, "team", s.team, at), fields::text(j, "team_name", s.team_name, at),
                           fields::text(j, "submitted_by", s.submitted_by, at), fields::text(j, "name", s.name, at),
                           fields::integer(j, "sweep_index", s.sweep_index, at), fields::text(j, "state", s.state, at, true),
                           fields::integer(j, "attempts", s.attempts, at), fields::integer(j, "exit_code", s.exit_code, at),
                           fields::text(j, "reason", s.reason, at), fields::integer(j, "cost_micro", s.cost_micro, at)});
    if (!st) {
        return st.error();
    }
    return s;
}

json to_json(const JobList& list) {
    json jobs = json::array();
    for (const auto& s : list.jobs) {
        jobs.push_back(to_json(s));
    }
    return {{"jobs", std::move(jobs)}, {"more", list.more}};
}

Result<JobList> job_list_from_json(const json& j) {
    if (auto st = fields::object(j, ""); !st) {
        return st.error();
    }
    JobList list;
    auto st = first_error({fields::boolean(j, "more", list.more, ""),
                           array(j, "jobs", list.jobs, "", [](const json& e, const std::string& at) {
                               return job_summary_from_json(e, at);
                           })});
    if (!st) {
        return st.error();
    }
    return list;
}

json to_json(const LogSlice& s) {
    return {{"attempt", s.attempt.value()},
            {"offset", s.offset},
            {"next_offset", s.next_offset},
            {"finished", s.finished},
            {"data", s.data}};
}

Result<LogSlice> log_slice_from_json(const json& j) {
    if (auto st = fields::object(j, ""); !st) {
        return st.error();
    }
    LogSlice s;
    auto st = first_error({typed_id(j, "attempt", s.attempt, "", true), fields::integer(j, "offset", s.offset, ""),
                           fields::integer(j, "next_offset", s.next_offset, "", true),
                           fields::boolean(j, "finished", s.finished, "", true), fields::text(j, "data", s.data, "", true)});
    if (!st) {
        return st.error();
    }
    return s;
}

json to_json(const JobCancelled& c) {
    json ids = json::array();
    for (JobId id : c.cancelled) {
        ids.push_back(id.value());
    }
    return {{"cancelled", std::move(ids)}};
}

Result<JobCancelled> job_cancelled_from_json(const json& j) {
    if (auto st = fields::object(j, ""); !st) {
        return st.error();
    }
    JobCancelled c;
    auto st = array(j, "cancelled", c.cancelled, "", [](const json& e, const std::string& at) -> Result<JobId> {
        if (!e.is_number_integer()) {
            return make_error(ErrorCode::invalid_input, std::string("expected an integer, got ") + e.type_name(), at);
        }
        return JobId(e.get<std::int64_t>());
    });
    if (!st) {
        return st.error();
    }
    return c;
}

json to_json(const SweepCancelled& c) { return {{"sweep_id", c.sweep_id}, {"cancelled", c.cancelled}}; }

Result<SweepCancelled> sweep_cancelled_from_json(const json& j) {
    if (auto st = fields::object(j, ""); !st) {
        return st.error();
    }
    SweepCancelled c;
    auto st = first_error({fields::integer(j, "sweep_id", c.sweep_id, ""),
                           fields::integer(j, "cancelled", c.cancelled, "", true)});
    if (!st) {
        return st.error();
    }
    return c;
}

} // namespace gpupool::api
