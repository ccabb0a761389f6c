#include "core/api/assignment.hpp"

#include "core/api/field_reader.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/resources/quantity.hpp"

namespace gpupool::api {

using nlohmann::json;

Result<Assignment> assignment_from_json(const json& j, const std::string& field) {
    if (!j.is_object()) {
        return make_error(ErrorCode::invalid_input, std::string("expected an object, got ") + j.type_name(), field);
    }
    FieldReader r(j, field);
    Assignment a;
    a.attempt = AttemptId(r.integer("attempt", 1, k_max_integer));
    a.job = JobId(r.integer("job", 1, k_max_integer));
    a.attempt_number = r.integer("attempt_number", 1, k_max_integer, 1);
    a.gpu_index = r.integer("gpu_index", -1, k_max_integer, -1);
    a.gpu_milli = r.integer("gpu_milli", 0, resources::k_milli_per_gpu, 0);
    a.team = TeamId(r.integer("team", 0, k_max_integer, 0));
    a.team_name = r.text("team_name", k_max_team_name_bytes, std::string());
    a.idle_timeout_s = r.integer("idle_timeout_s", 0, resources::k_max_duration_s, 0);
    if (r.error()) {
        return *r.error();
    }
    auto spec_it = j.find("spec");
    if (spec_it == j.end() || !spec_it->is_object()) {
        return make_error(ErrorCode::invalid_input, "expected the job's spec (an object)", r.name("spec"));
    }
    auto spec = recipe::job_from_json(*spec_it);
    if (!spec) {
        Error e = spec.error();
        e.field = r.name("spec") + (e.field.empty() ? "" : "." + e.field);
        return e;
    }
    a.spec = std::move(*spec);
    return a;
}

json to_json(const Assignment& a) {
    return {{"attempt", a.attempt.value()},       {"job", a.job.value()},
            {"attempt_number", a.attempt_number}, {"gpu_index", a.gpu_index},
            {"gpu_milli", a.gpu_milli},           {"team", a.team.value()},
            {"team_name", a.team_name},           {"idle_timeout_s", a.idle_timeout_s},
            {"spec", recipe::to_wire_json(a.spec)}};
}

} // namespace gpupool::api
