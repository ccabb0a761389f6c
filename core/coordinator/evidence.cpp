#include "core/coordinator/evidence.hpp"

#include "core/api/field_reader.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/spot_checks.hpp"
#include "core/util/sha256.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace gpupool::coordinator {

using nlohmann::json;
using store::AttemptRecord;
using store::EvidenceRecord;
using store::JobRecord;

namespace {

constexpr const char* k_run_kind = "run";
constexpr const char* k_outputs_kind = "outputs";

json spec_env(const recipe::EnvList& env) {
    json out = json::object();
    for (const auto& [name, value] : env) {
        out[name] = secret_looking(name) ? "sha256:" + util::sha256_hex(value) : value;
    }
    return out;
}

json spec_params(const recipe::EnvList& params) {
    json out = json::object();
    for (const auto& [name, value] : params) {
        out[name] = value;
    }
    return out;
}

json recipe_part(const recipe::JobSpec& spec, const store::SweepRecord* sweep) {
    json origins = json::array();
    for (const auto& o : spec.origins) {
        origins.push_back({{"recipe", o.recipe}, {"repo", o.repo}, {"revision", o.revision}});
    }
    return {{"source", sweep != nullptr ? sweep->source : std::string()},
            {"sha256", spec.recipe_sha256},
            {"origins", std::move(origins)}};
}

// The models the job named, each with the revision its worker mounted (from the run report).
json models_part(const recipe::JobSpec& spec, const json& run, json& unknown) {
    json out = json::array();
    for (const auto& m : spec.cache_models) {
        std::string revision;
        if (run.is_object()) {
            for (const auto& r : run.value("models", json::array())) {
                if (r.value("model", "") == m) {
                    revision = r.value("revision", "");
                }
            }
        }
        if (revision.empty()) {
            unknown.push_back("the revision of model " + m + ": its worker did not say");
        }
        out.push_back({{"model", m}, {"revision", revision}});
    }
    return out;
}

json image_part(const recipe::JobSpec& spec, const json& run, json& unknown) {
    json out{{"reference", spec.image}, {"digest", ""}, {"id", ""}};
    if (run.is_object()) {
        out["digest"] = run.value("image_digest", "");
        out["id"] = run.value("image_id", "");
        if (out["digest"] == "" && out["id"] == "") {
            const std::string why = run.value("image_digest_unknown", "");
            unknown.push_back("the image's digest: " + (why.empty() ? std::string("its worker did not say") : why));
        }
    }
    return out;
}

json attempt_part(const AttemptRecord& a, std::int64_t number) {
    using api::or_null;
    return {{"id", a.id.value()},
            {"number", number},
            {"retry", a.retry},
            {"state", to_string(a.state)},
            {"exit_code", or_null(a.exit_code)},
            {"reason", a.reason},
            {"assigned_at", a.assigned_at},
            {"started_at", or_null(a.started_at)},
            {"ended_at", or_null(a.ended_at)},
            {"gpu_index", a.gpu_index},
            {"gpu_milli", a.gpu_milli},
            {"voided_at", or_null(a.voided_at)}};
}

json worker_part(const Coordinator& pool, const AttemptRecord& a, const json& run, json& unknown) {
    json out{{"id", a.worker.value()}};
    const auto& workers = pool.roster().workers();
    if (auto it = workers.find(a.worker); it != workers.end()) {
        const auto& record = it->second.record;
        out["name"] = record.name;
        const auto& teams = pool.tokens().teams();
        auto team = teams.find(record.team);
        out["owner_team"] = team != teams.end() ? team->second.name : std::string();
    }
    // The run report's members, under the manifest's names.
    for (const auto& [key, reported] : {std::pair{"runtime", "runtime"},
                                        {"gpu_model", "gpu_model"},
                                        {"gpu_uuid", "gpu_uuid"},
                                        {"driver_version", "driver_version"},
                                        {"cuda_version", "cuda_version"},
                                        {"enforcement", "enforcement"},
                                        {"version", "worker_version"}}) {
        out[key] = run.is_object() ? run.value(reported, "") : std::string();
    }
    if (!run.is_object()) {
        unknown.push_back("what the worker ran (image digest, GPU, driver, share enforcement, models): it did not "
                          "report it");
    } else {
        if (a.gpu_index >= 0 && run.value("driver_version", "").empty()) {
            unknown.push_back("the GPU driver's version: its worker did not say");
        }
        out["clock"] = {{"started_at_ms", run.value("started_at_ms", 0)}, {"ended_at_ms", run.value("ended_at_ms", 0)}};
    }
    return out;
}

json outputs_part(const json& outputs, const AttemptRecord& a, json& unknown) {
    if (outputs.is_object()) {
        return outputs;
    }
    if (a.state == store::AttemptState::succeeded) {
        // A worker uploads nothing when the job wrote nothing: the empty archive.
        return {{"archive_sha256", ""}, {"entry_count", 0}, {"file_bytes", 0}, {"entries", json::array()},
                {"note", "no outputs came back (the job wrote none)"}};
    }
    unknown.push_back("outputs: none came back");
    return json();
}

} // namespace

bool secret_looking(std::string_view name) {
    std::string upper(name);
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    for (const char* word : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"}) {
        if (upper.find(word) != std::string::npos) {
            return true;
        }
    }
    return false;
}

json evidence_piece(const std::vector<EvidenceRecord>& evidence, std::string_view kind) {
    for (const auto& e : evidence) {
        if (e.kind == kind) {
            return json::parse(e.json, nullptr, false);
        }
    }
    return json();
}

