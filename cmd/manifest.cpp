#include "cmd/manifest.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/manifest_diff.hpp"
#include "cmd/remote.hpp"
#include "core/api/run_report.hpp"
#include "core/client/jobs_client.hpp"
#include "core/recipe/field_rules.hpp"
#include "core/recipe/image_ref.hpp"
#include "core/util/time_text.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>

namespace gpupool::cmd {

using nlohmann::json;

namespace {

// The member at a dotted path as text ("" when absent or null).
std::string text_at(const json& j, const std::string& path) {
    const json& v = manifest_member(j, path);
    if (v.is_null()) {
        return "";
    }
    return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string or_unknown(const std::string& s) { return s.empty() ? "(not known)" : s; }

void print_manifest(const json& m) {
    const json& outputs = m.value("outputs", json());
    std::cout << "job " << printable(text_at(m, "job.id")) << " " << printable(text_at(m, "job.name")) << " (attempt "
              << printable(text_at(m, "attempt.id")) << ", " << printable(text_at(m, "attempt.state"))
              << (text_at(m, "attempt.exit_code").empty() ? "" : ", exit " + text_at(m, "attempt.exit_code")) << ")\n";
    std::cout << "recipe    " << printable(or_unknown(text_at(m, "recipe.source"))) << " sha256 "
              << printable(or_unknown(text_at(m, "recipe.sha256"))) << '\n';
    for (const auto& o : m.value("recipe", json::object()).value("origins", json::array())) {
        std::cout << "  from    " << printable(text_at(o, "recipe")) << " in " << printable(text_at(o, "repo"))
                  << " at " << printable(or_unknown(text_at(o, "revision"))) << '\n';
    }
    std::cout << "image     " << printable(text_at(m, "image.reference")) << '\n'
              << "  digest  " << printable(or_unknown(text_at(m, "image.digest"))) << '\n'
              << "  id      " << printable(or_unknown(text_at(m, "image.id"))) << '\n';
    std::cout << "command   " << printable(m.value("command", json::array())) << '\n';
    const auto pairs = [](const json& obj, const char* label) {
        if (obj.is_object()) {
            for (const auto& [k, v] : obj.items()) {
                std::cout << label << printable(k) << "=" << printable(v.is_string() ? v.get<std::string>() : v.dump())
                          << '\n';
            }
        }
    };
    pairs(manifest_member(m, "env"), "env       ");
    pairs(manifest_member(m, "job.params"), "param     ");
    if (!text_at(m, "inputs.archive_sha256").empty()) {
        std::cout << "inputs    sha256 " << printable(text_at(m, "inputs.archive_sha256")) << '\n';
    }
    for (const auto& model : m.value("models", json::array())) {
        std::cout << "model     " << printable(text_at(model, "model")) << " at "
                  << printable(or_unknown(text_at(model, "revision"))) << '\n';
    }
    std::cout << "worker    " << printable(text_at(m, "worker.id")) << " " << printable(text_at(m, "worker.name"))
              << " (owner " << printable(text_at(m, "worker.owner_team")) << "), "
              << printable(or_unknown(text_at(m, "worker.runtime"))) << ", gpupool "
              << printable(or_unknown(text_at(m, "worker.version"))) << '\n';
    if (!text_at(m, "worker.gpu_model").empty()) {
        std::cout << "gpu       " << printable(text_at(m, "worker.gpu_model")) << ", driver "
                  << printable(or_unknown(text_at(m, "worker.driver_version"))) << ", CUDA "
                  << printable(or_unknown(text_at(m, "worker.cuda_version"))) << ", share held by "
                  << printable(or_unknown(text_at(m, "worker.enforcement"))) << '\n';
    }
    const json& a = m.value("attempt", json::object());
    if (a.value("started_at", json()).is_number_integer() && a.value("ended_at", json()).is_number_integer()) {
        std::cout << "ran       " << util::utc_text(a["started_at"].get<std::int64_t>()) << " to "
                  << util::utc_text(a["ended_at"].get<std::int64_t>()) << '\n';
    }
    if (outputs.is_object()) {
        std::cout << "outputs   " << printable(text_at(outputs, "entry_count")) << " entries, "
                  << printable(text_at(outputs, "file_bytes")) << " bytes, tree sha256 "
                  << printable(or_unknown(text_at(outputs, "tree_sha256"))) << '\n';
        for (const auto& e : outputs.value("entries", json::array())) {
            std::cout << "  " << printable(text_at(e, "path"))
                      << (text_at(e, "type") == "link"
                              ? " -> " + printable(text_at(e, "target"))
                              : "  " + printable(text_at(e, "size")) + " bytes  " + printable(text_at(e, "sha256")))
                      << '\n';
        }
        if (outputs.value("truncated", false)) {
            std::cout << "  (more entries than listed: the tree digest covers them all)\n";
        }
        if (!text_at(outputs, "error").empty()) {
            std::cout << "  " << printable(text_at(outputs, "error")) << '\n';
        }
    }
    const json& unknown = m.value("unknown", json::array());
    if (!unknown.empty()) {
        std::cout << "not known:\n";
        for (const auto& u : unknown) {
            std::cout << "  - " << printable(u) << '\n';
        }
    }
}

} // namespace

Result<recipe::JobSpec> pinned_spec(recipe::JobSpec spec, const json& manifest, bool allow_unpinned,
                                    std::vector<std::string>& notes) {
    const std::string digest = text_at(manifest, "image.digest");
    if (api::is_sha256_digest(digest)) {
        spec.image = recipe::pinned_image(spec.image, digest);
        notes.push_back("image pinned to " + spec.image);
    } else if (!allow_unpinned) {
        return make_error(ErrorCode::invalid_input,
                          "the image's digest is not known for this run (" + spec.image +
                              "): --allow-unpinned submits the reference as it resolves now",
                          "image");
    } else {
        notes.push_back("image NOT pinned (its digest is not known): " + spec.image);
    }
    for (auto& model : spec.cache_models) {
        std::string revision;
        for (const auto& m : manifest.value("models", json::array())) {
            if (recipe::model_repo(text_at(m, "model")) == recipe::model_repo(model)) {
                revision = text_at(m, "revision");
            }
        }
        if (!revision.empty()) {
            model = recipe::pinned_model(model, revision);
            notes.push_back("model pinned to " + model);
        } else if (!allow_unpinned) {
            return make_error(ErrorCode::invalid_input,
                              "the revision of model " + model +
                                  " is not known for this run: --allow-unpinned submits it as it resolves now",
                              "models");
        } else {
            notes.push_back("model NOT pinned (its revision is not known): " + model);
        }
    }
    if (auto st = recipe::validate_image_reference(spec.image); !st) {
        return st.error();
    }
    return spec;
}

int run_manifest(const ManifestOptions& o) {
    auto api = connect(o.global);
    if (!api) {
        return k_exit_failed;
    }
    auto m = client::JobsClient(*api).manifest(JobId(o.job), o.attempt > 0 ? std::optional<AttemptId>(AttemptId(o.attempt))
                                                                            : std::nullopt);
    if (!m) {
        report_error(o.global, m.error());
        return k_exit_failed;
    }
    if (o.global.json) {
        std::cout << m->dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    } else {
        print_manifest(*m);
    }
    return k_exit_ok;
}

int run_diff(const DiffOptions& o) {
    if (o.jobs.size() != 2) {
        report_error(o.global, make_error(ErrorCode::invalid_input, "expected `diff JOB JOB`", "jobs"));
        return k_exit_usage;
    }
    auto api = connect(o.global);
    if (!api) {
        return k_exit_failed;
    }
    client::JobsClient jobs(*api);
    std::vector<json> manifests;
    for (std::int64_t id : o.jobs) {
        auto m = jobs.manifest(JobId(id));
        if (!m) {
            report_error(o.global, m.error());
            return k_exit_failed;
        }
        manifests.push_back(std::move(*m));
    }
    const auto differences = diff_manifests(manifests[0], manifests[1]);
    if (o.global.json) {
        json out = json::array();
        for (const auto& d : differences) {
            out.push_back({{"field", d.field}, {"a", d.a}, {"b", d.b}});
        }
        std::cout << json{{"a", o.jobs[0]}, {"b", o.jobs[1]}, {"differences", out}}.dump(-1, ' ', false,
                                                                                         json::error_handler_t::replace)
                  << '\n';
    } else {
        for (std::size_t i = 0; i < 2; ++i) {
            std::cout << (i == 0 ? "a: job " : "b: job ") << o.jobs[i] << " attempt "
                      << printable(text_at(manifests[i], "attempt.id")) << " on worker "
                      << printable(text_at(manifests[i], "worker.name")) << '\n';
        }
        if (differences.empty()) {
            std::cout << "no differences: same image, command, environment, inputs, models, GPU and outputs\n";
        }
        for (const auto& d : differences) {
            std::cout << printable(d.field) << "\n  a: " << printable(d.a) << "\n  b: " << printable(d.b) << '\n';
        }
    }
    return differences.empty() ? k_exit_ok : k_exit_failed;
}

int run_repro(const ReproOptions& o) {
    auto api = connect(o.global);
    if (!api) {
        return k_exit_failed;
    }
    client::JobsClient jobs(*api);
    auto view = jobs.job(JobId(o.job));
    if (!view) {
        report_error(o.global, view.error());
        return k_exit_failed;
    }
    auto m = jobs.manifest(JobId(o.job));
    if (!m) {
        report_error(o.global, m.error());
        return k_exit_failed;
    }
    std::vector<std::string> notes;
    auto spec = pinned_spec(view->spec, *m, o.allow_unpinned, notes);
    if (!spec) {
        report_error(o.global, spec.error());
        return k_exit_failed;
    }
    if (o.dry_run) {
        if (o.global.json) {
            std::cout << json{{"job", o.job}, {"image", spec->image}, {"models", spec->cache_models}, {"notes", notes}}.dump()
                      << '\n';
        } else {
            for (const auto& n : notes) {
                std::cout << printable(n) << '\n';
            }
            std::cout << "dry run: nothing submitted\n";
        }
        return k_exit_ok;
    }
    api::SubmitRequest request;
    request.source = "repro of job " + std::to_string(o.job);
    request.jobs.push_back(std::move(*spec));
    auto reply = jobs.submit(request);
    if (!reply) {
        report_error(o.global, reply.error());
        return k_exit_failed;
    }
    const std::int64_t new_job = reply->jobs.empty() ? 0 : reply->jobs.front().value();
    if (o.global.json) {
        std::cout << json{{"job", new_job}, {"sweep", reply->sweep_id.value()}, {"repro_of", o.job}, {"notes", notes}}.dump()
                  << '\n';
    } else {
        for (const auto& n : notes) {
            std::cout << printable(n) << '\n';
        }
        std::cout << "submitted job " << new_job << ", a repro of job " << o.job << " (`gpupool diff " << o.job << " "
                  << new_job << "` once it ends)\n";
    }
    return k_exit_ok;
}

void register_manifest(Cli& cli) {
    auto o = std::make_shared<ManifestOptions>();
    CLI::App* sub = add_command(cli, "manifest", "What exactly ran for a job's result: image digest, recipe, inputs, "
                                                 "worker, GPU, driver, models and each output's SHA-256");
    sub->add_option("job", o->job, "Job id")->required()->check(CLI::PositiveNumber);
    sub->add_option("--attempt", o->attempt, "This attempt of the job (default: its latest, whose outputs fetch gets)")
        ->check(CLI::PositiveNumber);
    add_help_footer(sub, "gpupool manifest 12\ngpupool manifest 12 --json > job-12.manifest.json",
                    "docs/evidence.md (The manifest)", Reach::coordinator);
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_manifest(*o);
    });
    auto d = std::make_shared<DiffOptions>();
    CLI::App* diff = add_command(cli, "diff", "What differs between two jobs' results and what produced them (exit 1 "
                                              "when anything does)");
    diff->add_option("jobs", d->jobs, "JOB JOB")->required()->expected(2)->check(CLI::PositiveNumber);
    add_help_footer(diff, "gpupool diff 12 31      # job 31, a repro of 12: same digest, other GPU?",
                    "docs/evidence.md (The manifest)", Reach::coordinator);
    diff->callback([&cli, d] {
        d->global = cli.global;
        cli.exit_code = run_diff(*d);
    });
    auto r = std::make_shared<ReproOptions>();
    CLI::App* repro = add_command(cli, "repro", "Submit a job again, pinned to the image digest and model revisions "
                                                "its manifest records");
    repro->add_option("job", r->job, "Job id")->required()->check(CLI::PositiveNumber);
    repro->add_flag("--allow-unpinned", r->allow_unpinned,
                    "Submit even when the image's digest or a model's revision is not known (they resolve as now)");
    repro->add_flag("--dry-run", r->dry_run, "Say what would be pinned; submit nothing");
    add_help_footer(repro, "gpupool repro 12 && gpupool diff 12 <new job>", "docs/evidence.md (The manifest)",
                    Reach::coordinator);
    repro->callback([&cli, r] {
        r->global = cli.global;
        cli.exit_code = run_repro(*r);
    });
}

} // namespace gpupool::cmd
