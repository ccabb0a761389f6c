#include "core/recipe/recipe_json.hpp"

#include "core/recipe/field_rules.hpp"
#include "core/recipe/image_ref.hpp"
#include "core/recipe/parser.hpp"
#include "core/resources/quantity.hpp"
#include "core/util/strings.hpp"

namespace gpupool::recipe {

namespace {

template <class Json>
Json env_json(const EnvList& env) {
    Json out = Json::object();
    for (const auto& [k, v] : env) {
        out[k] = v;
    }
    return out;
}

Error field_error(const std::string& field, const std::string& message) {
    return make_error(ErrorCode::invalid_input, message, field);
}

// Reads an optional field of an expected JSON type; records the first error.
class Reader {
public:
    explicit Reader(const nlohmann::json& j) : m_j(j) {}

    template <class T>
    void get(const char* key, T& out, const std::string& field, bool required = false) {
        if (m_error) {
            return;
        }
        auto it = m_j.find(key);
        if (it == m_j.end() || it->is_null()) {
            if (required) {
                m_error = field_error(field, "missing required field");
            }
            return;
        }
        try {
            out = it->get<T>();
        } catch (const nlohmann::json::exception&) {
            m_error = field_error(field, std::string("wrong type: got ") + it->type_name());
        }
    }

    void env(const char* key, EnvList& out, const std::string& field) {
        if (m_error) {
            return;
        }
        auto it = m_j.find(key);
        if (it == m_j.end() || it->is_null()) {
            return;
        }
        if (!it->is_object()) {
            m_error = field_error(field, std::string("expected an object, got ") + it->type_name());
            return;
        }
        for (const auto& [k, v] : it->items()) {
            if (!v.is_string()) {
                m_error = field_error(field + "." + k, std::string("expected a string, got ") + v.type_name());
                return;
            }
            out.emplace_back(k, v.get<std::string>());
        }
    }

    const nlohmann::json* object(const char* key, const std::string& field) {
        if (m_error) {
            return nullptr;
        }
        auto it = m_j.find(key);
        if (it == m_j.end() || it->is_null()) {
            return nullptr;
        }
        if (!it->is_object()) {
            m_error = field_error(field, std::string("expected an object, got ") + it->type_name());
            return nullptr;
        }
        return &*it;
    }