void stage_run_report(AttemptId attempt, const api::RunReport& report, store::Changes& changes) {
    changes.evidence.push_back(EvidenceRecord{attempt, k_run_kind, api::to_json(report).dump()});
}

Status record_outputs(Coordinator& pool, AttemptId attempt, const UploadedFile& file) {
    json body{{"archive_sha256", file.sha256_hex}, {"archive_bytes", file.size}};
    if (file.listing) {
        body.update(archive::to_json(*file.listing));
    } else {
        body["error"] = "the archive could not be listed: " +
                        (file.listing_error.empty() ? std::string("it was not read") : file.listing_error);
    }
    store::Changes c;
    // Names and texts are the job's bytes: not always UTF-8 (replaced, never a throw).
    c.evidence.push_back(
        EvidenceRecord{attempt, k_outputs_kind, body.dump(-1, ' ', false, json::error_handler_t::replace)});
    // The small JSON files, for a spot check that compares by value (spot_checks.hpp): kept only for
    // a job that may be checked so, or that is a check.
    const auto a = pool.job_book().attempts().find(attempt);
    const JobRecord* job = a == pool.job_book().attempts().end() ? nullptr : &pool.job_book().jobs().at(a->second.job);
    const bool checked_by_value = job != nullptr && job->spec.verify.compare == recipe::CompareMode::json &&
                                  (pool.options().spot_checks.fraction > 0.0 || job->is_check());
    if (file.listing && checked_by_value) {
        const json values{{"files", file.listing->json_texts}, {"skipped", file.listing->json_skipped}};
        c.evidence.push_back(
            EvidenceRecord{attempt, k_values_evidence, values.dump(-1, ' ', false, json::error_handler_t::replace)});
    }
    return pool.commit(c);
}

Result<json> job_manifest(Coordinator& pool, const Principal& who, JobId id, std::optional<AttemptId> attempt) {
    auto j = detail::visible_job(pool, who, id);
    if (!j) {
        return j.error();
    }
    const JobRecord& job = **j;
    const auto& book = pool.job_book();
    const auto by_job = book.attempts_by_job().find(id);
    if (by_job == book.attempts_by_job().end() || by_job->second.empty()) {
        return make_error(ErrorCode::not_found, "job " + std::to_string(id.value()) + " has not run yet: no manifest");
    }
    const auto& ids = by_job->second;
    AttemptId chosen = book.latest_attempt().count(id) != 0 ? book.latest_attempt().at(id) : ids.back();
    if (attempt) {
        if (std::find(ids.begin(), ids.end(), *attempt) == ids.end()) {
            return make_error(ErrorCode::not_found, "attempt " + std::to_string(attempt->value()) +
                                                        " is not an attempt of job " + std::to_string(id.value()),
                              "attempt");
        }
        chosen = *attempt;
    }
    const AttemptRecord& a = book.attempts().at(chosen);
    const std::int64_t number = std::find(ids.begin(), ids.end(), chosen) - ids.begin() + 1;
    auto evidence = pool.blobs().evidence(chosen);
    if (!evidence) {
        return evidence.error();
    }
    const json run = evidence_piece(*evidence, k_run_kind);
    const json outputs = evidence_piece(*evidence, k_outputs_kind);
    const auto sweep = book.sweeps().find(job.sweep_id);
    const recipe::JobSpec& spec = job.spec;
    json unknown = json::array();
    json m{{"manifest_version", k_manifest_version},
           {"job",
            {{"id", id.value()},
             {"name", spec.name},
             {"sweep", job.sweep_id.value()},
             {"sweep_index", spec.sweep_index},
             {"params", spec_params(spec.params)},
             {"state", to_string(job.state)}}},
           {"recipe", recipe_part(spec, sweep != book.sweeps().end() ? &sweep->second : nullptr)},
           {"image", image_part(spec, run, unknown)},
           {"command", spec.argv()},
           {"env", spec_env(spec.env)},
           {"inputs", {{"archive_sha256", spec.inputs.archive}, {"bytes", spec.inputs.total_bytes}}},
           {"resources",
            {{"gpus", spec.resources.gpus},
             {"gpu_milli", spec.resources.gpu_milli},
             {"gpu_memory_mib", spec.resources.gpu_memory_mib},
             {"cpu_milli", spec.resources.cpu_milli},
             {"memory_mib", spec.resources.memory_mib}}},
           {"attempt", attempt_part(a, number)}};
    m["models"] = models_part(spec, run, unknown);
    m["worker"] = worker_part(pool, a, run, unknown);
    m["outputs"] = outputs_part(outputs, a, unknown);
    // Spot checks (spot_checks.hpp): this result's, and, for a check job, the result it checks.
    if (const json check = evidence_piece(*evidence, k_check_evidence); check.is_object()) {
        m["check"] = check;
    }
    if (job.check_of) {
        const auto checked = book.attempts().find(*job.check_of);
        m["check_of"] = {{"attempt", job.check_of->value()},
                         {"job", checked == book.attempts().end() ? json() : json(checked->second.job.value())},
                         {"tie_break_against", job.check_against ? json(job.check_against->value()) : json()}};
    }
    if (spec.recipe_sha256.empty()) {
        unknown.push_back("the recipe's digest: the client that submitted the job did not send it");
    }
    m["unknown"] = std::move(unknown);
    return Result<json>(boost::system::in_place_value, std::move(m));
}

} // namespace gpupool::coordinator
