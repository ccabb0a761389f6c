#include "core/api/worker_protocol.hpp"

#include "core/api/field_reader.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

namespace gpupool::api {

using nlohmann::json;

namespace {

Error not_an_object(const json& j) {
    return make_error(ErrorCode::invalid_input, std::string("expected an object, got ") + j.type_name(), "body");
}

// The ErrorCode a batch answer names (to_string's inverse); nullopt for a name this build does not know.
std::optional<ErrorCode> error_code_named(const std::string& name) {
    for (auto code : {ErrorCode::invalid_input, ErrorCode::not_found, ErrorCode::io, ErrorCode::unauthorized,
                      ErrorCode::forbidden, ErrorCode::conflict, ErrorCode::unavailable, ErrorCode::not_implemented,
                      ErrorCode::internal}) {
        if (name == to_string(code)) {
            return code;
        }
    }
    return std::nullopt;
}

// One completion of a batch, read at `path` (`completions[2]`).
Completion completion_at(FieldReader& r) {
    Completion c;
    c.exit_code = r.optional_integer("exit_code", std::numeric_limits<std::int64_t>::min(), k_max_integer);
    c.reason = r.text("reason", k_max_text_bytes, std::string());
    const std::string outcome = r.text("outcome", k_max_text_bytes, std::string("exited"));
    if (!r.error()) {
        if (auto parsed = outcome_from_string(outcome)) {
            c.outcome = *parsed;
        } else {
            r.fail("expected exited, worker_fault, owner_preempted or image_unavailable, got `" + outcome + "`",
                   r.name("outcome"));
        }
    }
    if (!r.error()) {
        if (auto it = r.member_or_null("report"); !it.is_null()) {
            if (auto report = run_report_from_json(it, r.name("report"))) {
                c.report = std::move(*report);
            } else {
                r.fail(report.error().message, report.error().field);
            }
        }
    }
    return c;
}

} // namespace

Result<Registration> registration_from_json(const json& j) {
    if (!j.is_object()) {
        return not_an_object(j);
    }
    FieldReader r(j, "");
    Registration reg;
    reg.name = r.text("name", k_max_worker_name_bytes);
    if (r.error()) {
        return *r.error();
    }
    auto inventory = inventory_from_json(j.value("inventory", json()));
    if (!inventory) {
        return inventory.error();
    }
    reg.inventory = std::move(*inventory);
    if (auto it = j.find("terms"); it != j.end() && !it->is_null()) {
        auto terms = owner_terms_from_json(*it);
        if (!terms) {
            return terms.error();
        }
        reg.terms = std::move(*terms);
    }
    return reg;
}

json to_json(const Registration& reg) {
    json j{{"name", reg.name}, {"inventory", to_json(reg.inventory)}};
    if (reg.terms) {
        j["terms"] = to_json(*reg.terms);
    }
    return j;
}

Result<RegistrationReply> registration_reply_from_json(const json& j) {
    if (!j.is_object()) {
        return not_an_object(j);
    }
    FieldReader r(j, "");
    RegistrationReply reply;
    reply.worker_id = WorkerId(r.integer("worker_id", 1, k_max_integer));
    reply.token = r.text("token", k_max_text_bytes);
    reply.warnings = r.texts("warnings", 64 * 1024);
    if (r.error()) {
        return *r.error();
    }
    return reply;
}

json to_json(const RegistrationReply& reply) {
    return {{"worker_id", reply.worker_id.value()}, {"token", reply.token}, {"warnings", reply.warnings}};
}

Result<Completion> completion_from_json(const json& j) {
    if (!j.is_object()) {
        return not_an_object(j);
    }
    FieldReader r(j, "");
    Completion c = completion_at(r);
    if (r.error()) {
        return *r.error();
    }
    return c;
}

json to_json(const Completion& c) {
    json j{{"reason", c.reason}, {"outcome", to_string(c.outcome)}};
    if (c.exit_code) {
        j["exit_code"] = *c.exit_code;
    }
    if (c.report) {
        j["report"] = to_json(*c.report);
    }
    return j;
}

Result<std::vector<AttemptEnd>> attempt_ends_from_json(const json& j) {
    if (!j.is_object()) {
        return not_an_object(j);
    }
    FieldReader r(j, "");
    std::vector<AttemptEnd> out;
    r.elements("completions", true, [&](const json& e, const std::string& path) {
        if (out.size() == k_max_batch_completions) {
            r.fail("at most " + std::to_string(k_max_batch_completions) + " completions per request", path);
            return;
        }
        FieldReader er(e, path);
        er.object();
        AttemptEnd end;
        end.attempt = AttemptId(er.integer("attempt", 1, k_max_integer));
        end.completion = completion_at(er);
        if (!er.error() && std::any_of(out.begin(), out.end(), [&](const AttemptEnd& o) { return o.attempt == end.attempt; })) {
            er.fail("attempt " + std::to_string(end.attempt.value()) + " is named twice", er.name("attempt"));
        }
        if (er.error()) {
            r.fail(er.error()->message, er.error()->field);
            return;
        }
        out.push_back(std::move(end));
    });
    if (r.error()) {
        return *r.error();
    }
    return out;
}

json to_json(const std::vector<AttemptEnd>& ends) {
    json arr = json::array();
    for (const auto& e : ends) {
        json item = to_json(e.completion);
        item["attempt"] = e.attempt.value();
        arr.push_back(std::move(item));
    }
    return {{"completions", std::move(arr)}};
}

Result<std::vector<EndAnswer>> end_answers_from_json(const json& j) {
    if (!j.is_object()) {
        return not_an_object(j);
    }
    FieldReader r(j, "");
    std::vector<EndAnswer> out;
    r.elements("results", true, [&](const json& e, const std::string& path) {
        FieldReader er(e, path);
        er.object();
        EndAnswer a;
        a.attempt = AttemptId(er.integer("attempt", 1, k_max_integer));
        if (auto code = er.optional_text("error", k_max_text_bytes)) {
            Error err;
            err.code = error_code_named(*code).value_or(ErrorCode::internal);
            err.message = er.text("message", k_max_text_bytes, std::string());
            err.field = er.text("field", k_max_text_bytes, std::string());
            a.error = std::move(err);
        }
        if (er.error()) {
            r.fail(er.error()->message, er.error()->field);
            return;
        }
        out.push_back(std::move(a));
    });
    if (r.error()) {
        return *r.error();
    }
    return out;
}

json to_json(const std::vector<EndAnswer>& answers) {
    json arr = json::array();
    for (const auto& a : answers) {
        json item{{"attempt", a.attempt.value()}};
        if (a.error) {
            item["error"] = to_string(a.error->code);
            item["message"] = a.error->message;
            item["field"] = a.error->field;
        }
        arr.push_back(std::move(item));
    }
    return {{"results", std::move(arr)}};
}

Result<std::vector<AttemptId>> attempt_starts_from_json(const json& j) {
    if (!j.is_object()) {
        return not_an_object(j);
    }
    FieldReader r(j, "");
    std::vector<AttemptId> out;
    r.elements("attempts", true, [&](const json& e, const std::string& path) {
        if (out.size() == k_max_batch_starts) {
            r.fail("at most " + std::to_string(k_max_batch_starts) + " attempts per request", path);
            return;
        }
        if (!e.is_number_integer() || e.get<std::int64_t>() < 1 || e.get<std::int64_t>() > k_max_integer) {
            r.fail("expected an attempt id (a positive integer)", path);
            return;
        }
        const AttemptId id(e.get<std::int64_t>());
        if (std::find(out.begin(), out.end(), id) != out.end()) {
            r.fail("attempt " + std::to_string(id.value()) + " is named twice", path);
            return;
        }
        out.push_back(id);
    });
    if (r.error()) {
        return *r.error();
    }
    return out;
}

json starts_json(const std::vector<AttemptId>& attempts) { return {{"attempts", ids_json(attempts)}}; }

} // namespace gpupool::api