    std::optional<Error>& error() { return m_error; }
    void fail(Error e) {
        if (!m_error) {
            m_error = std::move(e);
        }
    }

private:
    const nlohmann::json& m_j;
    std::optional<Error> m_error;
};

// `field[i]` for list elements, `field.KEY` for map entries (the key made printable).
std::string element(const std::string& field, std::size_t i) {
    return field + "[" + std::to_string(i) + "]";
}

std::string entry(const std::string& field, const std::string& key) {
    return field + "." + util::escape_control(key);
}

Status with_field(Status st, const std::string& field) {
    if (!st) {
        Error e = st.error();
        e.field = field;
        return e;
    }
    return {};
}

// The checks of the strings that reach a worker's command line, environment or file paths: the
// same rules as the TOML parser's (field_rules.hpp, image_ref.hpp).
Status check_strings(const JobSpec& job) {
    if (has_control_character(job.name)) {
        return field_error("name", "must not contain control characters");
    }
    if (auto st = with_field(validate_image_reference(job.image), "image"); !st) {
        return st;
    }
    for (std::size_t i = 0; i < job.command.size(); ++i) {
        if (auto st = with_field(check_no_nul(job.command[i]), element("command", i)); !st) {
            return st;
        }
    }
    for (const auto& [key, value] : job.env) {
        if (auto st = with_field(check_env_name(key), entry("env", key)); !st) {
            return st;
        }
        if (auto st = with_field(check_no_nul(value), entry("env", key)); !st) {
            return st;
        }
    }
    if (!job.recipe_sha256.empty() && !is_lower_hex(job.recipe_sha256, 64)) {
        return field_error("recipe_sha256", "expected 64 lowercase hex digits (the recipe file's SHA-256)");
    }
    for (const auto& [key, value] : job.params) {
        if (!util::is_identifier(key)) {
            return field_error(entry("params", key), "sweep parameter names use letters, digits and _");
        }
        if (auto st = with_field(check_no_nul(value), entry("params", key)); !st) {
            return st;
        }
    }
    for (std::size_t i = 0; i < job.cache_models.size(); ++i) {
        if (auto st = with_field(check_model_id(job.cache_models[i]), element("cache_models", i)); !st) {
            return st;
        }
    }
    const auto& models = job.resources.gpu_models;
    for (std::size_t i = 0; i < models.size(); ++i) {
        if (models[i].empty() || has_control_character(models[i])) {
            return field_error(element("resources.gpu_models", i),
                               "a GPU model name is not empty and has no control characters");
        }
    }
    for (std::size_t i = 0; i < job.outputs.paths.size(); ++i) {
        if (auto st = with_field(check_output_path(job.outputs.paths[i]), element("outputs.paths", i)); !st) {
            return st;
        }
    }
    // Input paths are as written in the recipe (an absolute path or `../x` names a file on the
    // submitter's disk, which the parser allows); the worker reads the shipped archive, never these.
    for (std::size_t i = 0; i < job.inputs.paths.size(); ++i) {
        if (job.inputs.paths[i].empty()) {
            return field_error(element("inputs.paths", i), "must not be empty");
        }
        if (auto st = with_field(check_no_nul(job.inputs.paths[i]), element("inputs.paths", i)); !st) {
            return st;
        }
    }
    return {};
}

} // namespace

namespace {

// One JobSpec as JSON of either kind: ordered (the CLI's --json, fields in the recipe's order) or
// plain (request and reply bodies, built directly rather than dumped and parsed again).
template <class Json>
Json spec_json(const JobSpec& job) {
    const Resources& r = job.resources;
    Json resources = {
        {"gpus", r.gpus},
        {"gpu_milli", r.gpu_milli},
        {"gpu_memory_mib", r.gpu_memory_mib},
        {"gpu_models", r.gpu_models},
        {"cpu_milli", r.cpu_milli},
        {"memory_mib", r.memory_mib},
        {"disk_mib", r.disk_mib},
        {"max_runtime_s", r.max_runtime_s},
        {"idle_timeout_s", r.idle_timeout_s},
    };
    Json out = {
        {"name", job.name},
        {"image", job.image},
        {"command", job.command},
        {"shell", job.shell},
        {"env", env_json<Json>(job.env)},
        {"resources", resources},
        {"inputs",
         {{"paths", job.inputs.paths}, {"max_size_mib", job.inputs.max_size_mib}, {"archive", job.inputs.archive}}},
        {"outputs", {{"paths", job.outputs.paths}, {"max_size_mib", job.outputs.max_size_mib}}},
        {"logs", {{"max_size_mib", job.logs.max_size_mib}}},
        {"cache_models", job.cache_models},
        {"retry", {{"max_attempts", job.retry.max_attempts}, {"on_exit_codes", job.retry.on_exit_codes}}},
        {"priority", to_string(job.priority)},
        {"params", env_json<Json>(job.params)},
        {"sweep_index", job.sweep_index},
    };
    // Only when declared: the spec of a job without them stays as it was, and an older one reads as
    // the defaults.
    if (job.model_use != resources::ModelUse{}) {
        out["model_use"] = {
            {"dtype", job.model_use.dtype}, {"max_tokens", job.model_use.max_tokens}, {"batch", job.model_use.batch}};
    }
    if (job.checkpoint.every_s > 0) {
        out["checkpoint"] = {{"every_s", job.checkpoint.every_s}, {"grace_s", job.checkpoint.grace_s}};
    }
    if (job.verify != Verify{}) {
        out["verify"] = {{"compare", to_string(job.verify.compare)},
                         {"tolerance", job.verify.tolerance},
                         {"files", job.verify.files}};
    }
    // Only when there are some: the spec of a job from a local file stays as it was.
    if (!job.origins.empty()) {
        Json origins = Json::array();
        for (const auto& o : job.origins) {
            origins.push_back({{"recipe", o.recipe}, {"repo", o.repo}, {"revision", o.revision}});
        }
        out["origins"] = std::move(origins);
    }
    if (!job.recipe_sha256.empty()) {
        out["recipe_sha256"] = job.recipe_sha256;
    }
    return out;
}

template <class Json>
Json specs_json(const std::vector<JobSpec>& jobs) {
    Json out = Json::array();
    for (const auto& j : jobs) {
        out.push_back(spec_json<Json>(j));
    }
    return out;
}

} // namespace

nlohmann::ordered_json to_json(const JobSpec& job) { return spec_json<nlohmann::ordered_json>(job); }

nlohmann::json to_wire_json(const JobSpec& job) { return spec_json<nlohmann::json>(job); }

nlohmann::json to_wire_json(const std::vector<JobSpec>& jobs) { return specs_json<nlohmann::json>(jobs); }

nlohmann::ordered_json to_json(const std::vector<JobSpec>& jobs) { return specs_json<nlohmann::ordered_json>(jobs); }

namespace {

// The nested objects: resources, inputs, outputs, logs, retry; problems go to `rd`.
void read_tables(Reader& rd, JobSpec& job) {
    if (const auto* r = rd.object("resources", "resources")) {
        Reader rr(*r);
        Resources& res = job.resources;
        rr.get("gpus", res.gpus, "resources.gpus");
        rr.get("gpu_milli", res.gpu_milli, "resources.gpu_milli");
        rr.get("gpu_memory_mib", res.gpu_memory_mib, "resources.gpu_memory_mib");
        rr.get("gpu_models", res.gpu_models, "resources.gpu_models");
        rr.get("cpu_milli", res.cpu_milli, "resources.cpu_milli");
        rr.get("memory_mib", res.memory_mib, "resources.memory_mib");
        rr.get("disk_mib", res.disk_mib, "resources.disk_mib");
        rr.get("max_runtime_s", res.max_runtime_s, "resources.max_runtime_s");
        rr.get("idle_timeout_s", res.idle_timeout_s, "resources.idle_timeout_s");
        if (rr.error()) {
            rd.fail(*rr.error());
        }
    }
    if (const auto* in = rd.object("inputs", "inputs")) {
        Reader ri(*in);
        ri.get("paths", job.inputs.paths, "inputs.paths");
        ri.get("max_size_mib", job.inputs.max_size_mib, "inputs.max_size_mib");
        ri.get("archive", job.inputs.archive, "inputs.archive");
        if (!job.inputs.archive.empty() && !is_lower_hex(job.inputs.archive, 64)) {
            rd.fail(make_error(ErrorCode::invalid_input, "must be the lowercase hex SHA-256 of an uploaded archive",
                               "inputs.archive"));
        }
        if (ri.error()) {
            rd.fail(*ri.error());
        }
    }
    if (const auto* out = rd.object("outputs", "outputs")) {
        Reader ro(*out);
        ro.get("paths", job.outputs.paths, "outputs.paths");
        ro.get("max_size_mib", job.outputs.max_size_mib, "outputs.max_size_mib");
        if (ro.error()) {
            rd.fail(*ro.error());
        }
    }
    if (const auto* lg = rd.object("logs", "logs")) {
        Reader rl(*lg);
        rl.get("max_size_mib", job.logs.max_size_mib, "logs.max_size_mib");
        if (rl.error()) {
            rd.fail(*rl.error());
        }
    }
    if (const auto* cp = rd.object("checkpoint", "checkpoint")) {
        Reader rc(*cp);
        rc.get("every_s", job.checkpoint.every_s, "checkpoint.every_s");
        rc.get("grace_s", job.checkpoint.grace_s, "checkpoint.grace_s");
        if (rc.error()) {
            rd.fail(*rc.error());
        }
    }
    if (const auto* v = rd.object("verify", "verify")) {
        Reader rv(*v);
        std::string compare = to_string(job.verify.compare);
        rv.get("compare", compare, "verify.compare");
        rv.get("tolerance", job.verify.tolerance, "verify.tolerance");
        rv.get("files", job.verify.files, "verify.files");
        if (rv.error()) {
            rd.fail(*rv.error());
        } else if (auto m = compare_mode_from_string(compare)) {
            job.verify.compare = *m;
        } else {
            rd.fail(field_error("verify.compare", "must be \"exact\", \"json\" or \"none\""));
        }
    }
    if (const auto* mu = rd.object("model_use", "model_use")) {
        Reader rm(*mu);
        rm.get("dtype", job.model_use.dtype, "model_use.dtype");
        rm.get("max_tokens", job.model_use.max_tokens, "model_use.max_tokens");
        rm.get("batch", job.model_use.batch, "model_use.batch");
        if (rm.error()) {
            rd.fail(*rm.error());
        }
    }
    if (const auto* rt = rd.object("retry", "retry")) {
        Reader rr(*rt);
        rr.get("max_attempts", job.retry.max_attempts, "retry.max_attempts");
        rr.get("on_exit_codes", job.retry.on_exit_codes, "retry.on_exit_codes");
        if (rr.error()) {
            rd.fail(*rr.error());
        }
    }
}

// `origins`: at most k_max_origins objects of three strings, each checked (field_rules.hpp).
void read_origins(Reader& rd, const nlohmann::json& j, JobSpec& job) {
    auto it = j.find("origins");
    if (rd.error() || it == j.end() || it->is_null()) {
        return;
    }
    if (!it->is_array() || it->size() > k_max_origins) {
        rd.fail(field_error("origins", "expected an array of at most " + std::to_string(k_max_origins) + " origins"));
        return;
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
        const std::string field = element("origins", i);
        const auto& o = (*it)[i];
        if (!o.is_object()) {
            rd.fail(field_error(field, std::string("expected an object, got ") + o.type_name()));
            return;
        }
        Origin origin;
        Reader ro(o);
        ro.get("recipe", origin.recipe, field + ".recipe", true);
        ro.get("repo", origin.repo, field + ".repo", true);
        ro.get("revision", origin.revision, field + ".revision");
        if (ro.error()) {
            rd.fail(*ro.error());
            return;
        }
        if (auto st = with_field(check_origin(origin), field); !st) {
            rd.fail(st.error());
            return;
        }
        job.origins.push_back(std::move(origin));
    }
}

// The same invariants the TOML parser guarantees; sets the job's priority from its name.
Status check_job(JobSpec& job, const std::string& priority) {
    const Resources& r = job.resources;
    if (priority == "low") {
        job.priority = Priority::low;
    } else if (priority == "high") {
        job.priority = Priority::high;
    } else if (priority != "normal") {
        return field_error("priority", "expected \"low\", \"normal\" or \"high\"");
    }
    if (job.name.empty() || job.name.size() > 256) {
        return field_error("name", "must be 1 to 256 characters");
    }
    if (auto st = check_strings(job); !st) {
        return st;
    }
    if (job.command.empty() || (job.shell && job.command.size() != 1)) {
        return field_error("command", job.shell ? "a shell command is exactly one string" : "must not be empty");
    }
    if (r.gpus < 0 || r.gpus > 1) {
        return field_error("resources.gpus", "must be 0 or 1");
    }
    if (r.gpus == 0 && (r.gpu_milli != 0 || r.gpu_memory_mib != 0)) {
        return field_error("resources.gpus", "a CPU-only job (gpus = 0) has no gpu_milli or gpu_memory_mib");
    }
    if (r.gpus == 1 && ((r.gpu_milli > 0) == (r.gpu_memory_mib > 0))) {
        return field_error("resources.gpu_milli", "a GPU job sets exactly one of gpu_milli and gpu_memory_mib");
    }
    if (r.gpu_milli < 0 || r.gpu_milli > resources::k_milli_per_unit) {
        return field_error("resources.gpu_milli", "must be from 0 to 1000");
    }
    if (r.gpu_memory_mib < 0 || r.gpu_memory_mib > resources::k_max_memory_mib) {
        return field_error("resources.gpu_memory_mib", "out of range");
    }
    if (r.cpu_milli <= 0 || r.cpu_milli > 1024 * resources::k_milli_per_unit) {
        return field_error("resources.cpu_milli", "must be from 1 to 1024000");
    }
    if (r.memory_mib <= 0 || r.memory_mib > resources::k_max_memory_mib) {
        return field_error("resources.memory_mib", "out of range");
    }
    if (r.disk_mib <= 0 || r.disk_mib > resources::k_max_memory_mib) {
        return field_error("resources.disk_mib", "out of range");
    }
    if (r.max_runtime_s <= 0 || r.max_runtime_s > resources::k_max_duration_s) {
        return field_error("resources.max_runtime_s", "must be from 1 to 2592000 seconds");
    }
    if (r.idle_timeout_s < -1 || r.idle_timeout_s > resources::k_max_duration_s) {
        return field_error("resources.idle_timeout_s",
                           "must be -1 (the pool's default), 0 (never) or up to 2592000 seconds");
    }
    if (job.outputs.max_size_mib < 0 || job.outputs.max_size_mib > k_max_outputs_mib) {
        return field_error("outputs.max_size_mib", "must be from 0 to " + std::to_string(k_max_outputs_mib));
    }
    if (job.logs.max_size_mib < 0 || job.logs.max_size_mib > k_max_log_mib) {
        return field_error("logs.max_size_mib", "must be from 0 (the pool's default) to " + std::to_string(k_max_log_mib));
    }
    if (job.checkpoint.every_s < 0 || job.checkpoint.every_s > resources::k_max_duration_s) {
        return field_error("checkpoint.every_s", "must be 0 (no checkpoints) or up to 2592000 seconds");
    }
    if (job.checkpoint.grace_s < 0 || job.checkpoint.grace_s > k_max_checkpoint_grace_s) {
        return field_error("checkpoint.grace_s", "must be from 0 to " + std::to_string(k_max_checkpoint_grace_s) + " seconds");
    }
    const resources::ModelUse& use = job.model_use;
    if (!use.dtype.empty() && !resources::is_model_dtype(use.dtype)) {
        return field_error("model_use.dtype", std::string("must be empty or one of ") + resources::k_model_dtypes);
    }
    if (use.max_tokens < 0 || use.max_tokens > resources::k_max_model_tokens) {
        return field_error("model_use.max_tokens",
                           "must be from 0 to " + std::to_string(resources::k_max_model_tokens));
    }
    if (use.batch < 1 || use.batch > resources::k_max_model_batch) {
        return field_error("model_use.batch", "must be from 1 to " + std::to_string(resources::k_max_model_batch));
    }
    if (job.retry.max_attempts < 1 || job.retry.max_attempts > 20) {
        return field_error("retry.max_attempts", "must be from 1 to 20");
    }
    if (!(job.verify.tolerance >= 0.0 && job.verify.tolerance <= k_max_verify_tolerance)) {
        return field_error("verify.tolerance", "must be from 0 to 1");
    }
    if (job.verify.files.size() > k_max_verify_files) {
        return field_error("verify.files", "at most " + std::to_string(k_max_verify_files) + " paths");
    }
    for (std::size_t i = 0; i < job.verify.files.size(); ++i) {
        if (auto st = with_field(check_output_path(job.verify.files[i]), element("verify.files", i)); !st) {
            return st.error();
        }
    }
    for (auto code : job.retry.on_exit_codes) {
        if (code < 1 || code > 255) {
            return field_error("retry.on_exit_codes", "exit codes are from 1 to 255");
        }
    }
    return {};
}

} // namespace

Result<JobSpec> job_from_json(const nlohmann::json& j) {
    if (!j.is_object()) {
        return field_error("job", std::string("expected an object, got ") + j.type_name());
    }
    JobSpec job;
    Reader rd(j);
    rd.get("name", job.name, "name", true);
    rd.get("image", job.image, "image", true);
    rd.get("command", job.command, "command", true);
    rd.get("shell", job.shell, "shell");
    rd.env("env", job.env, "env");
    rd.env("params", job.params, "params");
    rd.get("cache_models", job.cache_models, "cache_models");
    rd.get("sweep_index", job.sweep_index, "sweep_index");
    rd.get("recipe_sha256", job.recipe_sha256, "recipe_sha256");
    std::string priority = "normal";
    rd.get("priority", priority, "priority");
    read_tables(rd, job);
    read_origins(rd, j, job);
    if (rd.error()) {
        return *rd.error();
    }
    if (auto st = check_job(job, priority); !st) {
        return st.error();
    }
    return job;
}

} // namespace gpupool::recipe
