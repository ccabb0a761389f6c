#include "core/api/worker_protocol.hpp"

#include "core/api/field_reader.hpp"

namespace gpupool::api {

using nlohmann::json;

namespace {

Error not_an_object(const json& j) {
    return make_error(ErrorCode::invalid_input, std::string("expected an object, got ") + j.type_name(), "body");
}

} // namespace

Result<Registration> registration_from_json(const json& j) {
    if (!j.is_object()) {
        return not_an_object(j);
    }
    FieldReader r(j, "");
    Registration reg;
    reg.name = r.text("name", k_max_text_bytes);
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
    Completion c;
    c.exit_code = r.optional_integer("exit_code", std::numeric_limits<std::int64_t>::min(), k_max_integer);
    c.reason = r.text("reason", k_max_text_bytes, std::string());
    const std::string outcome = r.text("outcome", k_max_text_bytes, std::string("exited"));
    if (r.error()) {
        return *r.error();
    }
    auto parsed = outcome_from_string(outcome);
    if (!parsed) {
        return make_error(ErrorCode::invalid_input,
                          "expected exited, worker_fault or owner_preempted, got `" + outcome + "`", r.name("outcome"));
    }
    c.outcome = *parsed;
    return c;
}

json to_json(const Completion& c) {
    json j{{"reason", c.reason}, {"outcome", to_string(c.outcome)}};
    if (c.exit_code) {
        j["exit_code"] = *c.exit_code;
    }
    return j;
}

} // namespace gpupool::api
