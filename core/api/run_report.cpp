#include "core/api/run_report.hpp"

#include "core/api/field_reader.hpp"
#include "core/api/inventory.hpp"
#include "core/recipe/image_ref.hpp"

#include <nlohmann/json.hpp>

namespace gpupool::api {

using nlohmann::json;

namespace {

// A printable member of at most k_max_report_text_bytes; absent or null is empty.
std::string report_text(FieldReader& r, const char* key) {
    std::string s = r.text(key, k_max_report_text_bytes, std::string());
    if (!r.error() && !is_printable_text(s)) {
        r.fail("expected printable text (no control characters)", r.name(key));
    }
    return s;
}

// A digest member: empty, or "sha256:" and 64 lowercase hex digits.
std::string report_digest(FieldReader& r, const char* key) {
    std::string s = r.text(key, k_max_report_text_bytes, std::string());
    if (!r.error() && !s.empty() && !is_sha256_digest(s)) {
        r.fail("expected \"sha256:\" and 64 lowercase hex digits", r.name(key));
    }
    return s;
}

} // namespace

bool is_sha256_digest(std::string_view digest) {
    constexpr std::string_view prefix = "sha256:";
    return digest.starts_with(prefix) && recipe::is_lower_hex(digest.substr(prefix.size()), 64);
}

Result<RunReport> run_report_from_json(const json& j, const std::string& field) {
    if (!j.is_object()) {
        return make_error(ErrorCode::invalid_input, std::string("expected an object, got ") + j.type_name(), field);
    }
    FieldReader r(j, field);
    RunReport out;
    out.runtime = report_text(r, "runtime");
    out.image_digest = report_digest(r, "image_digest");
    out.image_id = report_digest(r, "image_id");
    out.image_digest_unknown = report_text(r, "image_digest_unknown");
    out.gpu_model = report_text(r, "gpu_model");
    out.gpu_uuid = report_text(r, "gpu_uuid");
    out.driver_version = report_text(r, "driver_version");
    out.cuda_version = report_text(r, "cuda_version");
    out.enforcement = report_text(r, "enforcement");
    r.elements("models", false, [&](const json& e, const std::string& at) {
        if (out.models.size() == k_max_report_models) {
            r.fail("at most " + std::to_string(k_max_report_models) + " models", at);
            return;
        }
        if (!e.is_object()) {
            r.fail(std::string("expected an object, got ") + e.type_name(), at);
            return;
        }
        FieldReader m(e, at);
        MountedModel mm;
        mm.model = report_text(m, "model");
        mm.revision = report_text(m, "revision");
        if (m.error()) {
            r.fail(m.error()->message, m.error()->field);
            return;
        }
        out.models.push_back(std::move(mm));
    });
    out.started_at_ms = r.integer("started_at_ms", 0, k_max_integer, 0);
    out.ended_at_ms = r.integer("ended_at_ms", 0, k_max_integer, 0);
    out.worker_version = report_text(r, "worker_version");
    if (r.error()) {
        return *r.error();
    }
    return out;
}

json to_json(const RunReport& report) {
    json models = json::array();
    for (const auto& m : report.models) {
        models.push_back({{"model", m.model}, {"revision", m.revision}});
    }
    return {{"runtime", report.runtime},
            {"image_digest", report.image_digest},
            {"image_id", report.image_id},
            {"image_digest_unknown", report.image_digest_unknown},
            {"gpu_model", report.gpu_model},
            {"gpu_uuid", report.gpu_uuid},
            {"driver_version", report.driver_version},
            {"cuda_version", report.cuda_version},
            {"enforcement", report.enforcement},
            {"models", std::move(models)},
            {"started_at_ms", report.started_at_ms},
            {"ended_at_ms", report.ended_at_ms},
            {"worker_version", report.worker_version}};
}

} // namespace gpupool::api
